"""Records of named scalars and float64 arrays as bytes: what a parallel epoch's shards start
from and what they hand back, where they cross a process boundary (PostgreSQL's parallel
workers pass aggregate states as ``bytea``).

No paper section.  These bytes live for one statement and are never stored, but the SQL
functions that read them take them as arguments, so a malformed blob is a ``LoomFormatError``,
never a crash or an allocation its size does not back.  Byte format, version 1 (little-endian)::

    offset 0  b"LE"          magic
           2  uint8  1       version
           3  uint8  0       reserved
           4  uint32 h       length of the JSON header
           8  h bytes        JSON: a list of records {"scalars": {…}, "arrays": [[name, shape]…]}
           8+h               every record's arrays in order, float64, C order, nothing after

Arrays come back as read-only views of the blob (``np.frombuffer``, no copy): copy one before
changing it.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from loomdb.codecs.blob import byte_view
from loomdb.errors import LoomFormatError

MAGIC = b"LE"
VERSION = 1
HEAD = struct.Struct("<2sBBI")
FLOAT = np.dtype("<f8")
HINT = "these are the internal states of a parallel epoch: let loom_train pass them"

Record = tuple[dict[str, Any], dict[str, np.ndarray]]


def pack(records: list[Record]) -> bytes:
    """The bytes of ``records``, each ``(scalars, arrays)``; scalars must be JSON values."""
    header, blobs = [], []
    for scalars, arrays in records:
        shapes = []
        for name, array in arrays.items():
            a = np.ascontiguousarray(array, dtype=FLOAT)
            shapes.append([name, list(a.shape)])
            blobs.append(a.tobytes())
        header.append({"scalars": scalars, "arrays": shapes})
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    return HEAD.pack(MAGIC, VERSION, 0, len(text)) + text + b"".join(blobs)


def unpack(blob: Any) -> list[Record]:
    """The records of ``blob``; a ``LoomFormatError`` for anything ``pack`` did not write."""
    view = byte_view(blob, "a parallel epoch state")
    if len(view) < HEAD.size:
        raise _broken(f"{len(view)} bytes are shorter than its header")
    magic, version, _, size = HEAD.unpack_from(view)
    if magic != MAGIC or version != VERSION:
        raise _broken(f"it starts {bytes(view[:3])!r}, not a version {VERSION} state")
    if size > len(view) - HEAD.size:
        raise _broken(f"its header claims {size} bytes; {len(view) - HEAD.size} follow")
    try:
        header = json.loads(bytes(view[HEAD.size : HEAD.size + size]))
    except (UnicodeDecodeError, ValueError):
        raise _broken("its header is not JSON") from None
    offset = HEAD.size + size
    records: list[Record] = []
    for entry in _list(header):
        scalars, shapes = _entry(entry)
        arrays = {}
        for name, shape in shapes:
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            end = offset + count * FLOAT.itemsize
            if end > len(view):
                raise _broken(f"array {name!r} runs past the end of the state")
            arrays[name] = np.frombuffer(view, FLOAT, count, offset).reshape(shape)
            offset = end
        records.append((scalars, arrays))
    if offset != len(view):
        raise _broken(f"{len(view) - offset} bytes follow its last array")
    return records


def _list(header: Any) -> list[Any]:
    if not isinstance(header, list):
        raise _broken("its header is not a list of records")
    return header


def _entry(entry: Any) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...]]]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("scalars"), dict):
        raise _broken("a record has no scalars")
    shapes = entry.get("arrays")
    if not isinstance(shapes, list):
        raise _broken("a record has no array list")
    out = []
    for item in shapes:
        ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        dims = item[1] if ok else None
        if not (
            isinstance(dims, list)
            and len(dims) <= 2
            and all(isinstance(d, int) and 0 <= d < 2**31 for d in dims)
        ):
            raise _broken(f"a record names a malformed array {item!r:.60}")
        out.append((item[0], tuple(dims)))
    return entry["scalars"], out


def _broken(what: str) -> LoomFormatError:
    return LoomFormatError(f"malformed parallel epoch state: {what}", hint=HINT)
