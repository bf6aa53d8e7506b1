"""An in-memory EpochSource: numpy rows cut into batches, for trainer tests without a database."""

from __future__ import annotations

import numpy as np

from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.seams import Batch


class ArraySource:
    def __init__(self, X: np.ndarray, y: np.ndarray, batch_size: int = 16):
        self.X, self.y, self.bs = X, y, batch_size

    def train_batches(self, epoch: int, precision: int):
        for i in range(0, len(self.y), self.bs):
            yield Batch(self.X[i : i + self.bs], self.y[i : i + self.bs])

    def validation_batches(self, precision: int):
        return ()


def stats_of(X: np.ndarray) -> dict[str, np.ndarray]:
    return {"min": X.min(0), "max": X.max(0), "mean": X.mean(0), "std": X.std(0)}


def problem(X: np.ndarray, classes: list, method: str = "zscore", y=None) -> Problem:
    moments = (float(np.mean(y)), float(np.std(y))) if y is not None else (0.0, 1.0)
    return Problem(
        [f"x{i}" for i in range(X.shape[1])],
        Scaling.from_stats(method, stats_of(X)),
        classes,
        label_moments=moments,
    )
