"""numba kernels of TOC: the LZW parse (Algorithm 1, phase II), the decode tree (Algorithm 2)
and the tree passes of the matrix operations (Algorithms 4, 5, 7, 8).

Parents always precede children, so the right multiplications scan the tree forwards and the
left ones backwards.  These kernels trust the tree ``toc_read.read`` built and checked: it
validates every code of a possibly hostile blob and reports a fault instead of indexing out of
bounds.
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
def build_tree(icol, codes, starts):  # pragma: no cover
    """(parent, key pair id) of every node of C′ (Algorithm 2), for a blob ``toc_read`` read."""
    n_pairs = len(icol)
    size = 1 + n_pairs + len(codes) - (np.diff(starts) > 0).sum()
    parent = np.zeros(size, dtype=np.int64)
    key = np.arange(size)  # a node's last pair; first-layer node i is pair i
    first = np.arange(size)  # a node's first pair
    nxt = n_pairs + 1
    for r in range(len(starts) - 1):
        for j in range(starts[r] + 1, starts[r + 1]):
            parent[nxt] = codes[j - 1]  # the previous code's sequence + this code's first pair
            first[nxt] = first[codes[j - 1]]
            key[nxt] = first[codes[j]]
            nxt += 1
    return parent, key


# The operations run over the tree ``toc_read.read`` returns: node 0 the root, nodes 1…I the
# first layer (pair i − 1 of ``icol``/``values``), nodes I + 1 + k the kept nodes (parent
# ``nparent[k]``, key pair ``nkey[k]``).  Each pass adds in the order the whole tree's pass did.


@njit(cache=True)
def matvec(icol, values, nparent, nkey, codes, starts, v):  # pragma: no cover
    """A·v (Algorithm 4): H[i] = key(i)·v + H[parent(i)] forwards, then each row's codes."""
    n_pairs = len(icol)
    H = np.empty(1 + n_pairs + len(nparent))
    H[0] = 0.0
    for i in range(n_pairs):
        H[i + 1] = values[i] * v[icol[i]] + 0.0  # + H[root]: as the whole tree's pass adds
    for k in range(len(nparent)):
        p = nkey[k] - 1
        H[n_pairs + 1 + k] = values[p] * v[icol[p]] + H[nparent[k]]
    out = np.empty(len(starts) - 1)
    for r in range(len(out)):
        acc = 0.0
        for j in range(starts[r], starts[r + 1]):
            acc += H[codes[j]]
        out[r] = acc
    return out


@njit(cache=True)
def matmat(icol, values, nparent, nkey, codes, starts, M):  # pragma: no cover
    """A·M (Algorithm 7): Algorithm 4 with a row of H per node, M's columns innermost."""
    n_pairs, k = len(icol), M.shape[1]
    H = np.zeros((1 + n_pairs + len(nparent), k))
    for i in range(n_pairs):
        c, x = icol[i], values[i]
        for t in range(k):
            H[i + 1, t] = x * M[c, t] + H[0, t]
    for n in range(len(nparent)):
        p, q = nparent[n], nkey[n] - 1
        c, x = icol[q], values[q]
        for t in range(k):
            H[n_pairs + 1 + n, t] = x * M[c, t] + H[p, t]
    out = np.zeros((len(starts) - 1, k))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            for t in range(k):
                out[r, t] += H[node, t]
    return out


@njit(cache=True)
def rmatvec(icol, values, nparent, nkey, codes, starts, u, cols):  # pragma: no cover
    """v·A (Algorithm 5): each code takes its row's u, then backwards each node hands its
    weight to its key's column and to its parent (the first layer's parent is the root)."""
    n_pairs = len(icol)
    H = np.zeros(1 + n_pairs + len(nparent))
    for r in range(len(starts) - 1):
        x = u[r]
        for j in range(starts[r], starts[r + 1]):
            H[codes[j]] += x
    out = np.zeros(cols)
    for k in range(len(nparent) - 1, -1, -1):
        p, h = nkey[k] - 1, H[n_pairs + 1 + k]
        out[icol[p]] += values[p] * h
        H[nparent[k]] += h
    for i in range(n_pairs - 1, -1, -1):
        out[icol[i]] += values[i] * H[i + 1]
    return out


@njit(cache=True)
def rmatmat(icol, values, nparent, nkey, codes, starts, U, cols):  # pragma: no cover
    """M·A (Algorithm 8): Algorithm 5 with a row of H per node."""
    n_pairs, k = len(icol), U.shape[0]
    H = np.zeros((1 + n_pairs + len(nparent), k))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            for t in range(k):
                H[node, t] += U[t, r]
    out = np.zeros((k, cols))
    for n in range(len(nparent) - 1, -1, -1):
        i, p, q = n_pairs + 1 + n, nparent[n], nkey[n] - 1
        c, x = icol[q], values[q]
        for t in range(k):
            out[t, c] += x * H[i, t]
            H[p, t] += H[i, t]
    for i in range(n_pairs - 1, -1, -1):
        c, x = icol[i], values[i]
        for t in range(k):
            out[t, c] += x * H[i + 1, t]
    return out


@njit(cache=True)
def decode_dense(icol, values, nparent, nkey, codes, starts, cols):  # pragma: no cover
    """Algorithm 6: every code's sequence, by following parents to the root."""
    n_pairs = len(icol)
    out = np.zeros((len(starts) - 1, cols))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            while node > n_pairs:
                p = nkey[node - n_pairs - 1] - 1
                out[r, icol[p]] = values[p]
                node = nparent[node - n_pairs - 1]
            out[r, icol[node - 1]] = values[node - 1]
    return out
