"""The one objective every system in ``bench train`` is judged by.
No paper section.

    mean training log-loss  +  (l2 / 2) · ‖v‖²,    v = the weights per z-scored feature

computed here, the same way for every system, from that system's final model expressed on the
raw rows (margin = X·w + b).  Every system's own loss report is ignored.  The z-score is the
rows' mean and population standard deviation (a constant column keeps scale 1), as both
StandardScaler and loomdb's ``zscore`` compute it, so v = w ∘ std and the intercept is not
penalised (as in loomdb's trainer and scikit-learn's lbfgs).
"""

from __future__ import annotations

import numpy as np

L2 = 1e-4


def spread(X: np.ndarray) -> np.ndarray:
    """Per-column population standard deviation; 1 where a column is constant."""
    std = X.std(axis=0)
    return np.where(std > 0, std, 1.0)


def to_raw(v: np.ndarray, c: float, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights ``v`` and intercept ``c`` over z-scored columns ((x − mean)/std) as raw-row ones."""
    w = np.asarray(v, dtype=np.float64).reshape(-1) / std
    return w, float(c) - float(mean @ w)


class Objective:
    """``objective(w, b)`` on fixed raw rows ``X`` with 0/1 labels ``y``."""

    def __init__(self, X: np.ndarray, y: np.ndarray, l2: float = L2):
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64).reshape(-1)
        self.l2 = l2
        self.mean = self.X.mean(axis=0)
        self.std = spread(self.X)

    def __call__(self, w: np.ndarray, b: float) -> float:
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        z = self.X @ w + float(b)
        loss = float(np.mean(np.logaddexp(0.0, z) - self.y * z))  # −log σ(±z), stable
        v = w * self.std
        return loss + 0.5 * self.l2 * float(v @ v)

    def of_zscored(self, v: np.ndarray, c: float) -> float:
        """The objective of a model fitted on this object's z-scored rows."""
        return self(*to_raw(v, c, self.mean, self.std))

    def zscored(self) -> np.ndarray:
        return (self.X - self.mean) / self.std
