"""The minibatch trainer: loops epochs and batches, knows nothing of engines or formats.

One step, in this order (river-style, fixed):
1. margins ``Z = X·(W∘scale) + (b − shift·(W∘scale))`` — standardisation folded into the
   products, so a compressed batch is never rewritten (TOC §4 needs only A·v and v·A);
2. per-sample loss derivative ``G = ∂ℓ/∂Z``, times class weights, averaged over the batch;
3. gradient ``∇W = scale∘(Xᵀ·G − shift·ΣG) + l2·W``, ``∇b = ΣG`` (intercept unregularised);
4. optimiser update, then the proximal L1 step (soft-threshold by lr·l1).

Bismarck's design: the data was shuffled once when it was laid out; every epoch reads the
stored batches in the same order.  The epoch loss is the mean data loss seen during the pass
(as scikit-learn reports it) plus the regularisation terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from loomdb.batch import Batch
from loomdb.learn.losses import LOSSES
from loomdb.learn.model import LinearModel, Scaling
from loomdb.learn.optimizers import OPTIMIZERS, soft_threshold
from loomdb.learn.schedules import Schedule


class ComputeBackend(Protocol):
    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray: ...
    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray: ...


class EpochSource(Protocol):
    """Where batches come from: a storage format reading its stored rows."""

    def train_batches(self, epoch: int, history: list[dict[str, Any]]) -> Iterable[Batch]: ...
    def validation_batches(self) -> Iterable[Batch]: ...


@dataclass
class TrainConfig:
    kind: str = "logistic"
    epochs: int = 20
    tol: float | None = None
    lr: float = 0.1
    lr_schedule: str = "inverse-t"
    lr_decay: float = 1.0
    optimizer: str = "sgd"
    l1: float = 0.0
    l2: float = 1e-4
    fit_intercept: bool = True


@dataclass
class Problem:
    """What the data says about the task: features, classes, weights and scaling."""

    features: list[str]
    scaling: Scaling
    classes: list[Any]
    class_weights: np.ndarray | None = None
    init: LinearModel | None = None

    @property
    def k(self) -> int:
        return 1 if len(self.classes) <= 2 else len(self.classes)

    def targets(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(T, sample_weight)`` for raw labels ``y``: 0/1 one-vs-rest columns or values."""
        if not self.classes:
            return y.reshape(-1, 1).astype(np.float64), np.ones(len(y))
        idx = np.searchsorted(np.asarray(self.classes, dtype=np.float64), y)
        if self.k == 1:
            T = (idx == 1).astype(np.float64).reshape(-1, 1)
        else:
            T = np.zeros((len(y), self.k))
            T[np.arange(len(y)), idx] = 1.0
        w = self.class_weights[idx] if self.class_weights is not None else np.ones(len(y))
        return T, w


Progress = Callable[[dict[str, Any]], None]


def fit(
    source: EpochSource,
    problem: Problem,
    config: TrainConfig,
    backend: ComputeBackend,
    progress: Progress | None = None,
) -> tuple[LinearModel, list[dict[str, Any]]]:
    """Train; returns the model and the per-epoch history.

    A backend whose hardware owns the epoch loop (``fit``: fpga-sim) trains by itself.
    """
    whole = getattr(backend, "fit", None)
    if whole is not None:
        return whole(source, problem, config, progress)  # type: ignore[no-any-return]
    loss = LOSSES[config.kind]
    m, k = len(problem.features), problem.k
    if problem.init is not None:
        W, b = problem.init.W.copy(), problem.init.b.copy()
    else:
        W, b = np.zeros((m, k)), np.zeros(k)
    shift, scale = problem.scaling.shift, problem.scaling.scale
    optimizer = OPTIMIZERS[config.optimizer]((m, k))
    schedule = Schedule(config.lr_schedule, config.lr, config.lr_decay)
    history: list[dict[str, Any]] = []
    best = np.inf

    def forward(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        Weff = W * scale[:, None]
        return backend.margins(batch, Weff) + (b - shift @ Weff), Weff

    for epoch in range(config.epochs):
        lr = schedule.get(epoch)
        started = time.perf_counter()
        total, rows, nbytes, meta = 0.0, 0, 0, {}
        for batch in source.train_batches(epoch, history):
            T, sw = problem.targets(batch.y)
            Z, _ = forward(batch)
            total += float((loss.value(Z, T) * sw[:, None]).sum())
            G = loss.derivative(Z, T) * (sw / batch.rows)[:, None]
            gsum = G.sum(axis=0)
            gW = scale[:, None] * (backend.gradient(batch, G) - np.outer(shift, gsum))
            gW += config.l2 * W
            gb = gsum if config.fit_intercept else np.zeros(k)
            optimizer.step(W, b, gW, gb, lr)
            if config.l1:
                soft_threshold(W, lr * config.l1)
            rows += batch.rows
            nbytes += batch.nbytes
            meta.update(batch.meta)
        seconds = time.perf_counter() - started
        penalty = 0.5 * config.l2 * float((W * W).sum()) + config.l1 * float(np.abs(W).sum())
        entry: dict[str, Any] = {
            "epoch": epoch + 1,
            "loss": total / max(rows, 1) + penalty,
            "rows": rows,
            "seconds": round(seconds, 6),
            "rows_per_s": rows / seconds if seconds > 0 else None,
            "lr": lr,
            "bytes_read": nbytes,
            **meta,
        }
        val = _validation_loss(source, problem, loss, forward)
        if val is not None:
            entry["val_loss"] = val + penalty
        history.append(entry)
        if progress is not None:
            progress({**entry, "epochs": config.epochs})
        watched = entry.get("val_loss", entry["loss"])
        improved = best - watched >= (config.tol or 0.0) * max(abs(best), 1e-12)
        if config.tol is not None and np.isfinite(best) and not improved:
            break
        best = min(best, watched)
    model = LinearModel(config.kind, problem.features, W, b, problem.scaling, problem.classes)
    return model, history


def _validation_loss(source, problem, loss, forward) -> float | None:
    total, rows = 0.0, 0
    for batch in source.validation_batches():
        T, sw = problem.targets(batch.y)
        Z, _ = forward(batch)
        total += float((loss.value(Z, T) * sw[:, None]).sum())
        rows += batch.rows
    return total / rows if rows else None
