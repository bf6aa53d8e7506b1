"""Gradient keys: SketchML's delta-binary encoding (§3.4) and raw fixed-width keys.

Delta-binary, faithful to §3.4: the sorted keys become deltas (the first from 0); each delta
is stored in the fewest of 1, 2, 3 or 4 bytes that hold it, little-endian, and its width in a
2-bit flag (00 = 1 byte, 01 = 2, 10 = 3, 11 = 4).  A list of n keys is ``ceil(n / 4)`` bytes
of flags (key i in bits 2·(i mod 4) of byte i div 4) followed by the deltas.

Departure, for keys the paper's 4-byte key space cannot hold (>= 2**32): a message whose
largest key is that big is marked WIDE (``sketch_format``) and its flags then mean 1, 2, 4 or 8
bytes.  Every message the paper's setting produces stays in the paper's layout.

Reading validates as it goes (numba kernel): a list that runs past the message, repeats a key
(a zero delta after the first) or passes 2**63 - 1 is refused, never read out of bounds.
"""

from __future__ import annotations

import numpy as np

from loomdb.codecs import sketch_kernels as kernels
from loomdb.codecs.sketch_format import Reader, broken

NARROW = np.array([1, 2, 3, 4], dtype=np.int64)  # bytes of flags 00, 01, 10, 11
WIDE_WIDTHS = np.array([1, 2, 4, 8], dtype=np.int64)
FAULTS = {1: "runs past the end of the message", 2: "repeats a key", 3: "passes 2**63 - 1"}


def widths(wide: bool) -> np.ndarray:
    return WIDE_WIDTHS if wide else NARROW


def pack_deltas(keys: np.ndarray, wide: bool) -> bytes:
    """The delta-binary bytes of sorted, unique, non-negative keys (int64)."""
    return kernels.pack_deltas(np.ascontiguousarray(keys, dtype=np.int64), widths(wide)).tobytes()


def read_deltas(reader: Reader, n: int, wide: bool, what: str) -> np.ndarray:
    """``n`` delta-binary keys at the reader's position (counted as section "keys")."""
    reader.need((n + 3) // 4 + n, f"{what} ({n:,} delta-binary keys)")  # >= 1 byte per key
    keys, end, fault = kernels.unpack_deltas(reader.buf, reader.pos, n, widths(wide))
    if fault:
        raise broken(f"{what}: its delta-binary keys {FAULTS[fault]}")
    reader.skip_accounted(end - reader.pos, "keys")
    return keys


def pack_raw(keys: np.ndarray, wide: bool) -> bytes:
    """Keys as plain 4-byte (8 if WIDE) little-endian integers: the baselines' raw keys."""
    return np.asarray(keys).astype("<u8" if wide else "<u4").tobytes()


def read_raw(reader: Reader, n: int, wide: bool) -> np.ndarray:
    keys = reader.array("<u8" if wide else "<u4", n, f"{n:,} raw keys", "keys")
    if wide and len(keys) and keys.max() > kernels.MAX_KEY:
        raise broken("a raw key passes 2**63 - 1")
    return keys.astype(np.int64)
