"""JPEG bytes → pixels (full size) and → the feature vector a model learns from.

No paper section for the features (PCR trains ResNets on 224² crops; loomdb's GLMs take a
small fixed-size vector).  The feature vector of an image, for ``size`` s and ``color``
``gray`` or ``rgb``, is:

1. decoded by Pillow (libjpeg-turbo) with DCT scaling (``Image.draft``): the smallest of 1/1,
   1/2, 1/4, 1/8 of full size that is still at least s × s, in ``L`` (libjpeg's luma, Y) or
   ``RGB``;
2. resized to exactly s × s with a box filter (each output pixel the mean of the input pixels
   it covers; the aspect ratio is not kept, nothing is cropped);
3. flattened row-major (channels last): s·s (gray) or 3·s·s (rgb) values 0 … 255.

The trainer scales them to [0, 1] (``store/formats/pcr.py``) and standardises them with the
index's per-feature statistics.  Decoding at any fidelity gives the same shape, so a model
trained at k scans predicts at any k.  Errors of the decoder (not a JPEG, truncated data, too
many pixels) are ``LoomFormatError``.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence

import numpy as np

from loomdb.codecs import jpeg_scans
from loomdb.errors import LoomFormatError, LoomStateError
from loomdb.imaging import pool

MODES = {"gray": "L", "rgb": "RGB"}
CHANNELS = {"gray": 1, "rgb": 3}


def feature_count(size: int, color: str) -> int:
    return size * size * CHANNELS[color]


def _image():
    try:
        from PIL import Image
    except ImportError as e:
        raise LoomStateError(
            f"Pillow is not installed here ({e}): loomdb decodes images with it",
            hint="pip install pillow (in PostgreSQL: loomdb pg install installs it)",
        ) from None
    return Image


def _open(jpeg: object):
    Image = _image()
    data = bytes(jpeg) if not isinstance(jpeg, bytes) else jpeg  # type: ignore[call-overload]
    try:
        im = Image.open(io.BytesIO(data), formats=["JPEG"])
    except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError…
        raise _unreadable(e) from None
    if im.size[0] * im.size[1] > jpeg_scans.MAX_PIXELS:
        im.close()
        raise LoomFormatError(
            f"a {im.size[0]} × {im.size[1]} image exceeds {jpeg_scans.MAX_PIXELS:,} pixels"
        )
    return im


def _unreadable(error: Exception) -> LoomFormatError:
    text = str(error) or type(error).__name__
    return LoomFormatError(
        f"not a readable JPEG: {text}",
        hint="store complete JPEG files (loomdb load images skips unreadable ones)",
    )


def _decoded(im, mode: str | None):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a DecompressionBombWarning is an error here
        try:
            im.load()
            return im if mode is None or im.mode == mode else im.convert(mode)
        except Exception as e:
            raise _unreadable(e) from None


def pixels(jpeg: object, mode: str | None = None) -> np.ndarray:
    """The image at full width × height as uint8 (H, W) for ``L`` or (H, W, 3) for ``RGB``
    (its own mode when ``mode`` is None; CMYK is converted to RGB)."""
    with _open(jpeg) as im:
        if mode is None:
            mode = "RGB" if im.mode not in ("L", "RGB") else im.mode
        return np.asarray(_decoded(im, mode), dtype=np.uint8)


def features(jpeg: object, size: int, color: str) -> np.ndarray:
    """The feature vector of one image (see the module docstring): uint8, length
    ``feature_count(size, color)``."""
    Image = _image()
    mode = MODES[color]
    with _open(jpeg) as im:
        im.draft(mode, (size, size))
        small = _decoded(im, mode).resize((size, size), Image.Resampling.BOX)
        return np.asarray(small, dtype=np.uint8).reshape(-1)


def features_all(jpegs: Sequence[object], size: int, color: str) -> np.ndarray:
    """(n, features) uint8: :func:`features` of every image, decoded in parallel."""
    rows = pool.map_all(lambda j: features(j, size, color), jpegs)
    width = feature_count(size, color)
    return np.stack(rows) if rows else np.zeros((0, width), dtype=np.uint8)


def check_readable(jpeg: object) -> jpeg_scans.Frame:
    """The frame of a JPEG that decodes completely (what the image loaders keep)."""
    frame = jpeg_scans.parse(jpeg)
    if frame.precision != 8:
        raise LoomFormatError(f"a {frame.precision}-bit JPEG is not supported")
    with _open(jpeg) as im:
        _decoded(im, None)
    return frame
