"""Lossless transcoding of a JPEG to a progressive JPEG with libjpeg-turbo's ``jpegtran``.

PCR §3.2: "Our implementation uses JPEGTRAN to (losslessly) transform the set of JPEG images
into a set of progressive JPEG images.  With the default settings, each JPEG is broken up into
10 scans."  ``jpegtran -progressive`` rewrites the quantised DCT coefficients, untouched, with
libjpeg's default progression (``jpeg_simple_progression``: 10 scans for YCbCr, 6 for
grayscale, 2 + 4 per component otherwise), so decoding all scans gives the original's pixels
exactly; nothing here re-encodes pixels (that would be lossy, and not PCR).  ``-copy none``
drops APPn/COM markers (EXIF thumbnails, comments): they are not pixels, and would otherwise
ride in every read of scan group 1.

jpegtran runs as a child process (Debian: ``apt-get install libjpeg-turbo-progs``), also inside
the PostgreSQL server, so a hostile image can at worst fail that process.  Before it runs, the
image's structure is parsed and its size capped (``codecs/jpeg_scans``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from loomdb.codecs import jpeg_scans
from loomdb.errors import LoomFormatError, LoomStateError
from loomdb.imaging import pool

FALLBACK = "/usr/bin/jpegtran"  # where Debian puts it; a server's PATH may be minimal
TIMEOUT_S = 60
INSTALL = "install libjpeg-turbo's tools (Debian: apt-get install libjpeg-turbo-progs)"


def jpegtran() -> str:
    """The jpegtran program, or a ``LoomStateError`` saying how to install it."""
    found = shutil.which("jpegtran") or (FALLBACK if os.access(FALLBACK, os.X_OK) else None)
    if found is None:
        raise LoomStateError("jpegtran is not installed on this machine", hint=INSTALL)
    return found


def progressive(jpeg: bytes) -> bytes:
    """``jpeg`` losslessly transcoded to libjpeg's default progression (a ``LoomFormatError``
    when it is not a JPEG jpegtran reads without a warning: truncated, corrupt…)."""
    frame = jpeg_scans.parse(jpeg)  # structure and size caps before jpegtran allocates
    if frame.precision != 8:
        raise LoomFormatError(
            f"a {frame.precision}-bit JPEG is not supported (8-bit samples only)",
            hint="convert the image to an 8-bit JPEG first",
        )
    try:
        done = subprocess.run(
            [jpegtran(), "-progressive", "-copy", "none"],
            input=bytes(jpeg),
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LoomFormatError(f"jpegtran ran past {TIMEOUT_S} s on an image") from None
    except OSError as e:
        raise LoomStateError(f"cannot run jpegtran: {e}", hint=INSTALL) from None
    if done.returncode != 0 or not done.stdout:  # 2: a warning (premature end, corrupt data)
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LoomFormatError(
            "not a readable JPEG: jpegtran says " + (why[-1] if why else f"exit {done.returncode}"),
            hint="store complete JPEG files (loomdb load images skips unreadable ones)",
        )
    return done.stdout


def progressive_all(jpegs: Sequence[bytes]) -> list[bytes]:
    """:func:`progressive` of every image, in parallel."""
    return pool.map_all(progressive, jpegs)
