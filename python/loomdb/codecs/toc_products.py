"""The matrix operations on a TOC-compressed minibatch: the tree passes of A·v, v·A, A·M and M·A
(TOC §4, Algorithms 4, 5, 7, 8) and the full decode (Algorithm 6), in numba.

They run over the tree ``toc_read.read`` returns, checked and pruned: node 0 the root, nodes
1…I the first layer (pair i − 1 of ``pairs``, its column and its value's index in ``table``
packed in one integer, in order of first appearance, so a row's codes mostly point near each
other), nodes I + 1 + k the kept nodes (parent
``nparent[k]``, key pair ``nkey[k]``, 1-based); ``codes`` index those nodes and row r's codes
are ``codes[starts[r]:starts[r + 1]]``.  Parents precede children, so A·v scans forwards and
v·A backwards.  Indexes are unsigned (``uint32`` nodes, ``uint64`` offsets), which spares every
load the check for a negative index (measured: it doubled the time of the row sums).
The passes are compiled ``nogil`` (they touch no Python object), so a parallel train's shard
threads (``learn/shard_threads``, Bismarck §3.3) run them at the same time.

Every pass adds in the order the paper's does over the whole tree, so results are the same bits
as a straightforward implementation's.  Where loomdb departs from the straightforward loop it is
in how the additions are scheduled, never in their order: A·v sums four rows at once
(``_row_sums``), since one row's sum is a chain of dependent additions that keeps the CPU
waiting on each (on MNIST batches this halves the pass).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)


@njit(inline="always")
def _next_row(starts, out, r, at, stop):  # pragma: no cover
    """The row after ``r`` with codes (rows between, with none, sum to 0) and where it ends."""
    r += 1
    while r < stop and starts[r + 1] == at:
        out[r] = 0.0
        r += 1
    return r, (starts[r + 1] if r < stop else at)


@njit(cache=True, nogil=True)
def _row_sums(H, codes, starts, out):  # pragma: no cover
    """``out[r] = Σ H[codes[j]]`` over row r's codes, left to right, four rows at a time: the
    rows are cut into four blocks, each summed in order by a lane of its own; the lanes step
    together for as long as none reaches the end of a row."""
    rows = len(starts) - 1
    q = rows // 4
    h0, h1, h2, h3 = q, 2 * q, 3 * q, rows
    r0, e0 = _next_row(starts, out, -1, starts[0], h0)
    r1, e1 = _next_row(starts, out, h0 - 1, starts[h0], h1)
    r2, e2 = _next_row(starts, out, h1 - 1, starts[h1], h2)
    r3, e3 = _next_row(starts, out, h2 - 1, starts[h2], h3)
    j0, j1, j2, j3 = starts[0], starts[h0], starts[h1], starts[h2]
    a0 = a1 = a2 = a3 = 0.0
    while r0 < h0 and r1 < h1 and r2 < h2 and r3 < h3:
        m = min(e0 - j0, e1 - j1, e2 - j2, e3 - j3)
        for t in range(m):
            a0 += H[codes[j0 + t]]
            a1 += H[codes[j1 + t]]
            a2 += H[codes[j2 + t]]
            a3 += H[codes[j3 + t]]
        j0, j1, j2, j3 = j0 + m, j1 + m, j2 + m, j3 + m
        if j0 == e0:
            out[r0], a0 = a0, 0.0
            r0, e0 = _next_row(starts, out, r0, j0, h0)
        if j1 == e1:
            out[r1], a1 = a1, 0.0
            r1, e1 = _next_row(starts, out, r1, j1, h1)
        if j2 == e2:
            out[r2], a2 = a2, 0.0
            r2, e2 = _next_row(starts, out, r2, j2, h2)
        if j3 == e3:
            out[r3], a3 = a3, 0.0
            r3, e3 = _next_row(starts, out, r3, j3, h3)
    for r, j, a, stop, end in ((r0, j0, a0, h0, e0), (r1, j1, a1, h1, e1)) + (
        (r2, j2, a2, h2, e2),
        (r3, j3, a3, h3, e3),
    ):
        while r < stop:  # what is left of each block, one row after another
            while j < end:
                a += H[codes[j]]
                j += np.uint64(1)
            out[r], a = a, 0.0
            r, end = _next_row(starts, out, r, j, stop)


@njit(inline="always")
def _pair(pairs, shift, table, i):  # pragma: no cover
    """(column, value) of first-layer pair ``i`` (``toc_read.read`` packs them); unsigned
    throughout, so no signed or float arithmetic creeps in."""
    x, one = pairs[i], np.uint64(1)
    return x & ((one << np.uint64(shift)) - one), table[x >> shift]


@njit(cache=True, nogil=True)
def matvec(pairs, shift, table, nparent, nkey, codes, starts, v):  # pragma: no cover
    """A·v (Algorithm 4): H[i] = key(i)·v + H[parent(i)] forwards, then each row's codes."""
    n_pairs = len(pairs)
    H = np.empty(1 + n_pairs + len(nparent))
    H[0] = 0.0
    for i in range(n_pairs):
        c, x = _pair(pairs, shift, table, i)
        # the whole tree's pass adds H[root] = +0.0 here, which only turns a −0.0 into +0.0:
        # every row's sum starts from +0.0, so the results are the same bits without it
        H[i + 1] = x * v[c]
    for k in range(len(nparent)):
        c, x = _pair(pairs, shift, table, nkey[k] - 1)
        H[n_pairs + 1 + k] = x * v[c] + H[nparent[k]]
    out = np.empty(len(starts) - 1)
    _row_sums(H, codes, starts, out)
    return out


@njit(cache=True, nogil=True)
def matmat(pairs, shift, table, nparent, nkey, codes, starts, M):  # pragma: no cover
    """A·M (Algorithm 7): Algorithm 4 with a row of H per node, M's columns innermost."""
    n_pairs, k = len(pairs), M.shape[1]
    H = np.zeros((1 + n_pairs + len(nparent), k))
    for i in range(n_pairs):
        c, x = _pair(pairs, shift, table, i)
        for t in range(k):
            H[i + 1, t] = x * M[c, t] + H[0, t]
    for n in range(len(nparent)):
        p = nparent[n]
        c, x = _pair(pairs, shift, table, nkey[n] - 1)
        for t in range(k):
            H[n_pairs + 1 + n, t] = x * M[c, t] + H[p, t]
    out = np.zeros((len(starts) - 1, k))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            for t in range(k):
                out[r, t] += H[node, t]
    return out


@njit(cache=True, nogil=True)
def rmatvec(pairs, shift, table, nparent, nkey, codes, starts, u, cols):  # pragma: no cover
    """v·A (Algorithm 5): each code takes its row's u, then backwards each node hands its
    weight to its key's column and to its parent (the first layer's parent is the root)."""
    n_pairs = len(pairs)
    H = np.zeros(1 + n_pairs + len(nparent))
    for r in range(len(starts) - 1):
        x = u[r]
        for j in range(starts[r], starts[r + 1]):
            H[codes[j]] += x
    out = np.zeros(cols)
    for k in range(len(nparent) - 1, -1, -1):
        h = H[n_pairs + 1 + k]
        c, x = _pair(pairs, shift, table, nkey[k] - 1)
        out[c] += x * h
        H[nparent[k]] += h
    for i in range(n_pairs - 1, -1, -1):
        c, x = _pair(pairs, shift, table, i)
        out[c] += x * H[i + 1]
    return out


@njit(cache=True, nogil=True)
def rmatmat(pairs, shift, table, nparent, nkey, codes, starts, U, cols):  # pragma: no cover
    """M·A (Algorithm 8): Algorithm 5 with a row of H per node."""
    n_pairs, k = len(pairs), U.shape[0]
    H = np.zeros((1 + n_pairs + len(nparent), k))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            for t in range(k):
                H[node, t] += U[t, r]
    out = np.zeros((k, cols))
    for n in range(len(nparent) - 1, -1, -1):
        i, p = n_pairs + 1 + n, nparent[n]
        c, x = _pair(pairs, shift, table, nkey[n] - 1)
        for t in range(k):
            out[t, c] += x * H[i, t]
            H[p, t] += H[i, t]
    for i in range(n_pairs - 1, -1, -1):
        c, x = _pair(pairs, shift, table, i)
        for t in range(k):
            out[t, c] += x * H[i + 1, t]
    return out


@njit(cache=True, nogil=True)
def decode_dense(pairs, shift, table, nparent, nkey, codes, starts, cols):  # pragma: no cover
    """Algorithm 6: every code's sequence, by following parents to the root."""
    n_pairs = len(pairs)
    out = np.zeros((len(starts) - 1, cols))
    for r in range(len(starts) - 1):
        for j in range(starts[r], starts[r + 1]):
            node = codes[j]
            while node > n_pairs:
                c, x = _pair(pairs, shift, table, nkey[node - n_pairs - 1] - 1)
                out[r, c] = x
                node = nparent[node - n_pairs - 1]
            c, x = _pair(pairs, shift, table, node - 1)
            out[r, c] = x
    return out


@njit(cache=True, nogil=True)
def depth(n_pairs, nparent):  # pragma: no cover
    """The most pairs one node's sequence holds: the parent steps Algorithm 6 takes at most
    (0 for an empty tree).  Parents precede children, so one forward pass finds it."""
    depths = np.empty(1 + n_pairs + len(nparent), dtype=np.int64)
    depths[0] = 0
    deepest = 0
    for i in range(n_pairs):
        depths[i + 1] = 1
        deepest = 1
    for k in range(len(nparent)):
        d = depths[nparent[k]] + 1
        depths[n_pairs + 1 + k] = d
        deepest = max(deepest, d)
    return deepest
