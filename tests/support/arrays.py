"""An in-memory EpochSource: numpy rows cut into batches, for trainer tests without a database."""

from __future__ import annotations

import numpy as np

from loomdb.bench.gpu import KeptMinibatches
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


def KeptSource(X, y, batch_size=32, payload="dense"):
    """The same minibatch objects every epoch, as the epoch cache hands them out, stored as
    ``payload``: dense, toc, or mlweaving read at 4 of its 32 bits."""
    return KeptMinibatches.laid_out(X, y, batch_size, payload, bits=4)


def glm_data(classes: int, rows=301, features=7, seed=3):
    """Rows TOC compresses and labels a linear model fits: ``classes`` 0 is regression."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(1.0, 2.0, size=(rows, features)))  # values TOC compresses
    score = X @ rng.normal(size=(features, max(classes, 1)))
    if classes == 0:  # regression
        return X, score[:, 0] + rng.normal(size=rows), []
    y = (score[:, 0] > 0) * 1.0 if classes == 2 else np.argmax(score, axis=1) * 1.0
    return X, y, [float(c) for c in range(classes)]


def assert_same_training(one, other, rtol: float, atol: float, loss_rtol: float) -> None:
    """Two ``fit`` results (model, history) trained the same: models and epoch losses within
    the tolerances, the same rows, and a model that moved."""
    (model, history), (twin, twin_history) = one, other
    np.testing.assert_allclose(model.W, twin.W, rtol=rtol, atol=atol)
    np.testing.assert_allclose(model.b, twin.b, rtol=rtol, atol=atol)
    losses = [[e["loss"] for e in h] for h in (history, twin_history)]
    np.testing.assert_allclose(*losses, rtol=loss_rtol)
    assert [e["rows"] for e in history] == [e["rows"] for e in twin_history]
    assert np.abs(model.W).max() > 1e-2  # it trained
