"""Bismarck's shared-nothing parallel epoch: shards trained from one start, merged by
row-weighted model averaging.

Bismarck (Feng et al., SIGMOD 2012) §3.3, parallel IGD: the pure-UDA, shared-nothing version
runs the transition (one gradient step per tuple — here per minibatch) over each segment's rows
in parallel, every segment from the same model, and the merge averages the segments' models
weighted by the rows each processed; the driver loops epochs (shuffle once, §4).  loomdb's
shards are fixed by the minibatch number: shard j of n trains minibatches j, j + n, j + 2n, …
of the epoch, in that order, so which process or thread runs a shard never changes what it
computes, and ``merge`` sums in shard order (floating-point addition is not associative): a
parallel train with a fixed seed is reproducible run to run.

Each shard runs the serial loop's own step (``trainer._sgd_epoch``) over its minibatches: the
same loss, class weights, short-batch weighting, L2, proximal L1 and optimiser.  Departures from
Bismarck, which averages the model alone:

* loomdb's optimisers carry state between steps.  Every shard starts from the epoch's state;
  the merge averages Nesterov's velocity and Adam's moments with the same row weights, sums
  Nesterov's running sums of iterates (so the epoch's mean iterate is the mean over every
  shard's iterates) and advances the step counters by the longest shard's steps.  Restarts and
  the mean iterate kept between epochs stay with the driver (``end_epoch``), as in the serial
  loop, and so do the loss, validation, stopping and the guard.
* A shard whose model turns non-finite stops and reports it; the merge raises ``Diverged`` for
  the first such shard, and the trainer restarts with a smaller step as it does serially.

Averaging changes the algorithm: an epoch takes 1/n of the serial steps in each shard, from the
same point.  Bismarck reports that accuracy depends on the number of segments; loomdb's bench
``parallel`` and tests measure the final loss against the serial run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.accel.cpu import CpuBackend
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.learn import shard_state
from loomdb.learn.optimizers import OPTIMIZERS
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.learn.shard_state import Record
from loomdb.learn.trainer import Diverged, TrainConfig, _sgd_epoch
from loomdb.seams import Batch

# The optimisers' state a shard carries, by what the merge does with it.
AVERAGED = {"sgd": (), "nesterov": ("vW", "vb"), "adam": ("mW", "vW", "mb", "vb")}
SUMMED = {"sgd": (), "nesterov": ("sW", "sb", "count"), "adam": ()}
STEPS: dict[str, str | None] = {"sgd": None, "nesterov": "t", "adam": "t"}  # step counters
FIXED = {"sgd": (), "nesterov": ("tmax",), "adam": ()}  # read by steps, set by end_epoch


def shard_of(batch: int, shards: int) -> int:
    """The shard that trains minibatch ``batch``: fixed by its number, never by who is free."""
    return batch % shards


@dataclass
class Start:
    """What every shard of one epoch starts from: the model, the optimiser's state, the step."""

    kind: str
    optimizer: str
    lr: float
    l1: float
    l2: float
    fit_intercept: bool
    widest: int
    classes: list[float]
    W: np.ndarray
    b: np.ndarray
    shift: np.ndarray
    scale: np.ndarray
    class_weights: np.ndarray | None = None
    state: dict[str, Any] = field(default_factory=dict)  # the optimiser's carried state

    @classmethod
    def of(cls, problem: Problem, config: TrainConfig, W, b, optimizer, lr, widest) -> Start:
        name = config.optimizer
        if name not in AVERAGED:
            raise LoomOptionError(f"a parallel epoch cannot carry the state of optimizer {name!r}")
        state: dict[str, Any] = {k: getattr(optimizer, k) for k in AVERAGED[name] + FIXED[name]}
        step = STEPS[name]
        if step:
            state[step] = getattr(optimizer, step)
        return cls(
            kind=config.kind,
            optimizer=name,
            lr=float(lr),
            l1=float(config.l1),
            l2=float(config.l2),
            fit_intercept=bool(config.fit_intercept),
            widest=int(widest),
            classes=[float(c) for c in problem.classes],
            W=W,
            b=b,
            shift=problem.scaling.shift,
            scale=problem.scaling.scale,
            class_weights=problem.class_weights,
            state=state,
        )

    def to_record(self, extra: dict[str, Any] | None = None) -> Record:
        arrays = {"W": self.W, "b": self.b, "shift": self.shift, "scale": self.scale}
        if self.class_weights is not None:
            arrays["class_weights"] = self.class_weights
        scalars: dict[str, Any] = {**(extra or {})}
        for k, v in self.state.items():
            if isinstance(v, np.ndarray):
                arrays[f"state.{k}"] = v
            else:
                scalars[f"state.{k}"] = v
        for k in ("kind", "optimizer", "lr", "l1", "l2", "fit_intercept", "widest", "classes"):
            scalars[k] = getattr(self, k)
        return scalars, arrays

    @classmethod
    def from_record(cls, record: Record) -> Start:
        scalars, arrays = record
        try:
            state = {k[6:]: v for k, v in {**scalars, **arrays}.items() if k.startswith("state.")}
            start = cls(
                **{k: scalars[k] for k in ("kind", "optimizer", "lr", "l1", "l2")},
                fit_intercept=scalars["fit_intercept"],
                widest=scalars["widest"],
                classes=scalars["classes"],
                W=arrays["W"],
                b=arrays["b"],
                shift=arrays["shift"],
                scale=arrays["scale"],
                class_weights=arrays.get("class_weights"),
                state=state,
            )
        except (KeyError, TypeError):
            raise LoomFormatError("malformed parallel epoch start: a field is missing") from None
        start.check()
        return start

    def check(self) -> None:
        """Refuse a start whose fields the steps cannot trust: a parallel epoch's job arrives
        as bytes a caller of ``loom._epoch_step`` may have forged, and the compiled steps
        index the model, its scaling and the optimiser's state by the model's shape."""
        bad = _bad_scalars(self)
        W = self.W
        m, k = W.shape if W.ndim == 2 else (-1, -1)
        if not bad and k != (1 if len(self.classes) <= 2 else len(self.classes)):
            bad = f"a model of {k} columns for {len(self.classes)} classes"
        wanted: dict[str, Any] = {"b": (k,), "shift": (m,), "scale": (m,)}
        if self.class_weights is not None:
            wanted["class_weights"] = (len(self.classes),)
        for name, shape in wanted.items():
            if not bad and getattr(self, name).shape != shape:
                bad = f"{name} of shape {getattr(self, name).shape}, not {shape}"
        if not bad:
            step = STEPS[self.optimizer]
            names = AVERAGED[self.optimizer] + FIXED[self.optimizer] + ((step,) if step else ())
            bad = _bad_state(self.state, names, (m, k))
        if bad:
            raise LoomFormatError(f"malformed parallel epoch start: {bad}", hint=shard_state.HINT)

    def problem(self) -> Problem:
        m = self.W.shape[0]
        scaling = Scaling("given", np.asarray(self.shift), np.asarray(self.scale))
        cw = None if self.class_weights is None else np.asarray(self.class_weights)
        return Problem(features=[""] * m, scaling=scaling, classes=self.classes, class_weights=cw)

    def config(self) -> TrainConfig:
        return TrainConfig(kind=self.kind, l1=self.l1, l2=self.l2, fit_intercept=self.fit_intercept)


@dataclass
class ShardResult:
    """One shard's epoch: its model and optimiser state, what it read, where it ran."""

    shard: int
    W: np.ndarray
    b: np.ndarray
    state: dict[str, Any]
    loss: float = 0.0
    rows: int = 0
    bytes: int = 0
    batches: int = 0
    widest: int = 0
    next_batch: int = 0  # the minibatch this shard expects next (completeness checks)
    diverged: str | None = None
    worker: str = ""  # the process or thread that ran it

    def to_record(self) -> Record:
        scalars: dict[str, Any] = {
            k: getattr(self, k)
            for k in ("shard", "loss", "rows", "bytes", "batches", "widest", "next_batch")
        }
        scalars.update(diverged=self.diverged, worker=self.worker)
        arrays = {"W": self.W, "b": self.b}
        for k, v in self.state.items():
            if isinstance(v, np.ndarray):
                arrays[f"state.{k}"] = v
            else:
                scalars[f"state.{k}"] = v
        return scalars, arrays

    @classmethod
    def from_record(cls, record: Record) -> ShardResult:
        scalars, arrays = record
        state = {k[6:]: v for k, v in {**scalars, **arrays}.items() if k.startswith("state.")}
        try:
            plain = {k: v for k, v in scalars.items() if not k.startswith("state.")}
            return cls(W=arrays["W"], b=arrays["b"], state=state, **plain)
        except (KeyError, TypeError):
            raise LoomFormatError("malformed parallel epoch result: a field is missing") from None

    def check(self, start: Start) -> None:
        """Refuse a shard's state that does not continue ``start``: the state a transition is
        handed is bytes its caller may have forged (``loom._epoch_step``), and the steps write
        into its model and optimiser state by the start's shapes."""
        counts = ("shard", "rows", "bytes", "batches", "widest", "next_batch")
        bad = next(
            (f"{k} = {getattr(self, k)!r:.40}" for k in counts if not _count(getattr(self, k))), ""
        )
        if not bad and not (
            _real(self.loss)
            and (self.diverged is None or isinstance(self.diverged, str))
            and isinstance(self.worker, str)
        ):
            bad = "its loss, divergence or worker is mistyped"
        for name, a, b in (("W", self.W, start.W), ("b", self.b, start.b)):
            if not bad and (not isinstance(a, np.ndarray) or a.shape != b.shape):
                bad = f"{name} of shape {np.shape(a)}, not {b.shape}"
        if not bad:
            name = start.optimizer
            step = STEPS[name]
            names = AVERAGED[name] + SUMMED[name] + FIXED[name] + ((step,) if step else ())
            bad = _bad_state(self.state, names, start.W.shape, required=False)
        if bad:
            raise LoomFormatError(f"malformed parallel epoch result: {bad}", hint=shard_state.HINT)


_LARGEST = 1 << 53  # a count or step beyond this is no count a train makes


def _real(x: Any) -> bool:
    return type(x) in (int, float) and abs(x) < float("inf")


def _count(x: Any) -> bool:
    return type(x) is int and 0 <= x < _LARGEST


def _bad_scalars(start: Start) -> str:
    """What is wrong with ``start``'s names and numbers ("": nothing)."""
    if not (isinstance(start.kind, str) and start.kind in ("linear", "logistic", "svm")):
        return f"kind {start.kind!r:.40}"
    if not (isinstance(start.optimizer, str) and start.optimizer in AVERAGED):
        return f"optimizer {start.optimizer!r:.40}"
    if not (_real(start.lr) and start.lr > 0 and _real(start.l1) and _real(start.l2)):
        return "lr, l1 or l2 is not a finite number"
    if start.l1 < 0 or start.l2 < 0:
        return "l1 or l2 is negative"
    if type(start.fit_intercept) is not bool or not _count(start.widest):
        return "fit_intercept or widest is mistyped"
    classes = start.classes
    if not (isinstance(classes, list) and all(_real(c) for c in classes)):
        return "classes are not a list of finite numbers"
    if any(a >= b for a, b in zip(classes, classes[1:])):
        return "classes are not in increasing order"
    arrays = (start.W, start.b, start.shift, start.scale)
    if not all(isinstance(a, np.ndarray) for a in arrays) or start.W.ndim != 2:
        return f"a model of shape {np.shape(start.W)}"
    if start.class_weights is not None and not isinstance(start.class_weights, np.ndarray):
        return "class_weights are not an array"
    return ""


def _bad_state(state: Any, names: tuple[str, ...], shape: tuple[int, ...], required=True) -> str:
    """What is wrong with an optimiser's carried ``state`` for a model of ``shape`` ("":
    nothing): only the fields ``names`` (all of them when ``required``), the arrays of the
    model's (``…W``) or intercept's (``…b``) shape, the counters counts."""
    if not isinstance(state, dict) or not set(state) <= set(names):
        return f"optimizer state {sorted(state) if isinstance(state, dict) else state!r:.80}"
    if required and set(state) != set(names):
        return f"optimizer state {sorted(state)!r:.80}, not {sorted(names)}"
    for key, value in state.items():
        if key[-1] in "Wb":
            wanted = shape if key[-1] == "W" else shape[1:]
            if not isinstance(value, np.ndarray) or value.shape != wanted:
                return f"optimizer state {key} of shape {np.shape(value)}, not {wanted}"
        elif not (_count(value) or (key == "tmax" and value is None)):
            return f"optimizer state {key} = {value!r:.40}"
    return ""


def begin(start: Start, shard: int) -> ShardResult:
    """A shard before its first minibatch: the start's model and state, writable."""
    state = {k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in start.state.items()}
    return ShardResult(
        shard=shard,
        W=np.array(start.W),
        b=np.array(start.b),
        state=state,
        widest=start.widest,
        next_batch=shard,
    )


def train(start: Start, result: ShardResult, batches: Iterable[Batch], shards: int) -> None:
    """Run the serial step over ``batches`` (this shard's, in order), updating ``result``."""
    if result.diverged is not None:
        return
    name = start.optimizer
    result.worker = f"{os.getpid()}:{threading.get_ident()}"  # the process or thread running it
    result.W, result.b = np.array(result.W), np.array(result.b)  # writable, never a view
    optimizer = OPTIMIZERS[name](result.W.shape)
    for k, v in result.state.items():
        setattr(optimizer, k, np.array(v) if isinstance(v, np.ndarray) else v)
    if not result.batches:  # the running sums start from zero each epoch
        for k in SUMMED[name]:
            v = getattr(optimizer, k)
            setattr(optimizer, k, np.zeros_like(v) if isinstance(v, np.ndarray) else 0)
    widest = [result.widest]
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # the merged model is judged
            totals = _sgd_epoch(
                _counted(batches, result, shards),
                result.W,
                result.b,
                start.problem(),
                start.config(),
                CpuBackend(),
                optimizer,
                start.lr,
                None,
                widest,
            )
    except Diverged as d:
        result.diverged = d.reason
        return
    result.loss += totals["loss"]
    result.rows += totals["rows"]
    result.bytes += totals["bytes"]
    result.widest = widest[0]
    step = STEPS[name]
    carried = AVERAGED[name] + SUMMED[name] + FIXED[name] + ((step,) if step else ())
    result.state = {k: getattr(optimizer, k) for k in carried}


def _counted(batches: Iterable[Batch], result: ShardResult, shards: int):
    for batch in batches:
        result.next_batch += shards
        result.batches += 1
        yield batch


def merge(results: list[ShardResult], start: Start, W, b, optimizer) -> dict[str, Any]:
    """Average the shards' models (and optimiser state) into ``W``, ``b`` and ``optimizer`` in
    place, weighted by the rows each trained, in shard order; the epoch's totals."""
    results = sorted(results, key=lambda r: r.shard)
    for r in results:
        if r.diverged is not None:
            raise Diverged(f"{r.diverged} (shard {r.shard + 1} of {len(results)})")
    rows = sum(r.rows for r in results)
    weights = [r.rows / rows for r in results] if rows else [1.0 / len(results)] * len(results)
    W[...] = _weighted([r.W for r in results], weights)
    b[...] = _weighted([r.b for r in results], weights)
    name = start.optimizer
    for k in AVERAGED[name]:
        setattr(optimizer, k, _weighted([r.state[k] for r in results], weights))
    for k in SUMMED[name]:  # arrays or counts, added in shard order
        setattr(optimizer, k, sum(r.state[k] for r in results))
    step = STEPS[name]
    if step:
        setattr(optimizer, step, max(int(r.state[step]) for r in results))
    return {
        "loss": sum(r.loss for r in results),
        "rows": rows,
        "bytes": sum(r.bytes for r in results),
        "shards": len(results),
        "workers": len({r.worker for r in results}),
    }


def _weighted(arrays: list[np.ndarray], weights: list[float]) -> np.ndarray:
    total = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, w in zip(arrays, weights):
        total += w * a
    return total
