"""The fixed 64-bit hash loaders use: hashed feature crosses and the Zipf generator's weights.

No paper section.  ``mix64`` is MurmurHash3's 64-bit finaliser (``fmix64``: xor-shift 33,
multiply by 0xff51afd7ed558ccd, xor-shift 33, multiply by 0xc4ceb9fe1a85ec53, xor-shift 33), a
bijection of 64-bit integers with full avalanche, computed in numpy's wrapping uint64
arithmetic: the same on every machine and every numpy, never seeded by the process (unlike
Python's ``hash``), so a file loaded twice, anywhere, gives the same table.

A *cross* of two features of one row, 0-based indexes i < j, is the column
``2^k + (mix64(i · 2^32 + j) mod 2^k)`` with value ``x_i · x_j`` (``cross_bits`` = k): crosses
live above the row's own features (which must be below 2^k), in a space of 2^k columns, as the
hashing trick of CTR pipelines builds them.  Two crosses of a row that land in the same column
are summed (a collision), and a sum of zero is dropped like any zero.
"""

from __future__ import annotations

import numpy as np

C1 = np.uint64(0xFF51AFD7ED558CCD)
C2 = np.uint64(0xC4CEB9FE1A85EC53)
S33 = np.uint64(33)


def mix64(keys: np.ndarray) -> np.ndarray:
    """MurmurHash3's fmix64 of each uint64 key."""
    x = np.asarray(keys, dtype=np.uint64).copy()
    x ^= x >> S33
    x *= C1
    x ^= x >> S33
    x *= C2
    x ^= x >> S33
    return x


def cross_columns(i: np.ndarray, j: np.ndarray, bits: int) -> np.ndarray:
    """The hashed column of the cross of features ``i < j`` (see the module docstring)."""
    keys = (np.asarray(i, dtype=np.uint64) << np.uint64(32)) | np.asarray(j, dtype=np.uint64)
    low = mix64(keys) & np.uint64((1 << bits) - 1)
    return (low + np.uint64(1 << bits)).astype(np.int64)


def with_crosses(
    indexes: list[int], values: list[float], bits: int
) -> tuple[list[int], list[float]]:
    """A row's features followed by its pairwise crosses (sorted, collisions summed)."""
    if len(indexes) < 2:
        return indexes, values
    ix, vs = np.asarray(indexes, dtype=np.int64), np.asarray(values, dtype=np.float64)
    a, b = np.triu_indices(len(ix), 1)
    columns, where = np.unique(cross_columns(ix[a], ix[b], bits), return_inverse=True)
    sums = np.bincount(where.ravel(), weights=vs[a] * vs[b], minlength=len(columns))
    kept = sums != 0.0
    return indexes + columns[kept].tolist(), values + sums[kept].tolist()


def unit_interval(seed: int, keys: np.ndarray) -> np.ndarray:
    """A uniform number in [0, 1) per key, fixed by ``seed`` (53 bits of ``mix64``)."""
    mixed = mix64(np.asarray(keys, dtype=np.uint64) ^ mix64(np.asarray([seed], dtype=np.uint64)))
    return (mixed >> np.uint64(11)).astype(np.float64) / float(1 << 53)
