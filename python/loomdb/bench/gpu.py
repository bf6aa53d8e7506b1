"""``loomdb bench gpu``: the gpu backend's epochs against the cpu backend's, in the same run.

The shapes the gpu backend was first measured on (logistic, 3 epochs): 20,000 × 4,096 in
minibatches of 1,024; 10,000 × 784 in 256s; 100,000 × 1,024 in 8,192s — each as dense, TOC and
MLWeaving (read at 4 bits) minibatches, laid out once and kept between epochs as the epoch cache
keeps them (``cache_mb`` large enough).  The values are whole numbers of a normal distribution,
so TOC compresses them.  Both backends run the same steps (nesterov, the default optimiser), so
their losses agree to rounding: the table shows the largest relative gap, next to the times.
Epoch 1 includes the gpu's uploads and decodes; warm is the median of the later epochs.  A
second table trains through SQL on a DuckDB index larger than ``cache_mb`` (``STREAMED``), where
the cpu backend reads every epoch from the database and the gpu backend keeps the epoch on its
device after the first (``store/epochs``): epoch times and the bytes a warm epoch read.  Where
CuPy or a GPU is missing the suite says so and measures nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.accel.cpu import CpuBackend
from loomdb.bench.table import BenchTable
from loomdb.codecs import weave
from loomdb.codecs.toc import TocMatrix, encode
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch

SHAPES = ((20_000, 4_096, 1_024), (10_000, 784, 256), (100_000, 1_024, 8_192))
FORMATS = ("dense", "toc", "mlweaving")
EPOCHS, BITS = 3, 4
STREAMED = (1_000_000, 256, 1_024)  # rows, features, batch: 2 GB of float64 rows
CACHE_MB = 64  # of the host's epoch cache: far less than the index


class KeptMinibatches:
    """Minibatches made once and handed to every epoch (the epoch cache's way)."""

    def __init__(self, batches: list[Batch]):
        self.batches = batches

    @classmethod
    def laid_out(
        cls, X: np.ndarray, y: np.ndarray, size: int, fmt: str, bits: int = BITS
    ) -> KeptMinibatches:
        """``X`` and ``y`` in minibatches of ``size`` rows stored as ``fmt``: dense, toc, or
        mlweaving read at ``bits`` (quantised over the whole of ``X``)."""
        ranges = weave.column_ranges(X)
        batches = []
        for n, i in enumerate(range(0, len(y), size)):
            part = X[i : i + size]
            payload: Any
            if fmt == "toc":
                payload = TocMatrix.from_bytes(encode(part))
            elif fmt == "mlweaving":
                planes = weave.weave_block(weave.quantize(part, *ranges))
                payload = weave.WovenMatrix(planes, part.shape[0], part.shape[1], bits)
            else:
                payload = part
            batches.append(Batch(payload, y[i : i + size], number=n, nbytes=payload.nbytes))
        return cls(batches)

    def train_batches(self, epoch: int, precision: int, choose: Any = None) -> Iterator[Batch]:
        return iter(self.batches)

    def validation_batches(self, precision: int) -> tuple[Batch, ...]:
        return ()


def _problem(X: np.ndarray) -> Problem:
    stats = {"min": X.min(0), "max": X.max(0), "mean": X.mean(0), "std": X.std(0)}
    return Problem(
        [f"x{i}" for i in range(X.shape[1])], Scaling.from_stats("zscore", stats), [0.0, 1.0]
    )


def _epochs(source: KeptMinibatches, task: Problem, backend) -> tuple[list[float], list[float]]:
    _, history = fit(source, task, TrainConfig(kind="logistic", epochs=EPOCHS, lr=0.01), backend)
    return [e["seconds"] for e in history], [e["loss"] for e in history]


def run(quick: bool = False) -> list[BenchTable]:
    table = BenchTable(
        f"gpu: logistic, {EPOCHS} epochs, kept minibatches (gpu backend vs cpu backend)",
        [
            "rows × features",
            "batch",
            "format",
            "cpu epoch 1 s",
            "cpu warm s",
            "gpu epoch 1 s",
            "gpu warm s",
            "warm speed-up",
            "loss gap",
        ],  # fmt: skip
        notes=[
            "epoch 1: the gpu uploads (compressed where the format is) and decodes each minibatch "
            "once; warm: the median of the later epochs, read from the device cache",
            "CuPy's kernels for each shape are compiled before the timed trains (CuPy keeps them "
            "on disk, so only a machine's first train of a shape pays that)",
            "loss gap: the largest relative difference of an epoch's loss, cpu against gpu",
            f"mlweaving read at {BITS} bits",
        ],
    )
    try:
        gpu = registry.get("gpu")
    except Exception as e:  # no CuPy or no device: say so, measure nothing
        table.notes.append(f"not measured: {getattr(e, 'message', e)}")  # not the hint
        return [table]
    rng = np.random.default_rng(0)
    tiny = np.round(rng.normal(size=(64, 8)))
    for fmt in FORMATS:  # compile and warm both backends' kernels
        source = KeptMinibatches.laid_out(tiny, (tiny[:, 0] > 0) * 1.0, 32, fmt)
        _epochs(source, _problem(tiny), CpuBackend())
        _epochs(source, _problem(tiny), gpu)
    for rows, cols, size in SHAPES:
        rows = rows // 10 if quick else rows
        X = np.round(rng.normal(1.0, 2.0, size=(rows, cols)))
        y = ((X @ rng.normal(size=cols)) > 0) * 1.0
        task = _problem(X)
        # CuPy compiles a reduction for each new size once per machine (and keeps it on disk):
        # compile this shape's before timing, on two minibatches of their own
        _epochs(KeptMinibatches.laid_out(X[: 2 * size], y[: 2 * size], size, "dense"), task, gpu)
        for fmt in FORMATS:
            source = KeptMinibatches.laid_out(X, y, size, fmt)
            cpu_s, cpu_loss = _epochs(source, task, CpuBackend())
            gpu_s, gpu_loss = _epochs(source, task, gpu)
            gap = max(abs(a - b) / abs(a) for a, b in zip(cpu_loss, gpu_loss))
            cpu_warm, gpu_warm = statistics.median(cpu_s[1:]), statistics.median(gpu_s[1:])
            table.add(f"{rows:,} × {cols:,}", size, fmt, cpu_s[0], cpu_warm, gpu_s[0], gpu_warm,
                      cpu_warm / gpu_warm, gap)  # fmt: skip
    return [table, streamed(rng, quick)]


def streamed(rng: np.random.Generator, quick: bool) -> BenchTable:
    """``STREAMED`` rows in a DuckDB index per format, trained through SQL by both backends
    with ``"cache_mb": CACHE_MB``."""
    import json

    import loomdb
    from loomdb.bench.tables import load_duckdb

    rows, cols, size = STREAMED
    rows = rows // 50 if quick else rows
    table = BenchTable(
        f"gpu: {rows:,} × {cols} rows of a DuckDB index, minibatches of {size:,}, "
        f'"cache_mb": {CACHE_MB}, logistic, {EPOCHS} epochs',
        [
            "format",
            "index MB",
            "backend",
            "epoch 1 s",
            "warm s",
            "warm MB read",
            "speed-up",
            "loss gap",
        ],  # fmt: skip
        notes=[
            "warm: the median of the later epochs; warm MB read: what one of them read from the "
            "database; speed-up: the cpu backend's warm epoch over this one",
            "the gpu backend keeps an epoch that cache_mb cannot hold on its device after the "
            "first (the cpu backend reads it every epoch)",
        ],
    )
    X = np.round(rng.normal(1.0, 2.0, size=(rows, cols)))
    y = ((X @ rng.normal(size=cols)) > 0) * 1.0
    con = loomdb.connect(progress=False)
    try:
        load_duckdb(con.duckdb, "bench_gpu", X, y)
        del X
        for fmt in ("dense", "toc"):
            index = json.dumps({"format": fmt, "batch_size": size})
            con.execute(f"SELECT loom_create_index('bench_gpu_{fmt}', 'bench_gpu', 'y', '{index}')")
            [(stored,)] = con.execute(
                f"SELECT bytes FROM loom.indexes WHERE name = 'bench_gpu_{fmt}'"
            ).fetchall()
            runs = {}
            for backend in ("cpu", "gpu"):
                options = json.dumps({"index": f"bench_gpu_{fmt}", "backend": backend,
                                      "epochs": EPOCHS, "tol": 0, "lr": 0.01,
                                      "cache_mb": CACHE_MB, "replace": True})  # fmt: skip
                con.execute(f"SELECT loom_train('bench_gpu_m', NULL, 'y', '{options}')")
                [(history,)] = con.execute(
                    "SELECT history FROM loom.models WHERE name = 'bench_gpu_m'"
                ).fetchall()
                runs[backend] = [e for e in json.loads(history) if "epoch" in e]
            losses = [[e["loss"] for e in h] for h in runs.values()]
            gap = max(abs(a - b) / abs(a) for a, b in zip(*losses))
            warm = {b: statistics.median(e["seconds"] for e in h[1:]) for b, h in runs.items()}
            for backend, h in runs.items():
                read = statistics.median(e["bytes_read"] for e in h[1:]) / 2**20
                table.add(fmt, stored / 2**20, backend, h[0]["seconds"], warm[backend], read,
                          warm["cpu"] / warm[backend], gap)  # fmt: skip
    finally:
        con.close()
    return table
