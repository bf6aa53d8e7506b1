"""``loomdb bench sim``: the MLWeaving engine as simulated, against this machine's CPU.

For MNIST-shaped and a9a-shaped jobs (the real data when ../shared/datasets is there) and each
precision s: the simulated epoch time, throughput and bound from the performance model; the
wall time of the bit-exact simulator itself (samples/s); and the measured time of one float
minibatch-SGD epoch on the CPU over the same quantised data, with the simulated speed-up.
"""

from __future__ import annotations

import time

import numpy as np

from loomdb.accel.fpga_sim import Engine, Job, simulate
from loomdb.bench.table import BenchTable
from loomdb.codecs import weave

PRECISIONS = (1, 2, 3, 4, 8, 16, 32)


def _data(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    folder = shared_datasets()
    rows = 2000 if quick else None
    if folder is None:
        rng = np.random.default_rng(0)
        out = []
        for name, (n, m) in (("MNIST-shaped", (10_000, 784)), ("a9a-shaped", (16_281, 123))):
            X = rng.random((rows or n, m))
            out.append((name, X, (X[:, 0] > 0.5).astype(float)))
        return out
    Xm, dm = load_mnist(folder, limit=rows)
    Xa, ya = load_a9a(folder)
    return [
        ("MNIST-10k", Xm, (dm < 5).astype(float)),
        ("a9a.t", Xa[:rows], (ya[:rows] > 0).astype(float)),
    ]


def _cpu_epoch(values: np.ndarray, y: np.ndarray, batch: int) -> float:
    w = np.zeros(values.shape[1])
    started = time.perf_counter()
    for i in range(0, len(y), batch):
        X, b = values[i : i + batch], y[i : i + batch]
        w -= 2.0**-10 / batch * ((X @ w - b) @ X)
    return time.perf_counter() - started


def run(quick: bool = False) -> list[BenchTable]:
    table = BenchTable(
        "sim: one epoch of least squares, B = 64, λ = 2^-10 (simulated MLWeaving vs this CPU)",
        [
            "data",
            "s",
            "sim ms",
            "sim samples/s",
            "bound",
            "simulator samples/s",
            "cpu ms (float SGD)",
            "sim speed-up vs cpu",
        ],
        notes=[
            "sim: the performance model at 400 MHz, 512 bits/cycle, 15 GB/s",
            "simulator samples/s: wall-clock speed of the bit-exact simulator itself",
            "cpu: numpy minibatch SGD on the same quantised values, one core",
        ],
    )
    for name, X, y in _data(quick):
        U = weave.quantize(X, *weave.column_ranges(X))
        values = weave.dequantize(U)
        cpu = min(_cpu_epoch(values, y, 64) for _ in range(3))
        for s in PRECISIONS:
            job = Job(samples=len(y), dimension=X.shape[1], bits=s, mini_batch=64)
            report = simulate(job)
            Us = weave.truncate(U, s)
            engine = Engine(job)
            engine.run_epoch(Us[:64], y[:64], np.zeros(X.shape[1], dtype=np.int64))  # compile
            started = time.perf_counter()
            engine.run_epoch(Us, y, np.zeros(X.shape[1], dtype=np.int64))
            wall = time.perf_counter() - started
            sim = report["seconds_per_epoch"]
            table.add(
                name,
                s,
                sim * 1000,
                report["samples_per_second"],
                report["bound"],
                len(y) / wall,
                cpu * 1000,
                cpu / sim,
            )
    return [table]
