"""numba kernels of TOC: the LZW parse (Algorithm 1, phase II), rebuilding the decode tree
(Algorithm 2) and the tree passes of the matrix operations (Algorithms 4, 5, 7, 8).

Parents always precede children, so the right multiplications scan the tree forwards and the
left ones backwards.  ``build_tree`` validates every code of a possibly hostile blob before
using it and returns a negative count instead of indexing out of bounds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1


@njit(cache=True)
def _slot(keys, key):  # pragma: no cover
    mask = len(keys) - 1
    h = (key * np.int64(-7046029254386353131)) & mask  # multiplicative hashing
    while keys[h] != EMPTY and keys[h] != key:
        h = (h + 1) & mask
    return h


@njit(cache=True)
def lzw_encode(pair_ids, row_starts, n_pairs):  # pragma: no cover
    """Codes of every row over a tree whose first layer is pairs 1..n_pairs."""
    nnz = len(pair_ids)
    capacity = 16
    while capacity < 2 * nnz + 16:
        capacity *= 2
    keys = np.full(capacity, EMPTY, dtype=np.int64)
    children = np.zeros(capacity, dtype=np.int64)
    stride = np.int64(n_pairs + 1)
    codes = np.empty(nnz, dtype=np.int64)
    code_starts = np.empty(len(row_starts) - 1, dtype=np.int64)
    ncodes = 0
    next_id = n_pairs + 1
    for r in range(len(row_starts) - 1):
        i, end = row_starts[r], row_starts[r + 1]
        code_starts[r] = ncodes
        while i < end:
            node = pair_ids[i]
            j = i + 1
            while j < end:
                h = _slot(keys, node * stride + pair_ids[j])
                if keys[h] == EMPTY:
                    break
                node = children[h]
                j += 1
            codes[ncodes] = node
            ncodes += 1
            if j < end:  # a new node: the match plus the next pair, never across rows
                h = _slot(keys, node * stride + pair_ids[j])
                keys[h] = node * stride + pair_ids[j]
                children[h] = next_id
                next_id += 1
            i = j
    return codes[:ncodes], code_starts


@njit(cache=True)
def build_tree(n_pairs, codes, starts_ext):  # pragma: no cover
    """(parent, key pair id, size) of C′; size < 0 when a code points forward or to the root."""
    size = 1 + n_pairs
    for r in range(len(starts_ext) - 1):
        k = starts_ext[r + 1] - starts_ext[r]
        if k > 1:
            size += k - 1
    parent = np.zeros(size, dtype=np.int64)
    key = np.zeros(size, dtype=np.int64)
    first = np.zeros(size, dtype=np.int64)
    for i in range(1, n_pairs + 1):
        key[i] = i
        first[i] = i
    nxt = n_pairs + 1
    for r in range(len(starts_ext) - 1):
        s, e = starts_ext[r], starts_ext[r + 1]
        for j in range(s, e):
            c = codes[j]
            if c < 1 or c >= nxt:
                return parent, key, -1
            if j + 1 < e:
                c2 = codes[j + 1]
                if c2 < 1 or c2 >= nxt:
                    return parent, key, -1
                parent[nxt] = c
                first[nxt] = first[c]
                key[nxt] = first[c2]
                nxt += 1
    return parent, key, size


@njit(cache=True)
def matvec(parent, kcol, kval, codes, starts_ext, v):  # pragma: no cover
    H = np.empty(len(parent))
    H[0] = 0.0
    for i in range(1, len(parent)):
        H[i] = kval[i] * v[kcol[i]] + H[parent[i]]
    out = np.zeros(len(starts_ext) - 1)
    for r in range(len(out)):
        acc = 0.0
        for j in range(starts_ext[r], starts_ext[r + 1]):
            acc += H[codes[j]]
        out[r] = acc
    return out


@njit(cache=True)
def matmat(parent, kcol, kval, codes, starts_ext, M):  # pragma: no cover
    k = M.shape[1]
    H = np.zeros((len(parent), k))
    for i in range(1, len(parent)):
        p, c, x = parent[i], kcol[i], kval[i]
        for t in range(k):
            H[i, t] = x * M[c, t] + H[p, t]
    out = np.zeros((len(starts_ext) - 1, k))
    for r in range(len(starts_ext) - 1):
        for j in range(starts_ext[r], starts_ext[r + 1]):
            node = codes[j]
            for t in range(k):
                out[r, t] += H[node, t]
    return out


@njit(cache=True)
def rmatvec(parent, kcol, kval, codes, starts_ext, u, cols):  # pragma: no cover
    H = np.zeros(len(parent))
    for r in range(len(starts_ext) - 1):
        for j in range(starts_ext[r], starts_ext[r + 1]):
            H[codes[j]] += u[r]
    out = np.zeros(cols)
    for i in range(len(parent) - 1, 0, -1):
        out[kcol[i]] += kval[i] * H[i]
        H[parent[i]] += H[i]
    return out


@njit(cache=True)
def rmatmat(parent, kcol, kval, codes, starts_ext, U, cols):  # pragma: no cover
    k = U.shape[0]
    H = np.zeros((len(parent), k))
    for r in range(len(starts_ext) - 1):
        for j in range(starts_ext[r], starts_ext[r + 1]):
            node = codes[j]
            for t in range(k):
                H[node, t] += U[t, r]
    out = np.zeros((k, cols))
    for i in range(len(parent) - 1, 0, -1):
        p, c, x = parent[i], kcol[i], kval[i]
        for t in range(k):
            out[t, c] += x * H[i, t]
            H[p, t] += H[i, t]
    return out


@njit(cache=True)
def decode_dense(parent, kcol, kval, codes, starts_ext, cols):  # pragma: no cover
    """Algorithm 6: every code's sequence, by following parents to the root."""
    out = np.zeros((len(starts_ext) - 1, cols))
    for r in range(len(starts_ext) - 1):
        for j in range(starts_ext[r], starts_ext[r + 1]):
            node = codes[j]
            while node != 0:
                out[r, kcol[node]] = kval[node]
                node = parent[node]
    return out
