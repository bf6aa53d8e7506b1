"""``loomdb bench sim``: the MLWeaving engine as simulated (MLWeaving §7.2), against this CPU.

For an MNIST-shaped (10,000 × 784) and an a9a-shaped (16,281 × 123) job — the real data when
the shared datasets folder is there, random data of that shape otherwise — and each precision
s ∈ {1, 2, 3, 4, 8, 16, 32}: the performance model's simulated epoch time, throughput (samples/s
and GB/s) and bound; the wall time of the bit-exact simulator itself (samples/s on one core);
and, measured in the same run on the same quantised values, one epoch of float64 numpy
mini-batch SGD (least squares, same B and λ) as the "cpu" baseline.  Ratios: cpu time over
simulated time (the simulated FPGA's speed-up) and simulator wall time over simulated time
(how much slower than the hardware the simulation runs).

Quantisation is done here (per-column min–max, u = floor(x̃·(2^32 − 1))), so the suite does not
depend on the storage layer.
"""

from __future__ import annotations

import time

import numpy as np

from loomdb.accel.fpga_sim import Engine, Job, simulate
from loomdb.accel.fpga_sim.fixed_point import dequantize
from loomdb.bench.table import BenchTable
from loomdb.codecs import weave

PRECISIONS = (1, 2, 3, 4, 8, 16, 32)
SHAPES = (("MNIST-shaped", 10_000, 784), ("a9a-shaped", 16_281, 123))
BATCH = 64
STEP_SHIFT = 10


def _data(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    rows = 2000 if quick else None
    folder = shared_datasets()
    if folder is not None:
        Xm, dm = load_mnist(folder, limit=rows)
        Xa, ya = load_a9a(folder)
        return [
            ("MNIST (t10k, digit < 5)", Xm, (dm < 5).astype(float)),
            ("a9a.t", Xa[:rows], (ya[:rows] > 0).astype(float)),
        ]
    rng = np.random.default_rng(0)
    out = []
    for name, n, m in SHAPES:
        X = rng.random((rows or n, m))
        out.append((f"{name} (random)", X, (X[:, 0] > 0.5).astype(float)))
    return out


def _cpu_epoch(values: np.ndarray, y: np.ndarray) -> float:
    w = np.zeros(values.shape[1])
    started = time.perf_counter()
    for i in range(0, len(y), BATCH):
        X, b = values[i : i + BATCH], y[i : i + BATCH]
        w -= 2.0**-STEP_SHIFT / BATCH * ((X @ w - b) @ X)
    return time.perf_counter() - started


def run(quick: bool = False) -> list[BenchTable]:
    table = BenchTable(
        f"sim: one epoch of least squares, B = {BATCH}, λ = 2^-{STEP_SHIFT}, sync, chaining "
        "(simulated MLWeaving vs float SGD on this CPU)",
        [
            "data",
            "N × M",
            "s",
            "sim ms",
            "sim samples/s",
            "sim GB/s",
            "bound",
            "simulator samples/s",
            "simulator / sim time",
            "cpu ms",
            "cpu / sim time",
        ],
        notes=[
            "sim: the performance model (400 MHz, 512 bits/cycle, 15 GB/s, L = 32 cycles)",
            "simulator: wall clock of the bit-exact numba simulator, one core, after compiling",
            "cpu: float64 numpy mini-batch SGD on the same quantised values, one epoch, best of 3 "
            "(numpy/BLAS threading as configured)",
            "cpu / sim time > 1: the simulated FPGA epoch is that many times faster",
        ],
    )
    for name, X, y in _data(quick):
        X = np.asarray(X, dtype=np.float64)
        U = weave.quantize(X, *weave.column_ranges(X))
        n, m = U.shape
        values = dequantize(U)
        cpu = min(_cpu_epoch(values, y) for _ in range(3))
        for s in PRECISIONS:
            job = Job(samples=n, dimension=m, bits=s, mini_batch=BATCH, step_shift=STEP_SHIFT)
            report = simulate(job)
            engine = Engine(job)
            zero = np.zeros(m, dtype=np.int32)
            engine.run_epoch(U[:BATCH], y[:BATCH], zero)  # compile (or load the cache)
            started = time.perf_counter()
            engine.run_epoch(U, y, zero)
            wall = time.perf_counter() - started
            sim = report["seconds_per_epoch"]
            table.add(
                name,
                f"{n} × {m}",
                s,
                sim * 1000,
                report["samples_per_second"],
                report["gb_per_second"],
                report["bound"],
                n / wall,
                wall / sim,
                cpu * 1000,
                cpu / sim,
            )
    return [table]
