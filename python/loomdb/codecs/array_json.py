"""Large numeric arrays inside catalog JSON, as base64 of their little-endian bytes.

No paper section.  The catalog keeps arrays as JSON text on both engines; a model or index over
a million sparse columns would make a JSON list of millions of numbers (tens of MB, seconds to
parse).  A numpy array is written instead as one small object::

    {"ndarray": 1, "dtype": "<f8", "shape": [rows, cols], "base64": "…"}

(``ndarray`` is this encoding's version; dtypes ``<f8`` and ``<i8`` only), and read back as a
numpy array.  Plain lists are untouched, so every catalog row written before stays as it was.
Reading is strict: an object that claims the ``ndarray`` key but is malformed is an error,
never a silently different value.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from loomdb.errors import LoomFormatError

VERSION = 1
KEYS = {"ndarray", "dtype", "shape", "base64"}
DTYPES = {"<f8": np.float64, "<i8": np.int64}
HINT = "the catalog row was edited by hand or damaged: train or build it again"


def default(value: Any) -> Any:
    """``json.dumps(..., default=default)``: numpy arrays (and scalars) as JSON."""
    if isinstance(value, np.ndarray):
        kind = "<i8" if np.issubdtype(value.dtype, np.integer) else "<f8"
        data = np.ascontiguousarray(value, dtype=kind)
        return {
            "ndarray": VERSION,
            "dtype": kind,
            "shape": list(data.shape),
            "base64": base64.b64encode(data.tobytes()).decode("ascii"),
        }
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def hook(obj: dict[str, Any]) -> Any:
    """``json.loads(..., object_hook=hook)``: the arrays :func:`default` wrote, as numpy."""
    if "ndarray" not in obj:
        return obj
    if set(obj) != KEYS or obj["ndarray"] != VERSION or obj["dtype"] not in DTYPES:
        raise LoomFormatError(
            f"an array in the catalog has keys {sorted(obj)}, version {obj.get('ndarray')!r}, "
            f"dtype {obj.get('dtype')!r}; expected version {VERSION}, <f8 or <i8",
            hint=HINT,
        )
    shape = obj["shape"]
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise LoomFormatError(f"an array in the catalog has shape {shape!r}", hint=HINT)
    try:
        raw = base64.b64decode(obj["base64"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise LoomFormatError("an array in the catalog is not valid base64", hint=HINT) from None
    dtype = np.dtype(obj["dtype"])
    if len(raw) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise LoomFormatError(
            f"an array in the catalog holds {len(raw)} bytes, not a {shape} array", hint=HINT
        )
    return np.frombuffer(raw, dtype=dtype).astype(DTYPES[obj["dtype"]]).reshape(shape)
