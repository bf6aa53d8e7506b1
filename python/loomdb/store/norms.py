"""Squared row norms of a source under each standardisation, gathered while it is laid out.

The default step size is derived from them (scikit-learn's SAG rule: the loss's smoothness
bound over the largest squared row norm, see ``learn/step_size.py``); the layout streams every
row once anyway, so they cost one pass over values already in memory.  No paper section.

Sparse rows (``CsrRows``) never become dense: ‖(x − shift)·scale‖² is the norm of the all-zero
row, Σ (shift·scale)², plus a correction for each stored value, computed once per value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.csr import CsrRows
from loomdb.learn.scaling import METHODS, Scaling


class RowNorms:
    """Running max and mean of ‖scaled x‖² for every standardisation method."""

    def __init__(self, stats: dict[str, np.ndarray]):
        self.scalings = {m: Scaling.from_stats(m, stats) for m in METHODS}
        self.max = dict.fromkeys(METHODS, 0.0)
        self.sum = dict.fromkeys(METHODS, 0.0)
        self.rows = 0
        self._zero_row: dict[str, float] = {}  # ‖(0 − shift)·scale‖², for sparse rows

    def add(self, X: Any) -> None:
        for method, scaling in self.scalings.items():
            sq = self._sparse(method, X) if isinstance(X, CsrRows) else self._dense(scaling, X)
            if len(sq):
                self.max[method] = max(self.max[method], float(sq.max()))
                self.sum[method] += float(sq.sum())
        self.rows += len(X)

    @staticmethod
    def _dense(scaling: Scaling, X: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", *(2 * [scaling.apply(X)]))

    def _sparse(self, method: str, X: CsrRows) -> np.ndarray:
        s = self.scalings[method]
        if method not in self._zero_row:
            self._zero_row[method] = float(((s.shift * s.scale) ** 2).sum())
        shift, scale = s.shift[X.indices], s.scale[X.indices]
        change = ((X.values - shift) * scale) ** 2 - (shift * scale) ** 2
        return self._zero_row[method] + np.bincount(X.row_ids(), change, minlength=len(X))

    def summary(self) -> dict[str, dict[str, float]]:
        n = max(self.rows, 1)
        return {m: {"max": self.max[m], "mean": self.sum[m] / n} for m in METHODS}
