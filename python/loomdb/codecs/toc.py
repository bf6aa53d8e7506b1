"""Tuple-oriented compression (Li et al., SIGMOD 2019) of one minibatch, and its matrix.

Faithful to the paper: sparse encoding into (column, value) pairs (§3.1), logical encoding by
Algorithm 1 — LZW over c-v pairs whose tree starts with every distinct pair, numbered in
first-appearance order, never matching across rows — and physical encoding (§3.2): 1/2/3/4-byte
integers with per-array headers and value indexing.  Only I (the first layer) and D (the codes)
are stored; readers rebuild the tree.  Byte format: ``toc_format``.

Departures, each deliberate: a value is identified by its float64 *bit pattern*, so −0.0 is
kept as a value (it is not dropped as a zero) and NaN payloads survive — the round trip is
bit-exact; the distinct-value table is in first-appearance order; ``entropy="zstd"`` adds a zstd
stage over the packed integer arrays (beyond the paper): readers inflate the arrays, never the
matrix, so operations still run on the compressed form.

``TocMatrix`` runs the operations of §4 on the compressed form: ``m * c`` and ``m ** 2`` rewrite
the value table only; ``m @ v``, ``v @ m``, ``m @ M`` and ``M @ m`` are the tree passes of
Algorithms 4, 5, 7 and 8; only ``toarray()`` (for sparse-unsafe operations) decodes.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from loomdb.codecs import toc_kernels as k
from loomdb.codecs import toc_products as p
from loomdb.codecs.blob import REBUILD, byte_view
from loomdb.codecs.toc_format import (
    LOGICAL,
    MAX_COLS,
    MAX_ROWS,
    PACKED,
    VALUE_INDEX,
    Sections,
    opened,
    parse,
    parse_sections,
    serialize,
)
from loomdb.codecs.toc_read import MAX_NODES, SECTION_FAULT, WIDE, read
from loomdb.errors import LoomFormatError, LoomOptionError

VARIANTS = {
    "sparse": 0,  # TOC_SPARSE: c-v pairs, 4-byte integers
    "sparse_logical": LOGICAL,  # TOC_SPARSE_AND_LOGICAL
    "full": LOGICAL | PACKED | VALUE_INDEX,  # TOC_FULL
}
ZSTD_LEVEL = 19
MAX_DENSE = 1 << 27  # cells a full decode may allocate (1 GiB of float64)


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise LoomOptionError(f"TOC variant must be one of {', '.join(VARIANTS)}; got {variant!r}")


def _check_shape(n: int, cols: int) -> None:
    if cols > MAX_COLS or n > MAX_ROWS:
        raise LoomOptionError(
            f"a TOC batch has at most {MAX_ROWS:,} rows and {MAX_COLS:,} columns; got "
            f"{n:,}×{cols:,}",
            hint="use a smaller batch_size" if n > MAX_ROWS else None,
        )


def sections(batch: np.ndarray, variant: str = "full") -> Sections:
    """The sparse, logical and physical encodings of a batch, before serialisation."""
    _check_variant(variant)
    X = np.ascontiguousarray(batch, dtype=np.float64)
    if X.ndim != 2:
        raise LoomOptionError(f"a TOC batch must be 2-D; got shape {X.shape}")
    n, cols = X.shape
    _check_shape(n, cols)
    bits = X.view(np.uint64)
    rows_idx, cols_idx = np.nonzero(bits)  # +0.0 only: −0.0 and NaN are values
    row_starts = np.searchsorted(rows_idx, np.arange(n + 1)).astype(np.int64)
    return _encoded_pairs(
        n, cols, cols_idx.astype(np.int64), bits[rows_idx, cols_idx], row_starts, variant
    )


def sections_csr(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, cols: int, variant: str = "full"
) -> Sections:
    """:func:`sections` of the matrix whose rows are given in CSR form (row ``r`` holds
    ``values[indptr[r]:indptr[r+1]]`` at columns ``indices[…]``, strictly increasing), without
    making it dense: the same sections, so the same bytes, as the dense matrix gives.  A stored
    +0.0 is dropped as the dense path drops it; −0.0 and NaN are kept."""
    _check_variant(variant)
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    vbits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    n, nnz = len(indptr) - 1, len(indices)
    _check_shape(n, cols)
    if n < 0 or len(vbits) != nnz or indptr[0] != 0 or indptr[-1] != nnz:
        raise LoomOptionError(
            f"CSR arrays disagree: indptr runs {indptr[:1]}…{indptr[-1:]}, {nnz} indices, "
            f"{len(vbits)} values"
        )
    if (np.diff(indptr) < 0).any():
        raise LoomOptionError("CSR indptr must not decrease")
    if nnz and (indices.min() < 0 or indices.max() >= cols):
        raise LoomOptionError(f"a CSR column is outside 0..{cols - 1}")
    rows = np.repeat(np.arange(n), np.diff(indptr))
    if ((np.diff(indices) <= 0) & (np.diff(rows) == 0)).any():
        raise LoomOptionError("CSR columns must strictly increase within each row")
    keep = vbits != 0
    rows, indices, vbits = rows[keep], indices[keep], vbits[keep]
    row_starts = np.searchsorted(rows, np.arange(n + 1)).astype(np.int64)
    return _encoded_pairs(n, cols, indices, vbits, row_starts, variant)


def _encoded_pairs(
    n: int, cols: int, cols_idx: np.ndarray, vbits: np.ndarray, row_starts: np.ndarray, variant: str
) -> Sections:
    """Sections from the nonzero pairs in row-major order (TOC §3.1 onwards)."""
    flags = VARIANTS[variant]
    if not flags & LOGICAL:
        return Sections(
            n,
            cols,
            flags,
            cols_idx,
            vbits.view(np.float64),
            None,
            None,
            row_starts[:-1],
        )
    distinct, value_ids = k.first_appearance(vbits)
    pairs, pair_ids = k.first_appearance(cols_idx * len(distinct) + value_ids - 1)
    icol, ivalue = pairs // len(distinct), pairs % len(distinct)
    codes, code_starts = k.lzw_encode(pair_ids, row_starts, len(pairs))
    if flags & VALUE_INDEX:
        return Sections(n, cols, flags, icol, distinct.view(np.float64), ivalue, codes, code_starts)
    return Sections(
        n, cols, flags, icol, distinct.view(np.float64)[ivalue], None, codes, code_starts
    )


def encode(batch: np.ndarray, *, variant: str = "full", entropy: str | None = None) -> bytes:
    if entropy not in (None, "zstd"):
        raise LoomOptionError(f"TOC entropy stage must be 'zstd' or none; got {entropy!r}")
    return serialize(sections(batch, variant), ZSTD_LEVEL if entropy else None)


def encode_csr(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    cols: int,
    *,
    variant: str = "full",
    entropy: str | None = None,
) -> bytes:
    """:func:`encode` of a matrix given in CSR form: the same bytes, never densified."""
    if entropy not in (None, "zstd"):
        raise LoomOptionError(f"TOC entropy stage must be 'zstd' or none; got {entropy!r}")
    return serialize(
        sections_csr(indptr, indices, values, cols, variant), ZSTD_LEVEL if entropy else None
    )


def decode(blob: bytes | memoryview) -> np.ndarray:
    return TocMatrix.from_bytes(blob).toarray()


_NARROW, _WIDE_PAIRS = np.empty(0, np.uint32), np.empty(0, np.uint64)


def _read(view: memoryview) -> tuple[int, int, tuple[Any, ...]]:
    """``(rows, cols, the pruned tree)`` of a blob, or the ``LoomFormatError`` saying why not."""
    flags, rows, cols, data = opened(view)
    raw = np.frombuffer(data, dtype=np.uint8)
    fault, row, a, b, *tree = read(raw, flags, rows, cols, _NARROW)
    if fault == WIDE:  # columns and distinct values past 32 bits together: 64-bit pairs
        fault, row, a, b, *tree = read(raw, flags, rows, cols, _WIDE_PAIRS)
    if fault == SECTION_FAULT:
        parse_sections(flags, rows, cols, data)  # raises the precise error
        raise LoomFormatError("TOC blob: its sections do not fit together", hint=REBUILD)
    if fault:
        raise _fault(fault, row, a, b)
    pairs, shift, *rest = tree
    return rows, cols, (pairs, pairs.dtype.type(shift), *rest)


def decode_tree(blob: bytes | memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole decode tree C′ (Algorithm 2, Table 4): each node's parent and the column and
    value of its key (node 0 is the root).  The operations use it pruned (``toc_read``)."""
    TocMatrix.from_bytes(blob)  # every check
    s = parse(blob)
    codes = s.codes if s.codes is not None else np.arange(1, len(s.icol) + 1)
    parent, key = k.build_tree(s.icol, codes, np.append(s.starts, len(codes)))
    values = s.values[s.ivalue] if s.ivalue is not None else s.values
    return parent, np.concatenate([[0], s.icol])[key], np.concatenate([[0.0], values])[key]


class TocMatrix:
    """A compressed minibatch that multiplies without decompressing."""

    __array_ufunc__ = None  # ndarray @ TocMatrix defers to __rmatmul__

    def __init__(self, rows: int, cols: int, nbytes: int, tree: tuple[Any, ...]):
        self.rows, self.cols, self.nbytes = rows, cols, nbytes
        # first-layer pairs packed (``toc_read.read``), the value table, kept nodes' parents
        # and key pairs, codes, row starts
        self.pairs, self.shift, self.table, self.nparent, self.nkey, self.codes, self.starts = tree

    @classmethod
    def from_bytes(cls, blob: bytes | memoryview) -> TocMatrix:
        view = byte_view(blob, "a TOC blob")
        rows, cols, arrays = _read(view)
        return cls(rows, cols, len(view), arrays)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def tree(self) -> tuple[Any, ...]:
        """The checked decode tree the product passes read (``toc_products``)."""
        nodes = (self.nparent, self.nkey, self.codes, self.starts)
        return (self.pairs, self.shift, self.table, *nodes)

    def pair_columns(self) -> np.ndarray:
        """The column (0-based) of each first-layer pair, as ``uint32``."""
        return (self.pairs & ((1 << int(self.shift)) - 1)).astype(np.uint32)

    def pair_values(self) -> np.ndarray:
        """The value of each first-layer pair."""
        return self.table[self.pairs >> self.shift]

    def __matmul__(self, other: Any) -> np.ndarray:
        v = np.ascontiguousarray(other, dtype=np.float64)
        if v.shape[0] != self.cols or v.ndim not in (1, 2):
            raise LoomOptionError(f"cannot multiply a {self.shape} TOC matrix by {v.shape}")
        if v.ndim == 2 and v.shape[1] == 1:  # a one-column model: the vector pass is tighter
            return p.matvec(*self.tree(), np.ascontiguousarray(v[:, 0]))[:, None]
        return p.matvec(*self.tree(), v) if v.ndim == 1 else p.matmat(*self.tree(), v)

    def __rmatmul__(self, other: Any) -> np.ndarray:
        u = np.ascontiguousarray(other, dtype=np.float64)
        if u.shape[-1] != self.rows or u.ndim not in (1, 2):
            raise LoomOptionError(f"cannot multiply {u.shape} by a {self.shape} TOC matrix")
        if u.ndim == 1:
            return p.rmatvec(*self.tree(), u, self.cols)
        if u.shape[0] == 1:
            return p.rmatvec(*self.tree(), np.ascontiguousarray(u[0]), self.cols)[None, :]
        return p.rmatmat(*self.tree(), u, self.cols)

    def held_columns(self) -> np.ndarray:
        """The columns holding a stored value, increasing: where v·A can be nonzero (the keys
        of a sparse gradient)."""
        return np.unique(self.pair_columns())

    def _with_table(self, table: np.ndarray) -> TocMatrix:
        out = copy.copy(self)
        out.table = table
        return out

    def __mul__(self, c: float) -> TocMatrix:
        """A·c: sparse-safe, so only the values change (TOC §4.1)."""
        return self._with_table(self.table * float(c))

    __rmul__ = __mul__

    def square(self) -> TocMatrix:
        return self._with_table(self.table * self.table)

    def __pow__(self, power: int) -> TocMatrix:
        if power != 2:
            raise LoomOptionError("TocMatrix supports ** 2 only (other powers: toarray())")
        return self.square()

    def toarray(self) -> np.ndarray:
        if self.rows * self.cols > MAX_DENSE:
            raise LoomFormatError(
                f"decoding a {self.rows}×{self.cols} TOC matrix would allocate "
                f"{self.rows * self.cols * 8:,} bytes; at most {MAX_DENSE * 8:,} are allowed",
                hint="multiply the compressed matrix (m @ v, v @ m) instead of decoding it",
            )
        return p.decode_dense(*self.tree(), self.cols)


def _fault(kind: int, row: int, a: int, b: int) -> LoomFormatError:
    """The error ``toc_read._tree`` reports (see its docstring for the fields)."""
    if kind == 1:
        what = f"row {row} has code {a}, which points forward, to the root or past the tree"
        what += f" (nodes 1 to {b - 1} exist there)"
    elif kind == 3:
        what = f"pair {row} of the first layer (column {a}) starts no code; each must be used"
    elif kind == 4:
        what = f"its decode tree would have {row:,} nodes; at most {MAX_NODES:,} are read"
    elif kind == WIDE:  # a 64-bit pair holds 25 bits of column (MAX_COLS): 2^38 values
        what = "its columns and distinct values need more than 63 bits a pair"
    elif a == b:
        what = f"row {row} names column {a} twice"
    else:
        what = f"row {row} names column {a} after column {b}; columns must strictly increase"
    return LoomFormatError(f"TOC blob: {what}", hint=REBUILD)
