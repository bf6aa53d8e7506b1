"""What runs on a worker: its partition of the stored minibatches, and a share's gradient
(SketchML §4.1: "each worker computes the gradient on its minibatch, encodes it, sends it").

A worker keeps the minibatches it was given decoded in memory, keyed by the train (several
trains may share a cluster), from the first step to ``drop``.  A share's step is the trainer's
step 1–3 (``learn/trainer.py``) up to the gradient, on the columns the share holds:

1. margins ``Z = X·W' + o``, ``W'`` the model with the standardisation's scale folded in, at
   the held columns (the rest of ``W'`` is never read: the rows hold nothing there), ``o``
   the driver's offsets (intercept minus the shift term);
2. ``G = ∂ℓ/∂Z``, times the sample weights, over the widest step's rows;
3. ``Xᵀ·G`` at the held columns and ``ΣG``: the driver applies the scale, the shift and L2.

A gradient that is not finite (margins overflowed at too large a step) is the trainer's
divergence: the share answers ``DIVERGED`` instead of a message, and the driver raises
``Diverged`` and restarts at a smaller step, as one process would, rather than the codec
refusing to encode it.  It is an answer, not an exception: a task that raises is logged by
the Dask worker as an ERROR ("Compute Failed"), and this one is handled.

The functions are module-level so Dask ships them by reference: workers need loomdb.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.distributed import messages
from loomdb.learn.problem import Problem
from loomdb.learn.step_kernels import KIND_CODES, residuals
from loomdb.seams import Batch
from loomdb.store.storage import Stored


@dataclass
class WorkSpec:
    """What a worker needs to decode and train on its minibatches."""

    fmt: Any  # the bound storage format
    n_features: int  # the layout's columns, as a stored minibatch is decoded
    precision: int
    kind: str
    targets: Problem  # only its targets() is used: classes and class weights
    up: str  # the gradient codec
    down: str  # the model's codec
    width: int  # the model's rows: the features (an image layout's pixels, not its column)


@dataclass
class Held:
    batch: Batch
    T: np.ndarray
    sw: np.ndarray
    columns: np.ndarray


@dataclass
class Partition:
    spec: WorkSpec
    batches: dict[int, Held] = field(default_factory=dict)


_PARTS: dict[str, Partition] = {}
DIVERGED = None  # a share's answer in place of a gradient that is not finite
_LOCK = threading.Lock()


def held_columns(X: Any) -> np.ndarray:
    """The columns where ``R @ X`` can be nonzero, increasing (a sparse gradient's keys)."""
    held = getattr(X, "held_columns", None)
    if held is not None:
        return np.asarray(held(), dtype=np.int64)
    if isinstance(X, np.ndarray):
        return np.flatnonzero((X != 0).any(axis=0)).astype(np.int64)
    return np.arange(X.shape[1], dtype=np.int64)


def hello() -> dict[str, Any]:
    """Who this worker is: its loomdb (the driver checks it is the same) and process."""
    import loomdb

    return {"loomdb": loomdb.__version__, "pid": os.getpid()}


def load(key: str, spec: WorkSpec, stored: list[Stored]) -> dict[int, tuple[int, np.ndarray, int]]:
    """Decode and keep ``stored`` minibatches; returns each one's rows, held columns and
    stored bytes."""
    with _LOCK:
        part = _PARTS.setdefault(key, Partition(spec))
    out = {}
    for s in stored:
        batch = spec.fmt.decode(s, spec.n_features, spec.precision)
        T, sw = spec.targets.targets(batch.y)
        held = Held(batch, T, sw, held_columns(batch.X))
        part.batches[s.batch] = held
        out[s.batch] = (batch.rows, held.columns.astype(np.int32), s.nbytes)
    return out


def load_from(
    key: str, spec: WorkSpec, dsn: str, reader: dict[str, Any], runs: list[tuple[int, int]]
) -> dict[int, tuple[int, np.ndarray, int]]:
    """Read minibatches ``runs`` of an index from PostgreSQL (``dsn``) and keep them."""
    from loomdb.distributed.reading import read_runs

    out: dict[int, tuple[int, np.ndarray, int]] = {}
    for chunk in read_runs(dsn, reader, runs, spec.fmt.parts(spec.precision)):
        out.update(load(key, spec, chunk))
    return out


def columns_of(part: Partition, numbers: list[int]) -> np.ndarray:
    """The held columns of a share's minibatches (their union, increasing)."""
    cols = [part.batches[n].columns for n in numbers]
    return cols[0] if len(cols) == 1 else np.unique(np.concatenate(cols))


def compute(key: str, numbers: list[int], down: bytes, seed: int) -> tuple[bytes | None, float]:
    """One share's step: the encoded gradient message (``DIVERGED`` where the gradient is
    not finite), and the seconds it took here."""
    from loomdb.accel import registry

    started = time.perf_counter()
    part = _PARTS[key]
    spec = part.spec
    backend = registry.get("cpu")
    kind = KIND_CODES[spec.kind]
    cols = columns_of(part, numbers)
    values, offsets, widest = messages.unpack_model(down, cols, spec.down)
    k = values.shape[1]
    Weff = np.zeros((spec.width, k))
    Weff[cols] = values
    total, rows = 0.0, 0
    gsum = np.zeros(k)
    acc: np.ndarray | None = None
    for n in numbers:
        held = part.batches[n]
        with np.errstate(over="ignore", invalid="ignore"):  # the driver's guard judges
            Z = backend.margins(held.batch, Weff) + offsets
            value, G, batch_gsum = residuals(kind, Z, held.T, held.sw, float(widest))
            g = backend.gradient(held.batch, G)
        total += value
        gsum += batch_gsum
        acc = g if acc is None else acc + g
        rows += held.batch.rows
    assert acc is not None
    if not (np.isfinite(acc).all() and np.isfinite(gsum).all()):  # no codec takes NaN/Inf
        return DIVERGED, time.perf_counter() - started
    up = messages.pack_gradient(cols, acc[cols], total, rows, gsum, spec.up, seed)
    return up, time.perf_counter() - started


def drop(key: str) -> bool:
    with _LOCK:
        return _PARTS.pop(key, None) is not None
