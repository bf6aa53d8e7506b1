"""The ``fpga-sim`` backend: trains on an mlweaving index the way the MLWeaving engine would.

The hardware owns the epoch loop, so this backend implements ``fit`` (the trainer's
whole-epoch entry point) instead of per-batch products.  Each stored block is one mini-batch:
its s planes are unwoven to truncated codes and run through the bit-exact engine; per epoch
the performance model adds simulated cycles, bytes and seconds, and the full report is kept in
``last_report`` (stored with the model, shown by ``loom_model_info``).

Like the paper's engine it trains without an intercept, with λ = 2^−j (the ``lr`` option is
rounded to the nearest power of two); least squares is the paper's loss, logistic and hinge are
loomdb's extensions of the engine's serial part.  Class labels become 0/1 targets first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from loomdb.accel.fpga_sim.engine import Engine, to_float
from loomdb.accel.fpga_sim.job import Job
from loomdb.accel.fpga_sim.perf import simulate
from loomdb.batch import Batch
from loomdb.errors import LoomOptionError
from loomdb.learn.losses import LOSSES
from loomdb.learn.model import LinearModel


class FpgaSimBackend:
    name = "fpga-sim"
    description = "bit-exact, cycle-level model of the MLWeaving FPGA SGD engine"

    def __init__(self) -> None:
        self.last_report: dict[str, Any] | None = None

    def available(self) -> tuple[bool, str]:
        return True, ""

    def supports(self, fmt: str) -> bool:
        return fmt == "mlweaving"

    def margins(self, batch: Batch, W: np.ndarray) -> np.ndarray:  # inference: host side
        return np.asarray(batch.X @ W).reshape(batch.rows, -1)

    def gradient(self, batch: Batch, R: np.ndarray) -> np.ndarray:
        raise LoomOptionError("fpga-sim runs whole epochs: it has no per-batch gradient")

    def fit(self, source: Any, problem: Any, config: Any, progress: Callable | None):
        if problem.k != 1:
            raise LoomOptionError(
                "fpga-sim trains one model at a time: binary classes or a regression",
                hint="binarise the label (one-vs-rest) or use the cpu backend",
            )
        shift = max(0, min(30, round(-math.log2(config.lr))))
        m = len(problem.features)
        model = np.zeros(m, dtype=np.int64)
        if problem.init is not None:
            model = np.floor(problem.init.W[:, 0] * 2.0**23).astype(np.int64)
        history: list[dict[str, Any]] = []
        reports = []
        job: Job | None = None
        for epoch in range(config.epochs):
            started = time.perf_counter()
            rows, nbytes, loss, precision = 0, 0, 0.0, 32
            for batch in source.train_batches(epoch, history):
                precision = int(batch.meta.get("precision", 32))
                job = Job(
                    samples=batch.rows,
                    dimension=m,
                    bits=precision,
                    mini_batch=_power_of_two(batch.rows),
                    step_shift=shift,
                    loss=config.kind,
                )
                U = batch.X.quantized()
                target = problem.targets(batch.y)[0][:, 0]  # classes → 0/1; values as they are
                model = Engine(job).run_epoch(U, target, model)
                w = to_float(model)
                Z = (batch.X @ w)[:, None]
                loss += float(LOSSES[config.kind].value(Z, target[:, None]).sum())
                rows += batch.rows
                nbytes += batch.nbytes
            seconds = time.perf_counter() - started
            if job is None:
                break
            sim = simulate(
                Job(
                    samples=rows,
                    dimension=m,
                    bits=precision,
                    mini_batch=job.mini_batch,
                    step_shift=shift,
                )
            )
            reports.append(sim)
            entry = {
                "epoch": epoch + 1,
                "loss": loss / max(rows, 1),
                "rows": rows,
                "seconds": round(seconds, 6),
                "rows_per_s": rows / seconds if seconds else None,
                "lr": 2.0**-shift,
                "bytes_read": nbytes,
                "precision": precision,
                "simulated_seconds": sim["seconds_per_epoch"],
                "simulated_cycles": sim["cycles_per_epoch"],
            }
            history.append(entry)
            if progress is not None:
                progress({**entry, "epochs": config.epochs})
        self.last_report = {"engine": "MLWeaving (simulated)", "epochs": reports}
        W = to_float(model).reshape(m, 1)
        return LinearModel(
            config.kind, problem.features, W, np.zeros(1), problem.scaling, problem.classes
        ), history


def _power_of_two(rows: int) -> int:
    return max(8, 1 << (max(rows, 1) - 1).bit_length())
