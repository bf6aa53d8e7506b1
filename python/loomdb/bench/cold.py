"""``loomdb bench cold``: cold epochs per storage format, where their time goes, and TOC's
products against scipy's CSR.  No paper section (TOC §6 measures the same three things).

* **cold epochs**: census-like data (``bench.census``, 1M × 40; ``--quick`` 100K) laid out as
  ``dense``, ``toc`` and ``toc`` + zstd in 250-row batches (the paper's), trained with
  ``"cache_mb": 0`` so that every epoch reads, checks and decodes every stored batch.  Wall
  time is the median epoch of the model's history; CPU time is the process's (DuckDB: this
  process, its threads included; PostgreSQL: the server backend's, read from ``/proc`` when the
  server runs on this machine) for an N-epoch train minus a 1-epoch one, over N − 1.  On a busy
  machine wall time follows the load; CPU time much less.
* **stages** (DuckDB, in this process): per batch, the CPU of reading and checking the stored
  rows, decoding them, the two products an SGD step takes (A·w, rᵀ·A) and the rest of the
  step (the trainer's numpy), which is the epoch's CPU minus the others.
* **products**: A·v and v·A (Aᵀ·u) per 250-row batch, TOC's compressed-domain passes against
  scipy's CSR on the same batches in the same run (MNIST's test set, or MNIST-like random
  digits without it; census-like), best of several rounds over up to 40 batches.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from loomdb.bench.census import census_like
from loomdb.bench.engines import BenchEngine, engines
from loomdb.bench.table import BenchTable

BATCH = 250
LAYOUTS = [
    ("dense", {"format": "dense"}),
    ("toc", {"format": "toc"}),
    ("toc+zstd", {"format": "toc", "entropy": "zstd"}),
]


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    X, y = census_like(100_000 if quick else 1_000_000)
    epochs = 2 if quick else 4
    return [cold_epochs(X, y, dsn, epochs), stages(X, y), products(quick, X)]


def _train(engine: BenchEngine, index: str, epochs: int) -> list[float]:
    opts = {"index": index, "epochs": epochs, "tol": 0, "cache_mb": 0, "replace": True}
    opts.update(model="logistic", progress=False)
    engine.scalar(f"SELECT {engine.loom}loom_train('bench_cold', NULL, 'y', '{json.dumps(opts)}')")
    history = engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_cold'")
    history = json.loads(history) if isinstance(history, str) else history
    return [h["seconds"] for h in history if "epoch" in h]


def _cpu_clock(engine: BenchEngine) -> Callable[[], float] | None:
    """CPU seconds of whoever runs the engine's statements, or None when it cannot be read."""
    if engine.name == "duckdb":
        return time.process_time
    pid = int(engine.scalar("SELECT pg_backend_pid()"))
    stat = f"/proc/{pid}/stat"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"postgres" not in f.read():
                return None
    except OSError:  # the server runs elsewhere
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def clock() -> float:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    return clock


def _measure(engine: BenchEngine, epochs: int) -> tuple[float, float]:
    """(median wall ms of a cold epoch, CPU ms of one)."""
    clock = _cpu_clock(engine)
    _train(engine, "bench_ix", 1)  # a session's first train loads numba's kernels: not an epoch
    spent = []
    for n in (1, epochs):
        started = clock() if clock else 0.0
        seconds = _train(engine, "bench_ix", n)
        spent.append(clock() - started if clock else float("nan"))
    return float(np.median(seconds)) * 1000, (spent[1] - spent[0]) / (epochs - 1) * 1000


def cold_epochs(X: np.ndarray, y: np.ndarray, dsn: str | None, epochs: int) -> BenchTable:
    table = BenchTable(
        f"cold epochs on census-like data ({len(X):,} × {X.shape[1]}, logistic, {BATCH}-row "
        f'batches, "cache_mb": 0, {epochs} epochs)',
        ["engine", "format", "stored bytes", "ratio vs dense", "epoch ms", "vs dense"]
        + ["epoch CPU ms", "CPU vs dense"],
        notes=[
            "epoch ms: median wall time of an epoch; epoch CPU ms: (CPU of a train of "
            f"{epochs} epochs − CPU of a train of 1) / {epochs - 1}, both after a first train "
            "(which loads numba's kernels)",
            "vs dense: dense's time / this format's; above 1 this format is faster",
            "payloads are stored as the format wrote them (neither engine compresses them "
            "again: store/storage.py); this DuckDB database is in memory",
        ],
    )
    with engines(dsn) as found:
        for engine in found:
            engine.load("bench_cold_src", X, y)
            base: dict[str, float] = {}
            for label, layout in LAYOUTS:
                opts = json.dumps({**layout, "batch_size": BATCH})
                info = json.loads(
                    engine.scalar(
                        f"SELECT {engine.loom}loom_create_index('bench_ix', "
                        f"'bench_cold_src', 'y', '{opts}')"
                    )
                )
                wall, cpu = _measure(engine, epochs)
                for key, value in (("bytes", info["bytes"]), ("wall", wall), ("cpu", cpu)):
                    base.setdefault(key, value)
                row = [engine.name, label, info["bytes"], base["bytes"] / info["bytes"]]
                table.add(*row, wall, base["wall"] / wall, cpu, base["cpu"] / cpu)
                engine.run(f"SELECT {engine.loom}loom_drop_index('bench_ix')")
            engine.run(f"SELECT {engine.loom}loom_drop_model('bench_cold')")
            engine.run("DROP TABLE bench_cold_src")
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return table


def _cpu_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """The least CPU seconds of ``repeat`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def stages(X: np.ndarray, y: np.ndarray, epochs: int = 3) -> BenchTable:
    """Per-batch CPU of each stage of a cold epoch on DuckDB, measured in this process."""
    import loomdb
    from loomdb.bench.tables import load_duckdb

    table = BenchTable(
        f"where a cold epoch's CPU goes, µs per {BATCH}-row batch (DuckDB, this process)",
        ["format", "read + check", "decode", "A·w + rᵀ·A", "rest of the step", "epoch"],
        notes=[
            "read + check: the storage query and each row's CRC; decode: the batch object "
            "(dense: a view; toc: sections read, decode tree rebuilt and pruned); the "
            "products with a one-column model, as an SGD step takes them; rest of the step: "
            "the epoch's CPU minus the others (loss, gradient assembly, optimiser, Python)",
        ],
    )
    con = loomdb.connect(progress=False)
    try:
        load_duckdb(con.duckdb, "bench_stage_src", X, y)
        for label, fmt in LAYOUTS[:2]:
            table.add(label, *_stage_row(con, fmt, X.shape[1], epochs))
        con.execute("SELECT loom_drop_model('bench_stage_m')").fetchall()
    finally:
        con.close()
    return table


def _stage_row(con: Any, fmt: dict[str, Any], m: int, epochs: int) -> list[float]:
    from loomdb.accel.cpu import CpuBackend
    from loomdb.engines.duckdb.database import DuckDatabase
    from loomdb.store import layout

    opts = json.dumps({**fmt, "batch_size": BATCH})
    con.execute(f"SELECT loom_create_index('bench_stage', 'bench_stage_src', 'y', '{opts}')")
    laid = layout.open_index(DuckDatabase(con.duckdb.cursor(), con.state), "bench_stage")
    n, backend, W = laid.info.batches, CpuBackend(), np.zeros((m, 1))

    def read() -> None:
        for _ in laid.read_stored(0, n, 1):
            pass

    def decode() -> None:
        for _ in laid.batches(0, n, 32):
            pass

    def products() -> None:
        for batch in laid.batches(0, n, 32):
            backend.gradient(batch, backend.margins(batch, W))

    def train(k: int) -> Callable[[], object]:
        opts = {"index": "bench_stage", "epochs": k, "tol": 0, "cache_mb": 0, "replace": True}
        sql = f"SELECT loom_train('bench_stage_m', NULL, 'y', '{json.dumps(opts)}')"
        return lambda: con.execute(sql).fetchall()

    train(1)()  # a process's first train loads numba's kernels: not part of an epoch
    spent = [_cpu_of(f) for f in (read, decode, products, train(1), train(epochs))]
    con.execute("SELECT loom_drop_index('bench_stage')").fetchall()
    epoch = 1e6 * (spent[4] - spent[3]) / (epochs - 1) / n
    per = [1e6 * t / n for t in (spent[0], spent[1] - spent[0], spent[2] - spent[1])]
    return [*per, epoch - sum(per), epoch]


def _mnist_like(rows: int) -> tuple[str, np.ndarray]:
    from loomdb.datasets import load_mnist, shared_datasets

    folder = shared_datasets()
    if folder is not None:
        return "MNIST", load_mnist(folder, limit=rows)[0]
    rng = np.random.default_rng(0)  # strokes: ~19% of 28×28 pixels lit, 0–255
    X = np.where(rng.random((rows, 784)) < 0.19, rng.integers(1, 256, (rows, 784)), 0)
    return "MNIST-like (random)", X.astype(np.float64)


def _per_batch(fn: Callable[[Any], object], items: list[Any], rounds: int = 7) -> float:
    """µs per item: the best of ``rounds`` passes over ``items``."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - started)
    return best / len(items) * 1e6


def products(quick: bool, census: np.ndarray) -> BenchTable:
    table = BenchTable(
        f"TOC's products vs scipy CSR, µs per {BATCH}-row batch (same batches, same run)",
        ["data", "batches", "read toc", "A·v toc", "A·v csr", "A·v vs csr"]
        + ["v·A toc", "v·A csr", "v·A vs csr"],
        notes=[
            "vs csr: CSR's time / TOC's; above 1 TOC is faster.  read toc: TocMatrix.from_bytes "
            "(sections, decode tree, pruning); CSR is built once, outside the timing",
            "v·A is Aᵀ·u (the gradient's product); scipy computes it as A.T @ u",
        ],
    )
    count = 8 if quick else 40
    name, mnist = _mnist_like(count * BATCH)
    rng = np.random.default_rng(1)
    for label, X in ((name, mnist), ("census-like", census[: count * BATCH])):
        table.add(label, *_product_row(X, rng))
    return table


def _product_row(X: np.ndarray, rng: np.random.Generator) -> list[float]:
    import scipy.sparse as sp

    from loomdb.codecs import toc

    batches = [X[i : i + BATCH] for i in range(0, len(X), BATCH)]
    blobs = [toc.encode(b) for b in batches]
    tocs = [toc.TocMatrix.from_bytes(b) for b in blobs]
    csrs = [sp.csr_matrix(b) for b in batches]
    v, u = rng.normal(size=X.shape[1]), rng.normal(size=BATCH)
    read = _per_batch(toc.TocMatrix.from_bytes, blobs)
    av = [_per_batch(lambda m: m @ v, tocs), _per_batch(lambda c: c @ v, csrs)]
    ua = [_per_batch(lambda m: u @ m, tocs), _per_batch(lambda c: c.T @ u, csrs)]
    return [len(batches), read, *av, av[1] / av[0], *ua, ua[1] / ua[0]]
