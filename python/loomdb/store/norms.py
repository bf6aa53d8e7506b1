"""Squared row norms of a source under each standardisation, gathered while it is laid out.

The default step size is derived from them (scikit-learn's SAG rule: the loss's smoothness
bound over the largest squared row norm, see ``learn/step_size.py``); the layout streams every
row once anyway, so they cost one pass over values already in memory.  No paper section.
"""

from __future__ import annotations

import numpy as np

from loomdb.learn.scaling import METHODS, Scaling


class RowNorms:
    """Running max and mean of ‖scaled x‖² for every standardisation method."""

    def __init__(self, stats: dict[str, np.ndarray]):
        self.scalings = {m: Scaling.from_stats(m, stats) for m in METHODS}
        self.max = dict.fromkeys(METHODS, 0.0)
        self.sum = dict.fromkeys(METHODS, 0.0)
        self.rows = 0

    def add(self, X: np.ndarray) -> None:
        for method, scaling in self.scalings.items():
            sq = np.einsum("ij,ij->i", *(2 * [scaling.apply(X)]))
            if len(sq):
                self.max[method] = max(self.max[method], float(sq.max()))
                self.sum[method] += float(sq.sum())
        self.rows += len(X)

    def summary(self) -> dict[str, dict[str, float]]:
        n = max(self.rows, 1)
        return {m: {"max": self.max[m], "mean": self.sum[m] / n} for m in METHODS}
