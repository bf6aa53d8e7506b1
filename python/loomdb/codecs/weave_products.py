"""Bit-sliced products of a woven block: A·w and gᵀ·A straight from its 64-lane planes.

MLWeaving §4.2 (Fig. 7, Algorithm 1): the engine never rebuilds a value; each bit-serial
multiplier adds the model entry, shifted right by i, when bit i of the value is set —
Q_s(a)·x = Σᵢ a[i]·(x ≫ i).  These kernels do the same on a CPU a 64-bit word at a time, so
their cost grows with the planes read, as the bytes do.  For a row and a 64-feature chunk:

    Σ_f a_f·w_f = Σ_{p<s} 2⁻⁽ᵖ⁺¹⁾·S(plane_p) + 2⁻⁽ˢ⁺¹⁾·S(plane_0 | … | plane_{s−1})

where S(mask) = Σ_{f ∈ mask} w_f.  The last term is loomdb's reading of a non-zero truncated
value as the middle of its interval (``weave.values``: a zero code stays zero, so the OR of the
planes read marks the non-zero values).  S is eight table lookups, one per byte of the word: a
256-entry table per 8 features holds the sums of w over their subsets, built once per product
(about one plane's work).  Where a chunk's features fit its words' low bytes (a table of up to
8, 16 or 32 features, or such a last chunk of a wider one) it is one, two or four (``_width``),
with the same bits: a 20-feature table's products take about half the time.  gᵀ·A runs the
other way: each (row, plane) word adds its g_r·2⁻⁽ᵖ⁺¹⁾ to the table entry of each of its bytes
(a histogram), and each table is folded back onto its 8 features at the end.  All-zero words
are skipped (MNIST is 81% zeros).

Words come as uint64 (chunks, rows, s) — chunk-major, so one chunk's tables stay in L1 while
its rows stream by, and a row's s planes of a chunk are adjacent (``WovenMatrix`` arranges
them once per batch).  Results equal the dense product of ``weave.values`` up to the order of
floating-point summation (no fastmath: the order is fixed, a run repeats itself bit for bit);
``TOLERANCE`` is the bound the tests hold them to.  They are ``nogil``: a parallel train's
shard threads (``learn/shard_threads``) multiply side by side.
"""

from __future__ import annotations

import numpy as np
from numba import literally, njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)

# |bit-sliced − dense| ≤ TOLERANCE · (|A|·|w|), entry by entry.  Both sum exact terms (a value
# has ≤ 33 significant bits) in different orders over at most ~64·C·(s + 1) additions; the
# classical bound γ_n = n·2⁻⁵³ stays below 1e-11 up to n ≈ 90,000 (M ≈ 2,700 at s = 32), and
# the errors seen are ~1e-15 (random order makes them grow like √n, not n).
TOLERANCE = 1e-11
COPIES = 2  # histogram copies, alternating by plane: halves the chains of adds to one entry


@njit(cache=True, nogil=True)
def _subset_sums(w: np.ndarray, chunks: int) -> np.ndarray:  # pragma: no cover
    """T[c, b, v] = Σ of w[64c + 8b + i] over the bits i set in v (w past its end reads 0);
    only the ``_width`` tables of a chunk its products read."""
    m = w.shape[0]
    T = np.empty((chunks, 8, 256))
    for c in range(chunks):
        for b in range(_width(m, c)):
            t = T[c, b]
            t[0] = 0.0
            size = 1
            for i in range(8):
                f = c * 64 + b * 8 + i
                wi = w[f] if f < m else 0.0
                for v in range(size):
                    t[size + v] = t[v] + wi
                size *= 2
    return T


@njit(cache=True, nogil=True, inline="always")
def _width(m: int, c: int) -> int:  # pragma: no cover
    """The low bytes of chunk c's words that hold its features (of m): 1, 2, 4 or 8.  The
    products read only those: the others' tables are all 0, so only additions of zeros are
    skipped and the bits are the same."""
    left = m - 64 * c
    return 1 if left <= 8 else 2 if left <= 16 else 4 if left <= 32 else 8


@njit(cache=True, nogil=True, inline="always")
def _lookup(t: np.ndarray, x: np.uint64, width: int) -> float:  # pragma: no cover
    """S(x): the sum of the byte tables ``t`` (8, 256) at the ``width`` low bytes of x, added
    as the eight-byte tree adds them (the bytes left out add up to 0)."""
    if width == 1:
        return t[0, x & 255]
    low = t[0, x & 255] + t[1, (x >> 8) & 255]
    if width == 2:
        return low
    low = low + (t[2, (x >> 16) & 255] + t[3, (x >> 24) & 255])
    if width == 4:
        return low
    return low + (
        (t[4, (x >> 32) & 255] + t[5, (x >> 40) & 255]) + (t[6, (x >> 48) & 255] + t[7, x >> 56])
    )


@njit(cache=True, nogil=True, inline="always")
def _scatter(h: np.ndarray, x: np.uint64, a: float, width: int) -> None:  # pragma: no cover
    """Add a to the entry of each of the ``width`` low bytes of x in the byte histograms ``h``
    (8, 256)."""
    h[0, x & 255] += a
    if width > 1:
        h[1, (x >> 8) & 255] += a
    if width > 2:
        h[2, (x >> 16) & 255] += a
        h[3, (x >> 24) & 255] += a
    if width > 4:
        h[4, (x >> 32) & 255] += a
        h[5, (x >> 40) & 255] += a
        h[6, (x >> 48) & 255] += a
        h[7, x >> 56] += a


@njit(cache=True, nogil=True)
def matmul(words: np.ndarray, W: np.ndarray) -> np.ndarray:  # pragma: no cover
    """uint64 (C, rows, s) planes · float64 (m ≤ 64·C, k) → (rows, k), a column at a time."""
    out = np.zeros((words.shape[1], W.shape[1]))
    for j in range(W.shape[1]):
        _matvec(words, W[:, j], out[:, j])
    return out


@njit(cache=True, nogil=True)
def rmatmul(words: np.ndarray, G: np.ndarray, m: int) -> np.ndarray:  # pragma: no cover
    """(Gᵀ·A)ᵀ: float64 (n ≤ rows, k) and uint64 (C, rows, s) planes of m features →
    (m, k)."""
    out = np.empty((words.shape[0] * 64, G.shape[1]))
    for j in range(G.shape[1]):
        _rmatvec(words, G[:, j], m, out[:, j])
    return out[:m]


@njit(cache=True, nogil=True)
def _matvec(words: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    T = _subset_sums(w, words.shape[0])
    for c in range(words.shape[0]):
        width = _width(w.shape[0], c)
        if width == 8:  # a literal each: its own compiled loop
            _chunk_matvec(words[c], T[c], out, 8)
        elif width == 4:
            _chunk_matvec(words[c], T[c], out, 4)
        elif width == 2:
            _chunk_matvec(words[c], T[c], out, 2)
        else:
            _chunk_matvec(words[c], T[c], out, 1)


@njit(cache=True, nogil=True)
def _chunk_matvec(words, t, out, width: int) -> None:  # pragma: no cover
    """Chunk ``words`` (rows, s)'s share of every row's A·w, through its tables ``t``.  Compiled
    once per width (``literally``), each apart: inlined side by side in ``_matvec`` (as gᵀ·A's
    are in ``_rmatvec``, where that measured faster) the eight-byte loop ran 5–10% slower."""
    literally(width)
    rows, s = words.shape
    mid = 0.5 ** (s + 1)
    for r in range(rows):
        nz = np.uint64(0)
        total = 0.0
        weight = 0.5
        for p in range(s):
            x = words[r, p]
            if x != 0:
                nz |= x
                total += weight * _lookup(t, x, width)
            weight *= 0.5
        if nz != 0:
            out[r] += total + mid * _lookup(t, nz, width)


@njit(cache=True, nogil=True)
def _rmatvec(words: np.ndarray, g: np.ndarray, m: int, out: np.ndarray) -> None:  # pragma: no cover
    H = np.zeros((COPIES, 8, 256))
    for c in range(words.shape[0]):
        H[:] = 0.0
        width = _width(m, c)
        if width == 1:  # the chunk's loop compiled once per width
            _chunk_rmatvec(words[c], g, H, 1)
        elif width == 2:
            _chunk_rmatvec(words[c], g, H, 2)
        elif width == 4:
            _chunk_rmatvec(words[c], g, H, 4)
        else:
            _chunk_rmatvec(words[c], g, H, 8)
        _fold(H, out[c * 64 : c * 64 + 64])


@njit(cache=True, nogil=True, inline="always")
def _chunk_rmatvec(words, g, H, width: int) -> None:  # pragma: no cover
    """Chunk ``words`` (rows, s)'s rows added, g_r·2⁻⁽ᵖ⁺¹⁾ a plane, into its histograms."""
    s = words.shape[1]
    mid = 0.5 ** (s + 1)
    for r in range(g.shape[0]):
        gr = g[r]
        if gr == 0.0:
            continue
        nz = np.uint64(0)
        a = 0.5 * gr
        for p in range(s):
            x = words[r, p]
            if x != 0:
                nz |= x
                _scatter(H[p & 1], x, a, width)
            a *= 0.5
        if nz != 0:
            _scatter(H[s & 1], nz, mid * gr, width)


@njit(cache=True, nogil=True)
def _fold(H: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """out[8b + i] = Σ over the copies and the v with bit i set of H[·, b, v]: halve 256 → 1."""
    buf = np.empty(256)
    for b in range(8):
        for v in range(256):
            buf[v] = H[0, b, v] + H[1, b, v]
        size = 256
        for i in range(7, -1, -1):
            half = size >> 1
            total = 0.0
            for v in range(half, size):
                total += buf[v]
                buf[v - half] += buf[v]
            out[b * 8 + i] = total
            size = half


@njit(cache=True, nogil=True)
def arrange(stack: np.ndarray) -> np.ndarray:  # pragma: no cover
    """uint64 (s, groups, C, 8) planes as stored → (C, groups·8, s), the kernels' order."""
    s, groups, chunks, _ = stack.shape
    out = np.empty((chunks, groups * 8, s), dtype=np.uint64)
    for p in range(s):
        for g in range(groups):
            for c in range(chunks):
                for k in range(8):
                    out[c, g * 8 + k, p] = stack[p, g, c, k]
    return out
