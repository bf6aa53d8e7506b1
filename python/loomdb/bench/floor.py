"""The floor: loomdb's minibatch SGD as a plain numpy loop over an in-memory array.
No paper section.

The same algorithm as ``learn/trainer.py`` with the options a loomdb train actually used (read
from ``loom.models``: step size, schedule, optimiser, batch size, penalties), so it follows the
trainer's defaults wherever they go.  What it drops is everything a database adds: the rows are
z-scored once into a contiguous array, shuffled once, and each batch is a view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import expit

from loomdb.bench.epochwise import Race, race
from loomdb.bench.objective import Objective
from loomdb.learn.optimizers import OPTIMIZERS, soft_threshold
from loomdb.learn.schedules import Schedule


def sgd_epochs(Xs: np.ndarray, y: np.ndarray, used: dict[str, Any]):
    """(step one epoch, current (v, c)) of loomdb's logistic SGD on z-scored rows ``Xs``."""
    order = np.random.default_rng(int(used.get("seed", 0))).permutation(len(y))
    Xs, y = np.ascontiguousarray(Xs[order]), np.asarray(y, dtype=np.float64)[order]
    batch = int(used["batch_size"])
    schedule = Schedule(used["lr_schedule"], float(used["lr"]), float(used["lr_decay"]))
    l1, l2 = float(used.get("l1", 0.0)), float(used["l2"])
    intercept = bool(used.get("fit_intercept", True))
    W, b = np.zeros((Xs.shape[1], 1)), np.zeros(1)
    optimizer = OPTIMIZERS[used["optimizer"]](W.shape)
    epoch = [0]

    def step() -> None:
        lr = schedule.get(epoch[0])
        for start in range(0, len(y), batch):
            X, t = Xs[start : start + batch], y[start : start + batch, None]
            G = (expit(X @ W + b) - t) / len(t)
            gW = X.T @ G + l2 * W
            gb = G.sum(axis=0) if intercept else np.zeros(1)
            optimizer.step(W, b, gW, gb, lr)
            if l1:
                soft_threshold(W, lr * l1)
        epoch[0] += 1

    def model() -> tuple[np.ndarray, float]:
        return W[:, 0], float(b[0])

    return step, model


def floor_race(obj: Objective, used: dict[str, Any], target: float, cap: int) -> Race:
    step, model = sgd_epochs(obj.zscored(), obj.y, used)
    current: Callable[[], float] = lambda: obj.of_zscored(*model())  # noqa: E731
    return race(step, current, target, cap)
