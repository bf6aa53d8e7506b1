"""numba kernels of the MLWeaving layout: bit-plane weaving and unweaving.

Both are bit-serial loops over (group, chunk, bank, lane, plane) that skip zero values and zero
words, which is most of them on sparse data (MNIST is 81% zeros).  Words are little-endian
uint64: lane l is bit l; plane 0 is the most significant bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)


@njit(cache=True)
def weave_words(U: np.ndarray, groups: int, chunks: int) -> np.ndarray:  # pragma: no cover
    """uint32 (groups·8, chunks·64) → uint64 (32, groups, chunks, 8)."""
    out = np.zeros((32, groups, chunks, 8), dtype=np.uint64)
    for g in range(groups):
        for c in range(chunks):
            for k in range(8):
                row = g * 8 + k
                for lane in range(64):
                    u = U[row, c * 64 + lane]
                    if u == 0:
                        continue
                    bit = np.uint64(1) << np.uint64(lane)
                    for p in range(32):
                        if (u >> np.uint32(31 - p)) & np.uint32(1):
                            out[p, g, c, k] |= bit
    return out


@njit(cache=True, nogil=True)
def unweave_words(words: np.ndarray, s: int) -> np.ndarray:  # pragma: no cover
    """uint64 (≥ s, groups, chunks, 8) → uint32 (groups·8, chunks·64) from the first s planes."""
    _, groups, chunks, _ = words.shape
    out = np.zeros((groups * 8, chunks * 64), dtype=np.uint32)
    for p in range(s):
        weight = np.uint32(1) << np.uint32(31 - p)
        for g in range(groups):
            for c in range(chunks):
                for k in range(8):
                    w = words[p, g, c, k]
                    if w == 0:
                        continue
                    row = g * 8 + k
                    for lane in range(64):
                        if (w >> np.uint64(lane)) & np.uint64(1):
                            out[row, c * 64 + lane] |= weight
    return out
