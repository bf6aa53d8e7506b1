"""numba kernels of TOC's encoder, the LZW parse (Algorithm 1, phase II), and the whole decode
tree C′ (Algorithm 2) of a blob ``toc_read.read`` has checked.  The operations on the
compressed form are in ``toc_products``."""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)


@njit(cache=True, nogil=True)
def _table(n):  # pragma: no cover
    """``(capacity, shift)`` of an open-addressing table for ``n`` keys: a power of two at
    least twice ``n``, and the shift that takes a 64-bit product's top log2(capacity) bits."""
    capacity, bits = 16, 4
    while capacity < 2 * n:
        capacity, bits = capacity * 2, bits + 1
    return capacity, np.uint64(64 - bits)


@njit(cache=True, nogil=True)
def _slot(keys, filled, key, shift):  # pragma: no cover
    """The slot holding ``key`` in the table ``keys`` (taken where ``filled`` ≠ 0), or the empty
    slot where it goes: Fibonacci hashing — the product's top bits, so keys that differ only
    in their high bits (a float's) spread — then linear probing."""
    mask = np.uint64(len(keys) - 1)
    h = (np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> shift
    while filled[h] != 0 and keys[h] != key:
        h = (h + np.uint64(1)) & mask
    return h


@njit(cache=True, nogil=True)
def first_appearance(keys):  # pragma: no cover
    """``(distinct keys in order of first appearance, 1-based id of each key)`` by one pass
    over a hash table — what sorting (``np.unique`` and an argsort of first indices) gives, in
    linear time: the values and pairs of a 1,024 × 20 batch of random floats took two thirds of
    a toc layout's time sorted.  Keys are compared as the integers they are (a value's bits)."""
    n = len(keys)
    capacity, shift = _table(n)
    held = np.empty(capacity, keys.dtype)
    slot_id = np.zeros(capacity, np.int64)  # 0: an empty slot
    distinct = np.empty(n, keys.dtype)
    ids = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        key = keys[i]
        h = _slot(held, slot_id, key, shift)
        if slot_id[h] == 0:
            count += 1
            held[h], slot_id[h], distinct[count - 1] = key, count, key
        ids[i] = slot_id[h]
    return distinct[:count], ids


@njit(cache=True)
def lzw_encode(pair_ids, row_starts, n_pairs):  # pragma: no cover
    """Codes of every row over a tree whose first layer is pairs 1..n_pairs."""
    nnz = len(pair_ids)
    capacity, shift = _table(nnz + 8)
    keys = np.empty(capacity, dtype=np.int64)
    children = np.zeros(capacity, dtype=np.int64)  # 0: an empty slot (node ids start at 1)
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
                h = _slot(keys, children, node * stride + pair_ids[j], shift)
                if children[h] == 0:
                    break
                node = children[h]
                j += 1
            codes[ncodes] = node
            ncodes += 1
            if j < end:  # a new node: the match plus the next pair, never across rows
                h = _slot(keys, children, node * stride + pair_ids[j], shift)
                keys[h] = node * stride + pair_ids[j]
                children[h] = next_id
                next_id += 1
            i = j
    return codes[:ncodes], code_starts


@njit(cache=True, nogil=True)
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
