"""The floor: loomdb's minibatch SGD as a plain numpy loop over an in-memory array.
No paper section.

The same algorithm as ``learn/trainer.py`` (its optimisers, schedules and per-epoch hooks are
loomdb's own objects) with the options a loomdb train actually used (read from ``loom.models``:
step size, schedule, optimiser, batch size, penalties), so it follows the trainer's defaults
wherever they go.  What it drops is everything a database adds: the rows are
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


def sgd_epochs(
    Xs: np.ndarray, y: np.ndarray, used: dict[str, Any], order: np.ndarray | None = None
):
    """(step one epoch, current (v, c)) of loomdb's logistic SGD on z-scored rows ``Xs``.

    As the trainer does it: a batch's gradient is its rows' sum over the widest batch's rows
    (a short last batch takes a proportionally shorter step, L2 included); an optimiser with
    ``end_epoch`` gets the epoch loss (the pass's mean data loss + the penalty) and one with
    ``model`` says which iterate is the model.  ``order``: the one-time shuffle (default: a
    seeded permutation)."""
    if order is None:
        order = np.random.default_rng(int(used.get("seed", 0))).permutation(len(y))
    Xs, y = np.ascontiguousarray(Xs[order]), np.asarray(y, dtype=np.float64)[order]
    batch = int(used["batch_size"])
    schedule = Schedule(used["lr_schedule"], float(used["lr"]), float(used["lr_decay"]))
    l1, l2 = float(used.get("l1", 0.0)), float(used["l2"])
    intercept = bool(used.get("fit_intercept", True))
    W, b = np.zeros((Xs.shape[1], 1)), np.zeros(1)
    optimizer: Any = OPTIMIZERS[used["optimizer"]](W.shape)
    end_epoch = getattr(optimizer, "end_epoch", None)
    epoch = [0]

    def step() -> None:
        lr, total, widest = schedule.get(epoch[0]), 0.0, 0
        for start in range(0, len(y), batch):
            X, t = Xs[start : start + batch], y[start : start + batch, None]
            widest = max(widest, len(t))
            Z = X @ W + b
            if end_epoch is not None:
                total += float((np.logaddexp(0.0, Z) - t * Z).sum())
            G = (expit(Z) - t) / widest
            gW = X.T @ G + (l2 * len(t) / widest) * W
            gb = G.sum(axis=0) if intercept else np.zeros(1)
            optimizer.step(W, b, gW, gb, lr)
            if l1:
                soft_threshold(W, lr * l1)
        if end_epoch is not None:
            penalty = 0.5 * l2 * float((W * W).sum()) + l1 * float(np.abs(W).sum())
            end_epoch(W, b, total / len(y) + penalty, lr * l1)
        epoch[0] += 1

    def model() -> tuple[np.ndarray, float]:
        Wm, bm = optimizer.model(W, b) if hasattr(optimizer, "model") else (W, b)
        return Wm[:, 0], float(bm[0])

    return step, model


def floor_race(obj: Objective, used: dict[str, Any], target: float, cap: int) -> Race:
    step, model = sgd_epochs(obj.zscored(), obj.y, used)
    current: Callable[[], float] = lambda: obj.of_zscored(*model())  # noqa: E731
    return race(step, current, target, cap)
