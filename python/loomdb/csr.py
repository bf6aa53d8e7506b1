"""Sparse rows in compressed sparse row (CSR) form: what a sparse source's rows travel as.

No paper section.  A :class:`CsrRows` is ``n`` rows of a ``width``-column matrix: row ``r``
holds ``values[indptr[r]:indptr[r + 1]]`` at columns ``indices[indptr[r]:indptr[r + 1]]``.
Engines read a sparse source's ``(indices, values)`` array columns into it (never one Python
object per value), layouts cut it into minibatches and the ``toc`` codec encodes it directly
(``toc.encode_csr``), predictions multiply it.  It is also a batch payload in its own right: it
has the two products a backend needs (``rows @ W`` and ``R @ rows``), vectorised with numpy.

Rows are *canonical* when each row's columns strictly increase: :meth:`canonical` sorts rows
that are not and refuses a row naming a column twice (a value per cell, as dense rows have).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.errors import LoomDataError, LoomOptionError


@dataclass(frozen=True)
class CsrRows:
    indptr: np.ndarray  # int64, n + 1 entries from 0 to nnz
    indices: np.ndarray  # int64 column of each stored value
    values: np.ndarray  # float64
    width: int

    @classmethod
    def from_lists(
        cls, indices: Sequence[Sequence[int]], values: Sequence[Sequence[float]], width: int
    ) -> CsrRows:
        lengths = [len(r) for r in indices]
        if lengths != [len(r) for r in values]:
            raise LoomDataError(
                "a row's indices and values arrays have different lengths",
                hint="each index needs exactly one value",
            )
        indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat_i = [i for r in indices for i in r]
        flat_v = [v for r in values for v in r]
        return cls(
            indptr,
            np.asarray(flat_i, dtype=np.int64),
            np.asarray(flat_v, dtype=np.float64),
            int(width),
        )

    @classmethod
    def empty(cls, width: int) -> CsrRows:
        return cls(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), int(width))

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.indptr) - 1, self.width)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def row_ids(self) -> np.ndarray:
        """The row of every stored value."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths())

    def __getitem__(self, rows: Any) -> CsrRows:
        """The rows selected by a slice (step 1), a boolean mask or an array of row numbers."""
        if isinstance(rows, slice) and rows.step in (None, 1):
            start, stop, _ = rows.indices(len(self))
            stop = max(start, stop)
            lo, hi = int(self.indptr[start]), int(self.indptr[stop])
            return CsrRows(
                self.indptr[start : stop + 1] - lo,
                self.indices[lo:hi],
                self.values[lo:hi],
                self.width,
            )
        picked = np.arange(len(self))[rows]
        lengths = self.lengths()[picked]
        indptr = np.zeros(len(picked) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        take = np.repeat(self.indptr[picked] - indptr[:-1], lengths) + np.arange(indptr[-1])
        return CsrRows(indptr, self.indices[take], self.values[take], self.width)

    @staticmethod
    def concat(parts: Sequence[CsrRows]) -> CsrRows:
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [p.nnz for p in parts[:-1]])
        indptr = np.concatenate(
            [[0]] + [p.indptr[1:] + off for p, off in zip(parts, offsets)]
        ).astype(np.int64)
        return CsrRows(
            indptr,
            np.concatenate([p.indices for p in parts]),
            np.concatenate([p.values for p in parts]),
            parts[0].width,
        )

    def with_columns(self, indices: np.ndarray, width: int) -> CsrRows:
        """The same rows with every stored value's column replaced (a column map applied)."""
        return CsrRows(self.indptr, indices, self.values, int(width))

    def check_columns(self) -> None:
        """Refuse a column outside ``[0, width)``."""
        if self.nnz and (self.indices.min() < 0 or self.indices.max() >= self.width):
            bad = self.indices[(self.indices < 0) | (self.indices >= self.width)][0]
            raise LoomDataError(
                f"a sparse row names column {bad}; columns run from 0 to {self.width - 1}",
                hint="indices are 0-based and below the width the model or layout was given",
            )

    def canonical(self) -> CsrRows:
        """These rows with each row's columns strictly increasing (sorted where they were not);
        a row naming a column twice is refused."""
        step = np.diff(self.indices)
        inside = np.ones(len(step), dtype=bool)
        bounds = self.indptr[1:-1]
        inside[bounds[(bounds > 0) & (bounds < self.nnz)] - 1] = False  # pairs across rows
        if not (step[inside] <= 0).any():
            return self
        rows = self.row_ids()
        order = np.lexsort((self.indices, rows))
        indices, values = self.indices[order], self.values[order]
        same = (np.diff(indices) == 0) & (np.diff(rows) == 0)
        if same.any():
            at = int(np.flatnonzero(same)[0])
            row = int(rows[at])
            held = self.indices[self.indptr[row] : self.indptr[row + 1]].tolist()
            shown = ", ".join(map(str, held[:12])) + (", …" if len(held) > 12 else "")
            raise LoomDataError(
                f"a sparse row names column {indices[at]} twice (its indices: {shown})",
                hint="give each index once per row (sum duplicates in a SELECT source first)",
            )
        return CsrRows(self.indptr, indices, values, self.width)

    def held_columns(self) -> np.ndarray:
        """The columns holding a stored value, increasing: where ``R @ rows`` can be nonzero
        (the keys of a sparse gradient)."""
        return np.unique(self.indices)

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[self.row_ids(), self.indices] = self.values
        return out

    def __matmul__(self, other: Any) -> np.ndarray:
        """``rows @ W``: (n,) for a vector, (n, k) for a (width, k) matrix."""
        W = np.asarray(other, dtype=np.float64)
        if W.ndim not in (1, 2) or W.shape[0] != self.width:
            raise LoomOptionError(
                f"cannot multiply {self.shape} sparse rows by {W.shape}",
                hint=f"the weights need {self.width} rows, one per column of the sparse rows",
            )
        rows, n = self.row_ids(), len(self)
        if W.ndim == 1:
            return np.bincount(rows, weights=W[self.indices] * self.values, minlength=n)
        gathered = W[self.indices] * self.values[:, None]
        out = np.empty((n, W.shape[1]))
        for t in range(W.shape[1]):
            out[:, t] = np.bincount(rows, weights=gathered[:, t], minlength=n)
        return out

    def __rmatmul__(self, other: Any) -> np.ndarray:
        """``R @ rows``: (width,) for a vector of n, (k, width) for a (k, n) matrix."""
        R = np.asarray(other, dtype=np.float64)
        if R.ndim not in (1, 2) or R.shape[-1] != len(self):
            raise LoomOptionError(f"cannot multiply {R.shape} by {self.shape} sparse rows")
        rows = self.row_ids()
        if R.ndim == 1:
            return np.bincount(self.indices, weights=R[rows] * self.values, minlength=self.width)
        out = np.empty((R.shape[0], self.width))
        for t in range(R.shape[0]):
            out[t] = np.bincount(
                self.indices, weights=R[t, rows] * self.values, minlength=self.width
            )
        return out

    __array_ufunc__ = None  # ndarray @ CsrRows defers to __rmatmul__
