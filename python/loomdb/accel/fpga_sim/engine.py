"""Running jobs on the simulated MLWeaving engine (MLWeaving Algorithm 1, §4.3.2, §5, §7).

``Engine(job).run_epoch(U, y, model)`` runs one epoch of the bit-exact datapath (``kernels``)
on data quantised by MLWeaving: ``U`` uint32 (N, M) codes u = floor(x̃·(2^32 − 1)) of which the
engine sees the top ``job.bits`` bits, labels ``y`` float (converted to the engine's format).
``train(U, y, job)`` runs ``job.epochs`` epochs and, like the paper's host, computes the loss
after each epoch in float on the full-precision (32-bit) data, with the performance model's
simulated time beside the simulator's own wall time.

Sync mode is exact mini-batch SGD in fixed point.  Async mode reads, per group and
64-weight chunk, the architectural model the performance model's schedule says had been
written when that read happened (``perf.advance_versions``): with memory-bound defaults the
first group(s) of a batch see the model before the previous batch's update, or part of it.

``reference_sgd`` is float mini-batch SGD on the same (dequantised) data — the arithmetic the
engine approximates — and ``tolerance`` bounds how far the engine may drift from it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.accel.fpga_sim.fixed_point import (
    FRAC,
    dequantize,
    labels_to_fixed,
    loss_code,
    model_to_fixed,
    to_float,
)
from loomdb.accel.fpga_sim.job import Job
from loomdb.accel.fpga_sim.kernels import run_epoch_kernel
from loomdb.accel.fpga_sim.perf import read_versions, simulate, timing_args
from loomdb.errors import LoomDataError, LoomOptionError

LOSS_ROWS = 8192  # rows dequantised at a time by ``loss``


class Engine:
    """Runs a job's arithmetic on quantised data."""

    def __init__(self, job: Job):
        self.job = job
        self.wraps = 0  # the last epoch's model-register and accumulator wraps (0: none)

    def run_epoch(self, U: np.ndarray, y: np.ndarray, model: np.ndarray) -> np.ndarray:
        """One epoch; ``model`` is the engine's int32 Q8.23 (any integer dtype); returns int32."""
        job = self.job
        U = _codes(U, job)
        if len(y) != U.shape[0]:
            raise LoomDataError(
                f"fpga-sim: {U.shape[0]} samples but {len(y)} labels",
                hint="pass one label per row of U",
            )
        model = np.asarray(model)
        if (
            model.shape != (job.dimension,)
            or not np.issubdtype(model.dtype, np.integer)
            or (model.size and (model.min() < -(2**31) or model.max() >= 2**31))
        ):
            raise LoomDataError(
                f"fpga-sim: the model must be {job.dimension} int32 values (Q8.23); "
                f"got {model.dtype} {model.shape}",
                hint="start from np.zeros(M, np.int32) or model_to_fixed(weights)",
            )
        timing = dataclasses.replace(job, samples=max(U.shape[0], 1))
        _, lag = read_versions(timing, store=False)
        out, wraps = run_epoch_kernel(
            U,
            labels_to_fixed(y, job.loss),
            model.astype(np.int64),
            job.bits,
            job.mini_batch,
            job.step_shift + job.batch_shift,
            loss_code(job.loss),
            job.mode == "sync",
            timing_args(timing),
            lag + 1,
        )
        self.wraps = int(wraps)
        return out.astype(np.int32)


def train(
    U: np.ndarray,
    y: np.ndarray,
    job: Job,
    init: np.ndarray | None = None,
    precisions: Sequence[int] | None = None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """``job.epochs`` epochs from ``init`` (float weights, default zeros).

    ``precisions`` optionally gives s per epoch (the paper's per-epoch precision schedule, §6);
    otherwise every epoch uses ``job.bits``.  Returns the float model and one JSON-serialisable
    report per epoch: loss (float, full-precision data), bits, simulated cycles/seconds/bytes
    and the simulator's wall time.
    """
    if len(y) != job.samples or np.shape(U)[0] != job.samples:
        raise LoomDataError(
            f"fpga-sim: the job has {job.samples} samples but U has {np.shape(U)[0]} rows "
            f"and y {len(y)} labels",
            hint="build the Job with samples=len(y)",
        )
    if precisions is not None and len(precisions) == 0:
        raise LoomOptionError(
            "fpga-sim: the precision schedule is empty",
            hint="give one s per epoch (the last repeats), or None for job.bits",
        )
    model = np.zeros(job.dimension, np.int32) if init is None else model_to_fixed(init)
    reports: list[dict[str, Any]] = []
    for epoch in range(job.epochs):
        bits = job.bits if precisions is None else int(precisions[min(epoch, len(precisions) - 1)])
        epoch_job = dataclasses.replace(job, bits=bits, epochs=1)
        started = time.perf_counter()
        engine = Engine(epoch_job)
        model = engine.run_epoch(U, y, model)
        wall = time.perf_counter() - started
        sim = simulate(epoch_job)
        reports.append(
            {
                "epoch": epoch + 1,
                "bits": bits,
                "loss": loss(U, y, model, job.loss),
                "simulated_cycles": sim["cycles_per_epoch"],
                "simulated_seconds": sim["seconds_per_epoch"],
                "simulated_bytes": sim["bytes_per_epoch"],
                "bound": sim["bound"],
                "wall_seconds": wall,
                "wraps": engine.wraps,  # the hardware wraps silently: >0, the model is garbage
            }
        )
    return to_float(model), reports


def loss(U: np.ndarray, y: np.ndarray, model: np.ndarray, kind: str = "linear") -> float:
    """The host's loss on full-precision data: ``model`` is Q8.23 integers or float weights.

    linear: ½·mean((x·w − y)²); logistic: mean log(1 + e^(−t·x·w)); svm: mean max(0, 1 − t·x·w),
    with t = +1 for labels > 0.5 and −1 otherwise.
    """
    w = np.asarray(model)
    w = to_float(w) if np.issubdtype(w.dtype, np.integer) else w.astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    total = 0.0
    for start in range(0, len(y), LOSS_ROWS):
        z = dequantize(U[start : start + LOSS_ROWS]) @ w
        b = y[start : start + LOSS_ROWS]
        t = np.where(b > 0.5, 1.0, -1.0)
        if kind == "linear":
            total += 0.5 * float(np.sum((z - b) ** 2))
        elif kind == "logistic":
            total += float(np.sum(np.logaddexp(0.0, -t * z)))
        else:
            total += float(np.sum(np.maximum(0.0, 1.0 - t * z)))
    return total / max(len(y), 1)


def least_squares_loss(values: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """½·mean((X·w − y)²) on float values."""
    return float(0.5 * np.mean((np.asarray(values) @ w - y) ** 2))


def reference_sgd(
    values: np.ndarray, y: np.ndarray, job: Job, epochs: int | None = None
) -> np.ndarray:
    """Float mini-batch SGD on the same fixed-point data (least squares, sync, λ = 2^−j).

    Like the engine, a short last batch is still divided by B (its missing rows are padding).
    """
    values = np.asarray(values, dtype=np.float64)
    w = np.zeros(values.shape[1])
    scale = job.step / job.mini_batch
    for _ in range(job.epochs if epochs is None else epochs):
        for start in range(0, len(y), job.mini_batch):
            X, b = values[start : start + job.mini_batch], y[start : start + job.mini_batch]
            w = w - scale * ((X @ w - b) @ X)
    return w


def tolerance(job: Job, epochs: int | None = None) -> float:
    """A bound on max |w_engine − w_reference| for sync least squares at ``job.bits``.

    Per group update (8 samples) the engine differs from exact arithmetic by truncations only:
    a bit-serial product loses < 1 unit of 2^−27 per set bit (≤ s per product), the scale
    shift < 1 unit, so the 8-sample gradient sum < 8·(s + 1) units, and ``>> 4`` < 1 unit of
    2^−23; the dot-product and label errors (< (M·s + 8)·2^−27, times λ/B, 8 samples) add a
    term of the same kind.  Summed over all group updates and spread over the model's M
    coordinates (a 2-norm bound that assumes the float iteration is non-expansive,
    λ·‖Σ x xᵀ‖/B ≤ 2) that gives
    ``groups·epochs·√M·(8(s+1)·2^−27 + 2^−23 + 8·λ/B·(M·s + 8)·2^−27)``.  The truncation of
    the data (s < 32) is *not* covered: compare against float SGD on Q_s data.
    """
    s, m = job.bits, job.dimension
    unit = 2.0**-27
    per_group = 8 * (s + 1) * unit + 2.0**-FRAC + 8 * job.step / job.mini_batch * (m * s + 8) * unit
    rounds = job.groups * (job.epochs if epochs is None else epochs)
    return rounds * math.sqrt(m) * per_group


def _codes(U: np.ndarray, job: Job) -> np.ndarray:
    U = np.asarray(U)
    if U.ndim != 2 or U.shape[1] != job.dimension:
        raise LoomDataError(
            f"fpga-sim: U must be (samples, {job.dimension}); got shape {U.shape}",
            hint="pass the quantised codes of the job's columns",
        )
    if U.dtype != np.uint32:
        raise LoomDataError(
            f"fpga-sim: U must hold uint32 codes, got {U.dtype}",
            hint="quantise with u = floor(x̃·(2^32 − 1)) (loomdb.codecs.weave.quantize)",
        )
    return np.ascontiguousarray(U)
