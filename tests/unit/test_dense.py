"""The dense record: its header is checked against the bytes that follow it, before anything is
allocated (round trips, truncations and mutations: the codec kit, tests/unit/test_codecs.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from loomdb.codecs import dense
from loomdb.errors import LoomFormatError, LoomOptionError

GOOD = dense.encode(np.arange(6.0).reshape(2, 3))


def _header(magic=b"LD", version=1, code=8, rows=2, cols=3) -> bytes:
    return struct.pack("<2sBBII", magic, version, code, rows, cols)


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_header(magic=b"XX") + GOOD[12:], "not a dense record of version 1"),
        (_header(version=2) + GOOD[12:], "version 2"),
        (_header(code=2) + GOOD[12:], "dtype code 2"),
        (_header(rows=3) + GOOD[12:], "holds 60 bytes; its 3×3 header says 84"),
        # a header claiming 2³²−1 × 2³²−1 cells over no data: rejected, nothing allocated
        (_header(rows=2**32 - 1, cols=2**32 - 1), "holds 12 bytes"),
        (GOOD[:11], "shorter than its 12-byte header"),
        (None, "a dense record is NULL"),
    ],
)
def test_hostile_records(blob, message):
    with pytest.raises(LoomFormatError, match=message):
        dense.decode(blob)


def test_memoryview_and_bytearray_decode_like_bytes():
    for blob in (memoryview(GOOD), bytearray(GOOD), np.frombuffer(GOOD, dtype=np.uint8)):
        assert np.array_equal(dense.decode(blob), np.arange(6.0).reshape(2, 3))


def test_bad_arguments():
    with pytest.raises(LoomOptionError):
        dense.encode(np.zeros(3))
    with pytest.raises(LoomOptionError):
        dense.encode(np.zeros((2, 2)), dtype="int8")
