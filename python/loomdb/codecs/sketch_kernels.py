"""numba kernels of the gradient codecs: SketchML's delta-binary keys (§3.4), the bucket of
each value (§3.2 Step 2), the MinMaxSketch's insert-min (§3.3) and the merge of the groups'
sorted key lists on decoding.

They import nothing of loomdb (the fuzzer compiles them before it instruments the rest).
``unpack_deltas`` reads possibly hostile bytes: it checks every read against the buffer and
reports a fault code (1 past the end, 2 a repeated key, 3 past 2**63 - 1) instead of raising.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)

MAX_KEY = np.uint64((1 << 63) - 1)


@njit(cache=True)
def pack_deltas(keys, widths):  # pragma: no cover
    n = len(keys)
    nflag = (n + 3) // 4
    out = np.zeros(nflag + n * widths[3], dtype=np.uint8)
    p = nflag
    prev = np.int64(0)
    for i in range(n):
        delta = keys[i] - prev
        prev = keys[i]
        f = 3
        for c in range(3):
            if delta < (np.int64(1) << (8 * widths[c])):
                f = c
                break
        out[i >> 2] = out[i >> 2] | (f << (2 * (i & 3)))
        for b in range(widths[f]):
            out[p + b] = (delta >> (8 * b)) & 0xFF
        p += widths[f]
    return out[:p]


@njit(cache=True)
def unpack_deltas(buf, start, n, widths):  # pragma: no cover
    keys = np.empty(n, dtype=np.int64)
    p = start + (n + 3) // 4
    prev = np.uint64(0)
    for i in range(n):
        f = (buf[start + (i >> 2)] >> (2 * (i & 3))) & 3
        w = widths[f]
        if p + w > len(buf):
            return keys, p, 1
        delta = np.uint64(0)
        for b in range(w):
            delta |= np.uint64(buf[p + b]) << np.uint64(8 * b)
        p += w
        if i > 0 and delta == 0:
            return keys, p, 2
        if delta > MAX_KEY - prev:
            return keys, p, 3
        prev += delta
        keys[i] = np.int64(prev)
    return keys, p, 0


@njit(cache=True)
def bucket_of(magnitudes, edges):  # pragma: no cover
    """The bucket of each magnitude (see the module docstring for ties): a binary search for
    the first split >= m; a split repeated there is m's own zero-width bucket."""
    last = len(edges) - 2
    out = np.empty(len(magnitudes), dtype=np.int64)
    for i in range(len(magnitudes)):
        m = magnitudes[i]
        lo, hi = 0, len(edges)
        while lo < hi:
            mid = (lo + hi) >> 1
            if edges[mid] < m:
                lo = mid + 1
            else:
                hi = mid
        j = lo if lo + 1 < len(edges) and edges[lo] == m and edges[lo + 1] == m else lo - 1
        out[i] = min(max(j, 0), last)
    return out


@njit(cache=True)
def insert_min(cells, cols, dist):  # pragma: no cover
    for i in range(cols.shape[0]):
        for j in range(cols.shape[1]):
            c = cols[i, j]
            if dist[j] < cells[i, c]:
                cells[i, c] = dist[j]


@njit(cache=True)
def merge_runs(keys, values, ends):  # pragma: no cover
    """Sorted runs of keys (run i ends at ``ends[i]``) merged into one sorted array, their
    values alongside: a linear scan of the run heads, for a few runs."""
    runs = len(ends)
    heads = np.empty(runs, dtype=np.int64)
    for r in range(runs):
        heads[r] = 0 if r == 0 else ends[r - 1]
    out_k = np.empty(len(keys), dtype=np.int64)
    out_v = np.empty(len(keys), dtype=np.float64)
    for i in range(len(keys)):
        best, key = -1, np.int64(0)
        for r in range(runs):
            h = heads[r]
            if h < ends[r] and (best < 0 or keys[h] < key):
                best, key = r, keys[h]
        out_k[i] = key
        out_v[i] = values[heads[best]]
        heads[best] += 1
    return out_k, out_v
