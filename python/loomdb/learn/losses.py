"""Losses of the generalized linear models: squared (linear), logistic and hinge (svm).
No paper section (MLWeaving trains least squares; logistic and hinge are loomdb's).

Each loss works on margins ``Z = X·W + b`` and targets ``T`` of the same shape ``(n, k)``;
``k > 1`` is one-vs-rest.  Classification targets are 0/1 (hinge maps them to ±1 itself).
Every loss is tested against finite differences (tests/test_learn.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Loss:
    name: str
    classifier: bool

    def value(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def derivative(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class Squared(Loss):
    """½(z − y)²: least squares, the loss MLWeaving's hardware trains."""

    def value(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        return 0.5 * (Z - T) ** 2

    def derivative(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        return Z - T


class Logistic(Loss):
    """log(1 + eᶻ) − y·z for y ∈ {0, 1}, computed without overflow."""

    def value(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, Z) - T * Z

    def derivative(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        return sigmoid(Z) - T


class Hinge(Loss):
    """max(0, 1 − t·z) with t = 2y − 1 ∈ {−1, +1}; the linear SVM."""

    def value(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - (2.0 * T - 1.0) * Z)

    def derivative(self, Z: np.ndarray, T: np.ndarray) -> np.ndarray:
        t = 2.0 * T - 1.0
        return np.where(t * Z < 1.0, -t, 0.0)


def sigmoid(Z: np.ndarray) -> np.ndarray:
    out = np.empty_like(Z, dtype=np.float64)
    pos = Z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-Z[pos]))
    e = np.exp(Z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


LOSSES: dict[str, Loss] = {
    "linear": Squared("squared", classifier=False),
    "logistic": Logistic("logistic", classifier=True),
    "svm": Hinge("hinge", classifier=True),
}
