"""The ``fpga-sim`` backend: trains on an mlweaving index the way the MLWeaving engine would.

The hardware owns the epoch, so this backend implements ``run_epoch`` (the trainer's loop still
keeps the history, validation, ``tol`` and the divergence guard).  Each stored block is one
mini-batch: its s planes are unwoven to truncated codes and run through the bit-exact engine;
per epoch the performance model adds simulated cycles, bytes and seconds, kept in the report
stored with the model (``loom_model_info``).

Like the paper's engine it has no intercept, no regulariser and no per-sample weights; the step
is λ = 2^−j, the largest power of two not above ``lr``.  loomdb honours ``fit_intercept`` by a
constant feature the host appends to every sample, code 0x80000000 (exactly ½ at every
precision): its weight is twice the intercept.  What the engine cannot do is refused by
``check``, never dropped: l1/l2 > 0, class weights, adam, a standardisation other than the
index's min–max (the engine computes on the stored codes), more than two classes; by
``check_index``, an index whose batch_size is not a power of two ≥ 8 (rounding it up would
average each block over rows it does not hold).  A weight beyond Q8.23's ±256 (an intercept
beyond ±128, its weight being twice it) wraps the engine's registers: the epoch reports it and
the train is refused rather than storing what wrapped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from loomdb.accel.fpga_sim.engine import Engine
from loomdb.accel.fpga_sim.fixed_point import model_to_fixed, to_float
from loomdb.accel.fpga_sim.job import MAX_DIMENSION, Job, check_batch_size
from loomdb.accel.fpga_sim.perf import simulate
from loomdb.errors import LoomDataError, LoomOptionError
from loomdb.learn.losses import LOSSES
from loomdb.seams import Batch, EpochStep, IndexInfo

HALF = np.uint32(1 << 31)  # the intercept feature's code: ½ at every precision
REFUSED = {
    "l1": (0.0, "the engine has no regulariser"),
    "l2": (0.0, "the engine has no regulariser"),
    "class_weight": ("none", "the engine has no per-sample weights"),
    "optimizer": ("sgd", "the engine runs plain SGD"),
    "standardize": ("minmax", "the engine computes on the index's min–max codes"),
}


def step_shift(lr: float) -> int:
    """j of the largest λ = 2^−j not above ``lr`` (0 ≤ j ≤ 30)."""
    return max(0, min(30, math.ceil(-math.log2(lr))))


def mini_batch(step: EpochStep, rows: int) -> int:
    """The job's B: the layout's batch size (check_index made it a power of two ≥ 8), not the
    block's rows.  The engine averages by a fixed shift of log2 B (MLWeaving §5, B in the job
    descriptor), so a short last block is divided by B, its missing rows padding, as
    ``engine.reference_sgd`` does; dividing it by its own rows took a step up to B/8 times
    too long.  Without a known batch size, the smallest B that holds the block."""
    return step.batch_size or max(8, 1 << (rows - 1).bit_length())


def overflowed(step: EpochStep, largest: float) -> LoomDataError:
    """The engine's Q8.23 model (±256) wrapped: what trained is not a model, so refuse."""
    why = (
        "; the intercept rides on a constant feature of ½, so its weight is twice the "
        "intercept and an intercept beyond ±128 cannot be held"
        if step.fit_intercept
        else ""
    )
    return LoomDataError(
        f"fpga-sim: the engine's Q8.23 model (±256) overflowed while training (largest "
        f"|target| {largest:g}){why}",
        hint="center the label (subtract its mean) or scale it down, lower lr, or train "
        "with the cpu backend (float64)",
    )


class FpgaSimBackend:
    name = "fpga-sim"
    description = "bit-exact, cycle-level model of the MLWeaving FPGA SGD engine"
    defaults = {name: value for name, (value, _) in REFUSED.items()}

    def available(self) -> tuple[bool, str]:
        return True, ""

    def step_size(self, lr: float) -> float:
        """The step the engine takes for ``lr``: the largest power of two not above it."""
        return 2.0 ** -step_shift(lr)

    def supports(self, fmt: str) -> bool:
        return fmt == "mlweaving"

    def check(self, options: dict[str, Any], k: int) -> None:
        for name, (allowed, why) in REFUSED.items():
            if options.get(name, allowed) != allowed:
                raise LoomOptionError(
                    f"backend 'fpga-sim' cannot honour {name} = {options[name]!r}: {why}",
                    hint=f"leave '{name}' out (it is {allowed!r} on fpga-sim), or use cpu",
                )
        if k != 1:
            raise LoomOptionError(
                "fpga-sim trains one model at a time: binary classes or a regression",
                hint="binarise the label (one-vs-rest) or use the cpu backend",
            )

    def check_index(self, info: IndexInfo) -> None:
        """Each stored block is one of the engine's mini-batches: its size must be one."""
        where = f"index '{info.name}'" if info.name else "the layout"
        check_batch_size(int(info.options.get("batch_size") or 256), where)

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray:  # inference: host side
        return np.asarray(batch.X @ W).reshape(batch.rows, -1)

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray:
        raise LoomOptionError("fpga-sim runs whole epochs: it has no per-batch gradient")

    def run_epoch(
        self, batches: Iterable[Batch], W: np.ndarray, b: np.ndarray, step: EpochStep
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        m = W.shape[0]
        extra = 1 if step.fit_intercept else 0
        if m + extra > MAX_DIMENSION:
            raise LoomOptionError(f"fpga-sim holds at most {MAX_DIMENSION} weights; got {m}")
        weights = np.concatenate([W[:, 0], 2.0 * b[:1]] if extra else [W[:, 0]])
        model = model_to_fixed(weights).astype(np.int64)
        shift = step_shift(step.lr)
        loss, rows, nbytes, job = 0.0, 0, 0, None
        for batch in batches:
            U = batch.X.quantized()
            if extra:
                U = np.hstack([U, np.full((batch.rows, 1), HALF, dtype=np.uint32)])
            job = Job(
                samples=batch.rows,
                dimension=m + extra,
                bits=batch.X.s,
                mini_batch=mini_batch(step, batch.rows),
                step_shift=shift,
                loss=step.kind,
            )
            target = step.targets(batch.y)[0][:, 0]  # classes → 0/1; values as they are
            engine = Engine(job)
            model = engine.run_epoch(U, target, model)
            if engine.wraps:
                raise overflowed(step, float(np.max(np.abs(target), initial=0.0)))
            w = to_float(model)
            Z = batch.X @ w[:m] + (0.5 * w[m] if extra else 0.0)
            loss += float(LOSSES[step.kind].value(Z[:, None], target[:, None]).sum())
            rows, nbytes = rows + batch.rows, nbytes + batch.nbytes
        w = to_float(model)
        W_out, b_out = w[:m].reshape(m, 1), np.array([0.5 * w[m] if extra else 0.0])
        totals: dict[str, Any] = {"loss": loss, "rows": rows, "bytes": nbytes, "lr": 2.0**-shift}
        if job is not None:
            sim = simulate(
                Job(
                    samples=rows,
                    dimension=m + extra,
                    bits=job.bits,
                    mini_batch=job.mini_batch,
                    step_shift=shift,
                )
            )
            totals["simulated_seconds"] = sim["seconds_per_epoch"]
            totals["simulated_cycles"] = sim["cycles_per_epoch"]
        return W_out, b_out, totals
