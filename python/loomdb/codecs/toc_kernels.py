"""numba kernels of TOC: the LZW parse (Algorithm 1, phase II), rebuilding the decode tree
(Algorithm 2) and the tree passes of the matrix operations (Algorithms 4, 5, 7, 8).

Parents always precede children, so the right multiplications scan the tree forwards and the
left ones backwards.  ``build_tree`` validates every code of a possibly hostile blob before
using it (and that no row names a column twice) and reports a fault instead of indexing out of
bounds; the other kernels trust a tree it accepted.  The kernels a read and the products run
are compiled ``nogil``: they touch no Python object, so a parallel train's threads
(``learn/shard_threads``) run them at the same time.
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


@njit(cache=True, nogil=True)
def build_tree(icol, codes, starts_ext):  # pragma: no cover
    """(parent, key pair id, fault) of C′ (Algorithm 2), checking every code of a hostile blob.

    ``fault`` is ``[kind, row, a, b]``: kind 0 all is well; 1 row ``row`` has code ``a`` that
    points forward, to the root or past the tree; 2 row ``row`` names column ``a`` after column
    ``b`` (``a == b``: twice); 3 first-layer pair ``row`` (of column ``a``) starts no code.
    Columns must strictly increase along a row (TOC §3.1 emits the pairs in column order), else
    ``toarray`` (which assigns) and the products (which add) would disagree.  One check per
    adjacent pair of codes covers a whole row: every node is made from two adjacent codes, so
    by induction each node's own sequence is increasing, and a row is increasing when each
    code's first column follows the previous code's last.  Every first-layer pair is a distinct
    pair of the data, and its first appearance always starts a code (Algorithm 1), so an unused
    one is forged — and v·A would add its value times zero (NaN for a NaN or ∞ value) to a
    column the dense decode leaves alone.  O(|D| + |I|).
    """
    n_pairs = len(icol)
    size = 1 + n_pairs
    for r in range(len(starts_ext) - 1):
        k = starts_ext[r + 1] - starts_ext[r]
        if k > 1:
            size += k - 1
    fault = np.zeros(4, dtype=np.int64)
    parent = np.zeros(size, dtype=np.int64)
    key = np.zeros(size, dtype=np.int64)  # a node's last pair; first-layer node i is pair i
    first = np.zeros(size, dtype=np.int64)  # a node's first pair
    for i in range(1, n_pairs + 1):
        key[i] = i
        first[i] = i
    nxt = n_pairs + 1
    for r in range(len(starts_ext) - 1):
        prev = 0
        for j in range(starts_ext[r], starts_ext[r + 1]):
            c = codes[j]
            if c < 1 or c >= nxt:
                fault[0], fault[1], fault[2], fault[3] = 1, r, c, nxt
                return parent, key, fault
            if prev:
                last, head = icol[key[prev] - 1], icol[first[c] - 1]
                if head <= last:
                    fault[0], fault[1], fault[2], fault[3] = 2, r, head, last
                    return parent, key, fault
                parent[nxt] = prev  # a new node: the previous code's sequence + c's first pair
                first[nxt] = first[prev]
                key[nxt] = first[c]
                nxt += 1
            prev = c
    used = np.zeros(n_pairs + 1, dtype=np.bool_)
    for j in range(len(codes)):
        used[first[codes[j]]] = True
    for i in range(1, n_pairs + 1):
        if not used[i]:
            fault[0], fault[1], fault[2], fault[3] = 3, i - 1, icol[i - 1], 0
            return parent, key, fault
    return parent, key, fault


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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
