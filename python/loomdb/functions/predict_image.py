"""``loom_predict_image`` and the image side of ``loom_evaluate``: a model trained on a pcr
index applied to JPEG images in SELECT, at any fidelity k.

PCR §3.2 ("Decoding"): an image read at k scans is its first k scan parts and an EOI.  An
image in a table is a plain JPEG, so reading it at k transcodes it losslessly to libjpeg's
default progression (jpegtran, as the index did), keeps k scans and appends an EOI; the model
sees the same feature vector (``imaging/pixels.py``) the index gave it at k.  Without k (or at
k ≥ the image's scans) the original is decoded as it is: lossless transcoding gives exactly its
pixels.  A NULL or unreadable image predicts NULL, like a row with a NaN feature; an image that
cannot be evaluated is counted as skipped.  Unreadable is what a pcr index refuses, at every k:
an image jpegtran does not transcode without a warning (corrupt data Pillow would decode
silently) is NULL without k as with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.codecs import jpeg_scans
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.functions import model_cache
from loomdb.imaging import pixels, pool, transcode
from loomdb.learn.model import LinearModel


def image_inputs(model: LinearModel, name: str) -> dict[str, Any]:
    """How ``model`` turns an image into features, or an error if it learnt from columns."""
    spec = model.inputs
    if not spec or spec.get("kind") != "image":
        raise LoomOptionError(
            f"model '{name}' was not trained on images",
            hint="train it on a pcr index (CREATE INDEX … USING pcr (image)), or use loom_predict",
        )
    return spec


def check_scans(scans: Any) -> int | None:
    if scans is None:
        return None
    if isinstance(scans, bool) or not isinstance(scans, (int, np.integer)) or scans < 1:
        raise LoomOptionError(
            f"scans must be a whole number of scan groups from 1; got {scans!r}",
            hint="leave it out (NULL) to read every scan",
        )
    return int(scans)


def at_fidelity(image: bytes, scans: int | None) -> bytes:
    """``image`` as read from a pcr record at ``scans`` scan groups (all when None).  Every
    fidelity transcodes it first, which refuses what a pcr index would not lay out (truncated
    or corrupt data, which Pillow decodes without a word): all scans give the original, whose
    pixels the transcoding keeps exactly."""
    parts = jpeg_scans.split(transcode.progressive(image))
    return image if scans is None or scans >= len(parts) else jpeg_scans.join(parts[:scans])


def features(images: Sequence[object], spec: dict[str, Any], scans: int | None) -> np.ndarray:
    """(n, features) float64 rows of ``images`` at ``scans``; NaN rows for unreadable ones."""
    size, color = int(spec["size"]), str(spec["color"])
    width = pixels.feature_count(size, color)

    def one(image: object) -> np.ndarray:
        if image is None:
            return np.full(width, np.nan)
        try:
            jpeg = at_fidelity(bytes(image), scans)  # type: ignore[call-overload]
            return pixels.features(jpeg, size, color) / 255.0
        except LoomFormatError:
            return np.full(width, np.nan)

    rows = pool.map_all(one, images)
    return np.stack(rows) if rows else np.zeros((0, width))


def predict_image(db: Any, name: str | None, image: Any, scans: Any = None) -> float | None:
    """The label (or value) ``name`` predicts for one JPEG read at ``scans`` scan groups."""
    if name is None or image is None:
        return None
    model = model_cache.load(db, name)
    X = features([image], image_inputs(model, name), check_scans(scans))
    value = float(model.predict(X)[0])
    return None if value != value else value
