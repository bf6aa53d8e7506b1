"""The storage rows' checksum is zlib's CRC-32 of the row's head and payload, whichever library
computes it: indexes stored before loomdb computed it with zlib-ng stay readable."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from loomdb.store import storage

UID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("size", [0, 1, 4095, 43_008, 1 << 20])
def test_the_checksum_is_zlibs_crc32_of_head_and_payload(size):
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    head = struct.pack("<16siiih", bytes.fromhex(UID), 7, 1, 256, 3)
    expected = zlib.crc32(payload, zlib.crc32(head))
    assert storage.checksum(UID, 7, 1, 256, 3, payload) == expected
    assert storage.checksum(UID, 7, 1, 256, 3, memoryview(payload)) == expected
    if size:
        flipped = bytes([payload[0] ^ 1]) + payload[1:]
        assert storage.checksum(UID, 7, 1, 256, 3, flipped) != expected
    assert storage.checksum(UID, 8, 1, 256, 3, payload) != expected
