"""The minibatch trainer: owns the epoch loop, the precision schedule, stopping and the guard.

Bismarck's design: the data was shuffled once when it was laid out; every epoch reads the
stored batches in the same order.  One step, in this order (river-style, fixed):

1. margins ``Z = X·(W∘scale) + (b − shift·(W∘scale))`` — standardisation folded into the
   products, so a compressed batch is never rewritten (TOC §4 needs only A·v and v·A);
2. per-sample loss derivative ``G = ∂ℓ/∂Z``, times class weights, averaged over the batch;
3. gradient ``∇W = scale∘(Xᵀ·G − shift·ΣG) + l2·W``, ``∇b = ΣG`` (intercept unregularised);
4. optimiser update, then the proximal L1 step (soft-threshold by lr·l1).

A batch shorter than the widest one (the last stored batch) weighs its rows and the L2 term by
rows/widest instead of averaging over its own rows, so every row counts the same in an epoch and
a constant step's fixed point is the minimiser of the objective (an average over a 5-row last
batch gave those rows 51× the weight on digits, an objective floor 2% above the optimum).

Each epoch reads its batches at the precision the schedule picks (MLWeaving §6; formats that
store one precision ignore it).  A backend whose hardware owns the epoch (``run_epoch``:
fpga-sim) replaces steps 1–4, and this loop still records the history, validates, stops on
``tol`` and guards.  An ``EpochRunner`` (the parallel shards of ``learn/averaging.py``) runs an
epoch's steps 1–4 in place of the serial loop, updating the model and the optimiser in place.
The guard: a non-finite model or an epoch loss above ``EXPLODE`` times the loss of the zero
model means the step was too large; training restarts from the beginning with
a step ten times smaller (recorded in the history), and after ``MAX_RESTARTS`` gives up with a
``LoomDivergedError`` saying what to change.  The epoch loss is the mean data loss seen during the
pass (as scikit-learn reports it, at the iterates the steps moved through) plus the
regularisation terms of the epoch's last iterate (after its proximal L1 step), and the
validation loss is of the point the next epoch starts from (that iterate, or where a nesterov
restart returns); the model nesterov keeps is the epoch's averaged iterate instead (with L1 its
proximal point, ``Nesterov.end_epoch``), so the last epoch's loss is the stored model's
objective only up to the pass's noise (tests/unit/test_nesterov.py: within 2% at l1 = 10 and
0.05).  Training stops early when it (or the validation loss) has not improved by ``tol`` of
the best for ``patience`` epochs in a row (scikit-learn's ``tol`` and ``n_iter_no_change``).

With a skip policy (``learn.skipping``: SlimML §3.3 or a baseline) the source asks the policy,
minibatch by minibatch and at the parameters of that moment, which groups to read; the step
weighs the kept rows as the policy says and always divides by the minibatch as sampled, and
the epoch loss is the kept rows' weighted loss over the sampled rows.  Without one, every
number is computed exactly as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import numpy as np

from loomdb.errors import LoomDivergedError, LoomNothingTrainedError, LoomOptionError
from loomdb.learn import fused_steps
from loomdb.learn.losses import LOSSES
from loomdb.learn.metrics import tune_score
from loomdb.learn.model import LinearModel
from loomdb.learn.optimizers import OPTIMIZERS, soft_threshold
from loomdb.learn.precision import precision_for
from loomdb.learn.problem import Problem
from loomdb.learn.schedules import Schedule
from loomdb.learn.skipping import Policy
from loomdb.learn.step_kernels import KIND_CODES, assemble, residuals
from loomdb.seams import Backend, Batch, EpochStep

MAX_RESTARTS = 4
EXPLODE = 1e3


class EpochSource(Protocol):
    """Where batches come from: a layout read at a precision (and, for a grouped layout, only
    the groups ``choose`` picks from each minibatch just before it is read)."""

    def train_batches(
        self, epoch: int, precision: int, choose: Callable[..., Any] | None = None
    ) -> Iterable[Batch]: ...

    def validation_batches(self, precision: int) -> Iterable[Batch]: ...


class EpochRunner(Protocol):
    """Runs one epoch's steps in place of the serial loop; returns loss, rows and bytes."""

    def __call__(
        self,
        epoch: int,
        precision: int,
        W: np.ndarray,
        b: np.ndarray,
        optimizer: Any,
        lr: float,
        widest: list[int],
    ) -> dict[str, Any]: ...


@dataclass
class TrainConfig:
    kind: str = "logistic"
    epochs: int = 20
    tol: float | None = None
    lr: float = 0.1
    lr_schedule: str = "inverse-t"
    lr_decay: float = 0.1
    optimizer: str = "sgd"
    l1: float = 0.0
    l2: float = 1e-4
    fit_intercept: bool = True
    precision: int | str = 32
    top_precision: int = 32  # the most the layout holds (a pcr index: its scan groups)
    safe_lr: float | None = None  # the automatic step: restarts never go above it
    patience: int = 5  # epochs without a tol-sized improvement before stopping (sklearn's)
    metric: str | None = None  # loom_tune's metric besides the loss (learn/metrics.py), if any
    batch_size: int = 0  # rows of a whole stored minibatch (0: not known): fpga-sim's B


class Diverged(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Progress = Callable[[dict[str, Any]], None]


def fit(
    source: EpochSource,
    problem: Problem,
    config: TrainConfig,
    backend: Backend,
    progress: Progress | None = None,
    check: Callable[[], None] | None = None,
    skip: Policy | None = None,
    runner: EpochRunner | None = None,
) -> tuple[LinearModel, list[dict[str, Any]]]:
    """Train; returns the model and the history (restarts first, then one entry per epoch)."""
    restarts: list[dict[str, Any]] = []
    lr = config.lr
    for attempt in range(MAX_RESTARTS + 1):
        try:
            W, b, epochs = _run(source, problem, config, backend, lr, progress, check, skip, runner)
        except Diverged as d:
            smaller = lr / 10 if config.safe_lr is None else min(lr / 10, config.safe_lr)
            restarts.append(
                {"restart": attempt + 1, "reason": d.reason, "lr": lr, "next_lr": smaller}
            )
            lr = smaller
            continue
        model = LinearModel(config.kind, problem.features, W, b, problem.scaling, problem.classes)
        if config.metric not in (None, "loss") and epochs:
            scored = _validation_metric(source, problem, backend, model, epochs[-1], config.metric)
            if scored is not None:
                epochs[-1][f"val_{config.metric}"] = scored
        return model, restarts + epochs
    raise LoomDivergedError(
        f"training diverged {MAX_RESTARTS + 1} times, the last time at lr {lr * 10:g}: "
        f"{restarts[-1]['reason']}",
        hint="leave 'lr' to its automatic default or give a smaller one, standardize the "
        'features ({"standardize": "zscore"}), or lower l2',
    )


def _run(source, problem, config, backend, lr, progress, check, skip=None, runner=None):
    W, b = problem.initial()
    if hasattr(backend, "begin"):  # a backend keeping state between epochs starts afresh
        backend.begin(W, b)
    if skip is not None:
        skip.report()  # a restart counts afresh
    schedule = Schedule(config.lr_schedule, lr, config.lr_decay)
    loss = LOSSES[config.kind]
    history: list[dict[str, Any]] = []
    best, stale = np.inf, 0
    limit = EXPLODE * problem.baseline_loss(config.kind)
    optimizer = OPTIMIZERS[config.optimizer](W.shape)
    widest = [0]  # the widest batch seen: a short batch takes a proportionally shorter step
    for epoch in range(config.epochs):
        rate = schedule.get(epoch)
        s = precision_for(config.precision, epoch, history, config.top_precision)
        started = time.perf_counter()
        if runner is not None:  # the runner reads the epoch's minibatches itself
            batches = ()
        elif skip is None:
            batches = source.train_batches(epoch, s)
        else:  # W and b change in place: the policy sees the parameters of each moment
            batches = source.train_batches(epoch, s, partial(skip.choose, W=W, b=b))
        step = EpochStep(
            config.kind, rate, config.l2, config.fit_intercept, problem.targets, config.batch_size
        )
        with np.errstate(over="ignore", invalid="ignore"):  # the guard judges the result
            if runner is not None:
                totals = runner(epoch, s, W, b, optimizer, rate, widest)
            elif hasattr(backend, "run_epoch"):
                W, b, totals = backend.run_epoch(_checked(batches, check), W, b, step)
            else:
                totals = _sgd_epoch(
                    batches, W, b, problem, config, backend, optimizer, rate, check, widest, skip
                )
        seconds = time.perf_counter() - started
        with np.errstate(over="ignore"):  # weights that diverged: the guard says so
            penalty = 0.5 * config.l2 * float((W * W).sum()) + config.l1 * float(np.abs(W).sum())
        entry = _entry(epoch, totals, seconds, rate, s, penalty, skip)
        _nothing_trained(entry, history, problem, skip)
        _guard(W, b, entry["loss"], limit, epoch + 1, rate)
        if hasattr(optimizer, "end_epoch") and not hasattr(backend, "run_epoch"):
            optimizer.end_epoch(W, b, entry["loss"], rate * config.l1)
        val = _validation_loss(source, problem, loss, backend, W, b, s)
        if val is not None:
            entry["val_loss"] = val + penalty
            entry["val_data_loss"] = val  # without the penalty: what loom_tune compares
        history.append(entry)
        if progress is not None:
            progress({**entry, "epochs": config.epochs})
        watched = entry.get("val_loss", entry["loss"])
        improved = best - watched >= (config.tol or 0.0) * max(abs(best), 1e-12)
        stale = 0 if improved or not np.isfinite(best) else stale + 1
        if config.tol is not None and stale >= config.patience:
            break
        best = min(best, watched)
    if hasattr(optimizer, "model") and not hasattr(backend, "run_epoch"):
        W, b = optimizer.model(W, b)
    return W, b, history


def _entry(epoch, totals, seconds, rate, precision, penalty, skip) -> dict[str, Any]:
    """An epoch's history entry from the totals its batches gathered."""
    rows = totals.pop("rows")
    sampled = totals.pop("sampled", rows)
    return {
        "epoch": epoch + 1,
        "loss": totals.pop("loss") / max(sampled, 1) + penalty,
        "rows": rows,
        "seconds": round(seconds, 6),
        "rows_per_s": rows / seconds if seconds > 0 else None,
        "lr": rate,
        "bytes_read": totals.pop("bytes"),
        "precision": precision,
        **totals,
        **(skip.report() if skip is not None else {}),
    }


def _nothing_trained(entry: dict[str, Any], history: list[dict[str, Any]], problem, skip) -> None:
    """Refuse a train whose skipping left out every row of its first epoch from a zero model:
    it would store the zero model with a loss of 0 over no row (SlimML at ε = 1).  Later
    epochs may skip every row (a converged model finds no group critical), and a warm start
    that skips every row keeps the model it started from."""
    if entry["rows"] or skip is None or history or problem.init is not None:
        return
    raise LoomNothingTrainedError(
        f"the first epoch trained on no row: skip '{entry.get('skip')}' left out every row of "
        "every minibatch, and a model trained on nothing is not stored",
        hint="lower 'epsilon' (SlimML's removed share of a minibatch's effect) or "
        "'skip_fraction', or train without 'skip'",
    )


def _guard(W: np.ndarray, b: np.ndarray, loss: float, limit: float, epoch: int, lr: float):
    if not (np.isfinite(W).all() and np.isfinite(b).all() and np.isfinite(loss)):
        raise Diverged(f"the model became non-finite in epoch {epoch} at lr {lr:g}")
    if loss > limit:
        raise Diverged(f"the loss exploded to {loss:.3g} in epoch {epoch} at lr {lr:g}")


def _checked(batches: Iterable[Batch], check: Callable[[], None] | None) -> Iterable[Batch]:
    for batch in batches:
        if check is not None:
            check()
        yield batch


def _sgd_epoch(
    batches, W, b, problem, config, backend, optimizer, lr, check, widest, skip=None
) -> dict[str, Any]:
    kind = KIND_CODES[config.kind]
    shift, scale = problem.scaling.shift, problem.scaling.scale
    total, rows, nbytes = 0.0, 0, 0
    skipped = {"sampled": 0, "bytes_skipped": 0}
    stream = _checked(batches, check)
    steps = None if skip is not None else _stepper(backend, optimizer)
    for batch in steps.runs(stream, W.size) if steps is not None else stream:
        if isinstance(batch, tuple):  # consecutive minibatches stepped in one call
            payload, run = batch
            assert steps is not None  # only its runs are tuples
            total, trained, diverged = steps.step(
                payload, run, total, W, b, problem, config, optimizer, lr, widest
            )
            if diverged:
                raise Diverged(f"the model became non-finite at lr {lr:g}")
            rows += trained
            nbytes += sum(one.nbytes for one in run)
            continue
        skipped["sampled"] += batch.sampled
        skipped["bytes_skipped"] += batch.removed_bytes
        nbytes += batch.nbytes
        if not batch.rows:  # every group of this minibatch was removed: no step
            continue
        T, sw = problem.targets(batch.y)
        Weff = W * scale[:, None]
        Z = backend.margins(batch, Weff) + (b - shift @ Weff)
        trained = batch.rows
        if skip is not None:
            weights = skip.weigh(batch, Z, T, sw, W, b)
            trained = batch.rows if weights is None else int(np.count_nonzero(weights))
            if not trained:  # read (the oracle), but every row weighs 0: no step either
                continue
            sw = sw if weights is None else sw * weights
        widest[0] = max(widest[0], batch.sampled)
        share = batch.sampled / widest[0]  # 1 but for a short batch
        value, G, gsum = residuals(kind, Z, T, sw, float(widest[0]))
        total += value
        gW = assemble(backend.gradient(batch, G), scale, shift, gsum, config.l2 * share, W)
        gb = gsum if config.fit_intercept else np.zeros_like(gsum)
        optimizer.step(W, b, gW, gb, lr)
        if config.l1:
            soft_threshold(W, lr * config.l1)
        if not np.isfinite(W).all():
            raise Diverged(f"the model became non-finite at lr {lr:g}")
        rows += trained
    if skip is None:
        return {"loss": total, "rows": rows, "bytes": nbytes}
    return {"loss": total, "rows": rows, "bytes": nbytes, **skipped}


def _stepper(backend: Backend, optimizer: Any) -> Any:
    """What steps runs of minibatches for ``backend`` and ``optimizer`` (``runs`` and ``step``):
    the cpu backend's ``fused_steps``, a backend's own (``steps``: the gpu's), or None."""
    if fused_steps.serves(backend, optimizer):
        return fused_steps
    own = getattr(backend, "steps", None)
    return own(optimizer) if own is not None else None


def _validation_margins(source, problem, backend, W, b, precision):
    """Each validation batch's ``(batch, margins)`` at ``precision``."""
    shift, scale = problem.scaling.shift, problem.scaling.scale
    Weff = W * scale[:, None]
    for batch in source.validation_batches(precision):
        yield batch, backend.margins(batch, Weff) + (b - shift @ Weff)


def _validation_loss(source, problem, loss, backend, W, b, precision) -> float | None:
    total, rows = 0.0, 0
    for batch, Z in _validation_margins(source, problem, backend, W, b, precision):
        T, sw = problem.targets(batch.y)
        total += float((loss.value(Z, T) * sw[:, None]).sum())
        rows += batch.rows
    return total / rows if rows else None


def _validation_metric(source, problem, backend, model, last, metric) -> float | None:
    """``metric`` of the trained ``model`` on the validation batches, read at the last epoch's
    precision (None without validation rows, or when it is not finite)."""
    if metric == "auc" and problem.k != 1:
        raise LoomOptionError(
            f"the 'auc' metric scores two classes by the margin; the label holds "
            f"{len(problem.classes)}",
            hint="score the trials by 'accuracy' or 'loss'",
        )
    read = _validation_margins(source, problem, backend, model.W, model.b, last["precision"])
    pairs = [(np.array(batch.y), Z) for batch, Z in read]  # a batch's arrays may be reused
    if not pairs:
        return None
    y = np.concatenate([p[0] for p in pairs])
    Z = np.concatenate([p[1] for p in pairs])
    value = tune_score(metric, y, model.labels(Z), Z, problem.classes)
    return value if np.isfinite(value) else None
