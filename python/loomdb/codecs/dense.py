"""The ``dense`` record: a minibatch as plain row-major floats behind a small header.

No paper section: this is the uncompressed baseline ("DEN" in TOC §6), stored one record per
minibatch like the compressed formats so that formats compare like for like.

Byte format, version 1 (little-endian)::

    offset 0  b"LD"          magic
           2  uint8  1       version
           3  uint8  code    8 = float64, 4 = float32
           4  uint32 rows
           8  uint32 cols
          12  rows·cols values, row-major

``decode`` reads only what the record holds: the header's rows·cols must match the bytes that
follow it exactly, so a hostile header cannot make it allocate more than the record's size.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from loomdb.codecs.blob import REBUILD, byte_view
from loomdb.errors import LoomFormatError, LoomOptionError

MAGIC = b"LD"
VERSION = 1
HEADER = struct.Struct("<2sBBII")
DTYPES: dict[int, Any] = {8: np.dtype("<f8"), 4: np.dtype("<f4")}


def encode(batch: np.ndarray, dtype: str = "float64") -> bytes:
    if batch.ndim != 2:
        raise LoomOptionError(f"a dense batch must be 2-D; got shape {batch.shape}")
    code = {"float64": 8, "float32": 4}.get(dtype)
    if code is None:
        raise LoomOptionError(f"dense dtype must be float64 or float32; got {dtype!r}")
    rows, cols = batch.shape
    return (
        HEADER.pack(MAGIC, VERSION, code, rows, cols)
        + np.ascontiguousarray(batch, dtype=DTYPES[code]).tobytes()
    )


def decode(blob: bytes | memoryview) -> np.ndarray:
    """The batch as float64 (float32 records are widened)."""
    view = byte_view(blob, "a dense record")
    if len(view) < HEADER.size:
        raise LoomFormatError(
            f"dense record of {len(view)} bytes is shorter than its {HEADER.size}-byte header",
            hint=REBUILD,
        )
    magic, version, code, rows, cols = HEADER.unpack_from(view)
    if magic != MAGIC or version != VERSION or code not in DTYPES:
        raise LoomFormatError(
            f"not a dense record of version {VERSION} (magic {magic!r}, version {version}, "
            f"dtype code {code})",
            hint="rebuild the index with this version of loomdb",
        )
    need = HEADER.size + rows * cols * code
    if len(view) != need:
        raise LoomFormatError(
            f"dense record holds {len(view)} bytes; its {rows}×{cols} header says {need}",
            hint=REBUILD,
        )
    values = np.frombuffer(view, dtype=DTYPES[code], offset=HEADER.size).reshape(rows, cols)
    if code == 8:  # float64: a view (no errstate to enter: it costs as much as the rest)
        return values
    with np.errstate(invalid="ignore"):  # a signalling NaN widens quietly: it is a value
        return values.astype(np.float64)
