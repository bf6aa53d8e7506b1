"""MLWeaving's any-precision layout (Wang et al., PVLDB 2019, §4.3, Fig. 6, Table 4).

Quantisation: per column min–max to [0, 1], then u = floor(f̃ · (2³² − 1)); a constant column
maps to 0; values outside the stored range (new rows at predict time) are clipped.  Bit 1 of a
value is its most significant bit and precision s keeps the s most significant bits —
deterministic truncation, 0 ≤ ã − Q_s(ã) < 2⁻ˢ.

Layout: samples in groups of 8 (bank k holds sample 8g + k), features in chunks of 64 (lane l
holds feature 64c + l); one 512-bit line is bit plane p of one chunk for the 8 samples of a
group.  Inside a line, bank k is the little-endian 64-bit word at bytes 8k…8k+7 and lane l is
bit l of that word.  Samples are zero-padded to a multiple of 8 and features to a multiple of 64.

``weave_block`` returns the 32 planes of a block *planes first*: plane p is the lines
(g, c, p) of every group and chunk, in (g·C + c) order, so reading precision s is reading a
prefix of planes (the database stores one row per plane and filters ``plane < s``).  The
hardware's order, line (g·C + c)·32 + p (``hardware_lines``), is a permutation of the same lines.

Reading hostile planes: every bit pattern is a valid plane, so ``unweave`` checks only what can
be wrong (the planes' count and sizes, a plane that is NULL or not bytes) and checks every
plane's size against the block's shape *before* allocating anything of that shape.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loomdb.codecs import weave_products as products
from loomdb.codecs.blob import REBUILD, byte_view
from loomdb.codecs.weave_kernels import unweave_words, weave_words
from loomdb.errors import LoomFormatError, LoomOptionError

# The planes carry no version byte of their own (a plane is a database row of raw lines); this
# names their layout for the fixtures: a change to it is a new version, with new fixtures.
LAYOUT_VERSION = 1
BITS = 32
FULL = float(2**32 - 1)
LINE = 64  # bytes in a 512-bit line


def column_ranges(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    return X.min(axis=0), X.max(axis=0)


def quantize(X: np.ndarray, mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
    """Float rows → uint32 fixed point of (x − min)/(max − min); constant columns → 0."""
    X = np.asarray(X, dtype=np.float64)
    mins, maxs = np.asarray(mins, dtype=np.float64), np.asarray(maxs, dtype=np.float64)
    spread = maxs - mins
    constant = ~(spread > 0)
    safe = np.where(constant, 1.0, spread)
    unit = np.clip((X - mins) / safe, 0.0, 1.0)  # x == max gives exactly 1.0
    unit[:, constant] = 0.0
    return np.floor(unit * FULL).astype(np.uint32)


def dequantize(q: np.ndarray) -> np.ndarray:
    """The fixed-point value Σ bitᵢ·2⁻ⁱ of (truncated) codes."""
    return np.asarray(q, dtype=np.float64) / 2.0**32


def values(q: np.ndarray, s: int) -> np.ndarray:
    """The value loomdb's CPU path multiplies for codes read at s bits: the middle of the
    truncation interval, Q_s(u) + 2⁻⁽ˢ⁺¹⁾, for a non-zero code; 0 for a zero code.

    Departure from MLWeaving §4.3 (which multiplies Q_s(u), always below u by up to 2⁻ˢ): the
    bits read are the paper's, but reading them as the interval's middle removes the one-sided
    bias that a model trained at few bits carries onto full-precision rows (least squares on
    2,000 MNIST rows, mse over the label variance on the raw rows at s = 1: 0.42 instead of
    1.09; at s = 2: 0.35 instead of 0.41).  Zero codes stay exactly zero, so sparse data stays
    sparse.  The fpga-sim backend computes on the codes themselves, bit-exact with the paper.
    """
    _check_precision(s)
    q = np.asarray(q, dtype=np.float64)
    return np.where(q > 0, q / 2.0**32 + 2.0 ** -(s + 1), 0.0)


def truncate(u: np.ndarray, s: int) -> np.ndarray:
    """Q_s: keep the s most significant bits."""
    _check_precision(s)
    return (np.asarray(u, dtype=np.uint32) >> np.uint32(BITS - s)) << np.uint32(BITS - s)


def _shape(n: int, m: int) -> tuple[int, int]:
    if n < 1 or m < 1:
        raise LoomOptionError(f"a woven block needs at least one row and column; got {n}×{m}")
    return -(-n // 8), -(-m // 64)


def plane_bytes(n: int, m: int) -> int:
    groups, chunks = _shape(n, m)
    return groups * chunks * LINE


def index_size(n: int, m: int) -> int:
    """Bytes of a whole index: ⌈N/8⌉·⌈M/64⌉·2048 (all 32 planes, stored once)."""
    return plane_bytes(n, m) * BITS


def epoch_bytes(n: int, m: int, s: int) -> int:
    """Eq. 4: bytes an epoch reads at precision s, N8·(s·⌈M/64⌉·64 + 32)/8."""
    groups, chunks = _shape(n, m)
    return groups * 8 * (s * chunks * 64 + 32) // 8


def _check_precision(s: int) -> None:
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 1 <= s <= BITS:
        raise LoomOptionError(f"precision must be an integer from 1 to 32; got {s!r}")


def weave_block(U: np.ndarray) -> np.ndarray:
    """uint32 (n, m) → uint8 (32, plane_bytes): the block's planes, MSB plane first."""
    U = np.asarray(U, dtype=np.uint32)
    n, m = U.shape
    groups, chunks = _shape(n, m)
    padded = np.zeros((groups * 8, chunks * 64), dtype=np.uint32)
    padded[:n, :m] = U
    words = weave_words(padded, groups, chunks).astype("<u8", copy=False)
    return words.view(np.uint8).reshape(BITS, -1)


def unweave(
    planes: Sequence[bytes | memoryview] | np.ndarray, n: int, m: int, s: int
) -> np.ndarray:
    """The first ``s`` planes of a block → its values truncated to s bits, uint32 (n, m)."""
    _check_precision(s)
    groups, chunks = _shape(n, m)
    views = _plane_views(planes, n, m, s)
    stack = np.empty((s, groups * chunks * LINE), dtype=np.uint8)  # planes arrive separately
    for p, view in enumerate(views):
        stack[p] = np.frombuffer(view, dtype=np.uint8)
    words = stack.view("<u8").reshape(s, groups, chunks, 8)
    return unweave_words(words, s)[:n, :m]


def _plane_views(planes: object, n: int, m: int, s: int) -> list[memoryview]:
    """The first s planes as byte views, each checked to hold one plane of an n×m block."""
    size = plane_bytes(n, m)
    try:
        count = len(planes)  # type: ignore[arg-type]
    except TypeError:
        raise LoomFormatError(
            f"the planes of a woven block must be a sequence of bytes; got {type(planes).__name__}",
            hint=REBUILD,
        ) from None
    if count < s:
        raise LoomFormatError(
            f"a woven block read at precision {s} needs {s} planes; got {count}",
            hint="the index is missing planes: loom_reindex it",
        )
    views = []
    for p in range(s):
        view = byte_view(planes[p], f"plane {p} of a woven block")  # type: ignore[index]
        if len(view) != size:
            raise LoomFormatError(
                f"plane {p} of a {n}×{m} woven block holds {len(view)} bytes; expected {size}",
                hint="the index is corrupted or was built for another shape: loom_reindex it",
            )
        views.append(view)
    return views


def hardware_lines(U: np.ndarray) -> np.ndarray:
    """uint8 (⌈n/8⌉·C·32, 64): the lines in the FPGA's order, line (g·C + c)·32 + p."""
    n, m = np.asarray(U).shape
    groups, chunks = _shape(n, m)
    planes = weave_block(U).reshape(BITS, groups, chunks, LINE)
    return planes.transpose(1, 2, 0, 3).reshape(groups * chunks * BITS, LINE)


class WovenMatrix:
    """A block read at precision s, behaving as the matrix of its ``values`` (≈ u/2³² ∈ [0, 1)).

    Only the s planes read are held.  Its products are bit-sliced (``weave_products``): they
    read the planes as they are, so they cost in proportion to s, and equal the dense products
    of ``toarray()`` up to floating-point summation order (``weave_products.TOLERANCE``).
    The planes are arranged for the kernels once, on the first product, and then held in that
    order only (a batch kept between epochs holds s bits per value, not a float64); the codes
    and values are rebuilt only when asked for (the fpga-sim backend computes on the codes).
    """

    __array_ufunc__ = None  # ndarray @ WovenMatrix defers to __rmatmul__

    def __init__(self, planes: Sequence[bytes | memoryview] | np.ndarray, n: int, m: int, s: int):
        _check_precision(s)
        _shape(n, m)
        self.planes: list[memoryview] | None = _plane_views(planes, n, m, s)
        self.n, self.m, self.s = n, m, s
        self.nbytes = s * plane_bytes(n, m)
        self._codes: np.ndarray | None = None
        self._values: np.ndarray | None = None
        self._words: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.m)

    def quantized(self) -> np.ndarray:
        """The truncated uint32 codes (what the FPGA engine computes on)."""
        if self._codes is None:
            if self.planes is not None:
                self._codes = unweave(self.planes, self.n, self.m, self.s)
            else:  # (chunks, groups·8, s) seen as the stored (s, groups, chunks, 8)
                chunks, rows, s = self.words().shape
                stored = self.words().reshape(chunks, rows // 8, 8, s).transpose(3, 1, 0, 2)
                self._codes = unweave_words(stored, s)[: self.n, : self.m]
        return self._codes

    def toarray(self) -> np.ndarray:
        if self._values is None:
            self._values = values(self.quantized(), self.s)
        return self._values

    def words(self) -> np.ndarray:
        """The planes as uint64 (chunks, rows padded to 8, s): the kernels' order."""
        if self._words is None:
            groups, chunks = _shape(self.n, self.m)
            stack = np.frombuffer(b"".join(self.planes or ()), dtype="<u8")
            self._words = products.arrange(stack.reshape(self.s, groups, chunks, 8))
            self.planes = None  # the words hold the same bits
        return self._words

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        v = np.asarray(other)
        if v.ndim not in (1, 2) or v.shape[0] != self.m:
            raise LoomOptionError(f"cannot multiply a {self.shape} woven block by {v.shape}")
        out = products.matmul(self.words(), v.reshape(self.m, -1).astype(np.float64, copy=False))
        return out[: self.n, 0] if v.ndim == 1 else out[: self.n]

    def __rmatmul__(self, other: np.ndarray) -> np.ndarray:
        u = np.asarray(other)
        if u.ndim not in (1, 2) or u.shape[-1] != self.n:
            raise LoomOptionError(f"cannot multiply {u.shape} by a {self.shape} woven block")
        G = u.reshape(-1, self.n).T.astype(np.float64, copy=False)
        out = products.rmatmul(self.words(), G, self.m)
        return out[:, 0] if u.ndim == 1 else out.T
