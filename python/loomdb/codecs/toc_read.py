"""Reading a TOC blob in one numba call: its sections (TOC §3.2, the byte format of
``toc_format``) and the decode tree C′ (Algorithm 2), checked and pruned to the nodes the
operations visit.

No Python runs per section or per node: a cold epoch reads a blob per minibatch, and the Python
of ``toc_format.parse`` (a dozen numpy calls) cost more than the products did.  The kernel
checks everything ``parse`` checks, and every code, and reports a fault instead of raising; the
caller then runs the Python reader, which raises the precise error (``TocMatrix.from_bytes``).

Pruning (beyond the paper, exact): Algorithm 1 makes a node at every code but the last of a
row, and most are never used — on MNIST's 250-row batches 1.6K of 31K are codes or ancestors of
codes; on census-like data 0.7K of 3.5K.  A node no code reaches has an H of exactly 0 in v·A
and is never read in A·v, so the operations skip it: they visit the first layer (every pair,
each starts a code), the kept nodes, then the codes.  Kept nodes are renumbered densely, in
the same order, so every pass adds in the same order as over the whole tree and the results are
the same bits (for finite values; a dropped node would only add ±0·H, or NaN for a non-finite
value times the 0 of a node no row reaches, which the dense product never adds either).

Packed pairs (beyond the paper, exact): the first layer keeps the blob's value indexing — each
pair one integer, its value's index in the distinct-value table above its column's bits, and
the table — instead of a column array and a float64 per pair.  On MNIST's batches (21K pairs,
255 distinct values) that is 4 bytes a pair instead of 12, and A·v reads a pair in one load:
over 40 batches in turn A·v went from 0.71–0.75x of scipy's CSR to 1.01–1.07x (the pass was
waiting on memory, not arithmetic).  The products multiply the same float64s, so the bits are
unchanged.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)

LOGICAL, VALUE_INDEX = 1, 4  # toc_format's flag bits (the kernel takes them as ints)
SECTION_FAULT = 9  # the sections are malformed: ``toc_format`` says how
WIDE = 10  # a first-layer pair does not fit the integer type asked for
MAX_NODES = (1 << 32) - 1  # node numbers are uint32: a tree this large needs a 4 GB blob
_ONE = np.uint64(1)


@njit(cache=True, nogil=True)
def _u32(data, at):  # pragma: no cover
    return (
        np.int64(data[at])
        | (np.int64(data[at + 1]) << 8)
        | (np.int64(data[at + 2]) << 16)
        | (np.int64(data[at + 3]) << 24)
    )


@njit(cache=True, nogil=True)
def _ints(data, at, most):  # pragma: no cover
    """(values, offset after them) of an integer section at ``at``; offset −1 if malformed."""
    n = len(data)
    if at < 0 or at + 5 > n:
        return np.empty(0, np.int64), -1
    count, width = _u32(data, at), np.int64(data[at + 4])
    at += 5
    if count > most or width < 1 or width > 4 or at + count * width > n:
        return np.empty(0, np.int64), -1
    out = np.empty(count, np.int64)
    if width == 1:
        for i in range(count):
            out[i] = data[at + i]
    elif width == 2:
        for i in range(count):
            p = at + 2 * i
            out[i] = np.int64(data[p]) | (np.int64(data[p + 1]) << 8)
    elif width == 3:
        for i in range(count):
            p = at + 3 * i
            low = np.int64(data[p]) | (np.int64(data[p + 1]) << 8)
            out[i] = low | (np.int64(data[p + 2]) << 16)
    else:
        for i in range(count):
            out[i] = _u32(data, at + 4 * i)
    return out, at + count * width


@njit(cache=True, nogil=True)
def _floats(data, at, most):  # pragma: no cover
    n = len(data)
    if at < 0 or at + 4 > n:
        return np.empty(0, np.float64), -1
    count = _u32(data, at)
    at += 4
    if count > most or at + 8 * count > n:
        return np.empty(0, np.float64), -1
    return data[at : at + 8 * count].copy().view(np.float64), at + 8 * count


@njit(cache=True, nogil=True)
def _sections(data, flags, rows, cols):  # pragma: no cover
    """(ok, icol, value table, each pair's index into it, codes, row starts with the end)
    after ``parse``'s checks.  Without VALUE_INDEX the table is the pairs' own values."""
    cells = rows * cols
    icol, at = _ints(data, 0, cells)
    values, at = _floats(data, at, cells)
    ivalue = np.arange(len(icol))
    if flags & VALUE_INDEX:
        ivalue, at = _ints(data, at, cells)
    codes = np.empty(0, np.int64)
    if flags & LOGICAL:
        codes, at = _ints(data, at, cells)
    lengths, at = _ints(data, at, rows)
    starts = np.zeros(rows + 1, np.int64)
    if at != len(data) or len(lengths) != rows or len(ivalue) != len(icol):
        return False, icol, values, ivalue, codes, starts
    for i in range(len(icol)):
        if icol[i] >= cols or ivalue[i] >= len(values):
            return False, icol, values, ivalue, codes, starts
    if not flags & LOGICAL:
        codes = np.arange(1, len(icol) + 1)
    for r in range(rows):
        starts[r + 1] = starts[r] + lengths[r]
    if starts[rows] != len(codes):
        return False, icol, values, ivalue, codes, starts
    for j in range(len(codes)):
        if codes[j] < 1:
            return False, icol, values, ivalue, codes, starts
    return True, icol, values, ivalue, codes, starts


@njit(cache=True, nogil=True)
def _tree(icol, codes, starts):  # pragma: no cover
    """``(fault, row, a, b, nparent, nkey, codes renumbered)``: Algorithm 2 with every code of a
    possibly hostile blob checked, then pruned to the nodes some code reaches.

    ``fault``: 0 all is well; 1 row ``row`` has code ``a`` that points forward, to the root or
    past the tree (nodes 1 … ``b`` − 1 exist there); 2 row ``row`` names column ``a`` after
    column ``b`` (``a == b``: twice); 3 first-layer pair ``row`` (of column ``a``) starts no
    code; 4 the tree would have ``row`` nodes, more than ``MAX_NODES``.
    Columns must strictly increase along a row (TOC §3.1 emits the pairs in column order), else
    ``toarray`` (which assigns) and the products (which add) would disagree.  One check per
    adjacent pair of codes covers a whole row: every node is made from two adjacent codes, so
    by induction each node's own sequence is increasing, and a row is increasing when each
    code's first column follows the previous code's last.  Every first-layer pair is a distinct
    pair of the data, and its first appearance always starts a code (Algorithm 1), so an unused
    one is forged.  A first-layer node is kept exactly when some code starts with it, so the
    pruning's marks are that check.  O(|D| + |I|).
    """
    n_pairs, empty = len(icol), np.empty(0, np.uint32)
    nonempty = 0
    for r in range(len(starts) - 1):
        nonempty += starts[r + 1] > starts[r]
    size = 1 + n_pairs + len(codes) - nonempty
    if size > MAX_NODES:
        return 4, size, 0, 0, empty, empty, empty
    # Nodes index arrays as unsigned integers, so no load checks for a negative index (as in
    # toc_products); a code is compared as the signed value it was read as first.  A node keeps
    # its first and last pair only; their columns are read from ``col``, small enough to stay
    # in cache (two int64 arrays per node fewer: 22 → 18 µs a census-like batch, 246 → 197 µs
    # an MNIST one).
    col = np.empty(n_pairs + 1, np.int64)  # the column of first-layer node i (the root: −1)
    col[0] = -1
    for i in range(n_pairs):
        col[i + 1] = icol[i]
    parent = np.empty(size, np.uint32)  # (past the first layer, every entry is written)
    first = np.empty(size, np.uint32)  # a node's first pair; first-layer node i is pair i
    key = np.empty(size, np.uint32)  # a node's last pair; first-layer node i is pair i
    keep = np.zeros(size, np.uint8)
    for i in range(n_pairs + 1):
        first[i], key[i] = i, i
    nxt = np.uint64(n_pairs + 1)
    for r in range(len(starts) - 1):
        at, end = np.uint64(starts[r]), np.uint64(starts[r + 1])
        if at == end:
            continue
        code = codes[at]
        prev = np.uint64(code)
        if code < 1 or prev >= nxt:
            return 1, r, code, np.int64(nxt), empty, empty, empty
        keep[prev] = 1
        prev_first, prev_last = first[prev], col[key[prev]]
        for j in range(at + _ONE, end):
            code = codes[j]
            c = np.uint64(code)
            if code < 1 or c >= nxt:
                return 1, r, code, np.int64(nxt), empty, empty, empty
            c_first = first[c]
            c_head = col[c_first]
            if c_head <= prev_last:
                return 2, r, c_head, prev_last, empty, empty, empty
            keep[c] = 1
            parent[nxt] = prev  # a new node: the previous code's sequence + c's first pair
            first[nxt] = prev_first
            key[nxt] = c_first
            nxt += _ONE
            prev, prev_first, prev_last = c, c_first, col[key[c]]
    # Branch-free from here on: which nodes are kept follows the data, not a pattern.
    for i in range(size - 1, n_pairs, -1):
        keep[parent[np.uint64(i)]] |= keep[np.uint64(i)]
    for i in range(1, n_pairs + 1):
        if not keep[i]:
            return 3, i - 1, icol[i - 1], 0, empty, empty, empty
    number = first  # reused: the kept nodes' new numbers (the first layer keeps its own)
    nparent = np.empty(size - n_pairs, np.uint32)
    nkey = np.empty(size - n_pairs, np.uint32)
    kept, base = np.uint64(0), np.uint64(n_pairs + 1)
    for i in range(n_pairs + 1, size):
        node = np.uint64(i)
        number[node] = base + kept
        nparent[kept] = number[parent[node]]
        nkey[kept] = key[node]
        kept += np.uint64(keep[node])
    renumbered = np.empty(len(codes), np.uint32)
    for j in range(len(codes)):
        renumbered[j] = number[np.uint64(codes[j])]
    return 0, 0, 0, 0, nparent[:kept], nkey[:kept], renumbered


@njit(cache=True, nogil=True)
def _bits(n):  # pragma: no cover
    """The bits that number 0 … n − 1 (0 for n ≤ 1)."""
    b = 0
    while (1 << b) < n:
        b += 1
    return b


@njit(cache=True, nogil=True)
def _packed(icol, ivalue, shift, like):  # pragma: no cover
    """Each first-layer pair as one integer of ``like``'s type: its value's index in the
    table above ``shift`` bits, its column below."""
    pairs = np.empty(len(icol), like.dtype)
    for i in range(len(icol)):
        pairs[i] = (ivalue[i] << shift) | icol[i]
    return pairs


@njit(cache=True, nogil=True)
def read(data, flags, rows, cols, like):  # pragma: no cover
    """``(fault, row, a, b, pairs, shift, table, nparent, nkey, codes, starts)`` of a blob.

    ``fault``: 0 read; ``SECTION_FAULT`` the sections are malformed; ``WIDE`` a pair does not
    fit ``like``'s integer type (read again with a wider one); else ``_tree``'s fault ``(kind,
    row, a, b)``.  ``pairs``: first-layer pair i (node i + 1) as ``pairs[i] >> shift``, the
    index of its value in ``table``, and ``pairs[i] & (2**shift − 1)``, its column (0-based);
    ``nparent``/``nkey``: parent node and key pair (1-based) of kept node ``len(pairs) + 1 +
    k``; ``codes``: each row's codes over the kept nodes; ``starts``: rows + 1 offsets into
    them.
    """
    ok, icol, table, ivalue, codes, starts = _sections(data, flags, rows, cols)
    e32, e64 = np.empty(0, np.uint32), np.empty(0, np.uint64)
    if not ok:
        return SECTION_FAULT, 0, 0, 0, like, 0, table, e32, e32, e32, e64
    shift = _bits(cols)
    if shift + _bits(len(table)) > (32 if like.itemsize == 4 else 63):
        return WIDE, 0, 0, 0, like, 0, table, e32, e32, e32, e64
    fault, row, a, b, nparent, nkey, renumbered = _tree(icol, codes, starts)
    pairs = _packed(icol, ivalue, shift, like)
    offsets = starts.astype(np.uint64)
    return fault, row, a, b, pairs, shift, table, nparent, nkey, renumbered, offsets
