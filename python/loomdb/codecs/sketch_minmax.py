"""MinMaxSketch (SketchML §3.3): one group's bucket indexes kept in s hash rows of t cells.

Faithful to §3.3: row i hashes a key to column ``h_i(key)``; inserting keeps the **minimum**
in each cell, querying returns the **maximum** over the rows.  What is stored is a key's
distance from its group's zero-side edge (0 = the bucket nearest zero, q/r - 1 the farthest),
so a cell never grows past any key that hashed into it, a query never returns more than the
key's own distance, and a decoded magnitude is never above its bucket's nor of the other sign.
Cells start at the farthest distance, q/r - 1 (the "farthest from zero" sentinel).  One byte a
cell, as ``ceil(log2(q) / 8)`` is 1 for q = 256.

The hash functions: ``h_i(k) = mix(k XOR mix(seed · 2**8 + i + 1)) mod t`` with ``mix`` the
splitmix64 finaliser — seeded, so the seed travels in the message and the receiver rebuilds the
same functions.
"""

from __future__ import annotations

import numpy as np

from loomdb.codecs.sketch_kernels import insert_min

MAX_ROWS = 16  # s: the paper uses 2 (its appendix tries 4)
M1, M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * M1
    x = (x ^ (x >> np.uint64(27))) * M2
    return x ^ (x >> np.uint64(31))


def columns(keys: np.ndarray, seed: int, rows: int, t: int) -> np.ndarray:
    """``(rows, len(keys))`` column of each key in each row."""
    salts = mix(np.uint64(seed) * np.uint64(256) + np.arange(1, rows + 1, dtype=np.uint64))
    hashed = mix(keys.astype(np.uint64)[None, :] ^ salts[:, None])
    return (hashed % np.uint64(t)).astype(np.int64)


def build(keys: np.ndarray, dist: np.ndarray, seed: int, rows: int, t: int, far: int) -> np.ndarray:
    """The ``(rows, t)`` uint8 cells after inserting every (key, distance)."""
    cells = np.full((rows, t), far, dtype=np.uint8)
    insert_min(cells, columns(keys, seed, rows, t), dist.astype(np.uint8))
    return cells


def query(cells: np.ndarray, keys: np.ndarray, seed: int) -> np.ndarray:
    """Each key's distance: the maximum over the rows of its cells."""
    rows, t = cells.shape
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    cols = columns(keys, seed, rows, t)
    return cells[np.arange(rows)[:, None], cols].max(axis=0).astype(np.int64)
