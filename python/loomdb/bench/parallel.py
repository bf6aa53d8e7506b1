"""``loomdb bench parallel``: epoch time and loss of ``{"parallel": n}`` against the serial
train (n = 1), on both engines and the dense and toc formats.  No paper section (it measures
Bismarck's parallel epochs, ``learn/averaging``).

Per engine, data set and format: one index; then the same model trained on it with 1, 2 and
(where this machine has more cores) n shards — ``tol`` 0, a fixed number of epochs, so every
count runs the same epochs.  From each model's history: the median epoch time (epochs 2 on:
epoch 1 of a serial train reads and decodes the index, later ones reuse the decoded batches;
PostgreSQL's parallel workers, which run the epochs its backend cannot keep, read the index
every epoch), how many processes or threads ran shards, and the loss after those epochs.
``speed-up`` is the serial epoch time over this one.
A second table trains the small real sets to convergence (the default ``tol``) and compares
the final loss with the serial train's: averaging changes the algorithm, and the target is a
loss within 1%.  ``parallel_table`` is reusable by another suite (a scale suite's
"parallel speed-up" line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine, engines
from loomdb.bench.table import BenchTable

Data = tuple[str, np.ndarray, np.ndarray]
FORMATS = ("dense", "toc")


def counts() -> list[int]:
    """1, 2 and this machine's cores when it has more."""
    cores = os.cpu_count() or 1
    return [1, 2] + ([cores] if cores > 2 else [])


def datasets(quick: bool) -> list[Data]:
    """MNIST (10 classes, one-vs-rest) and a9a.t when the shared files are there, and a
    synthetic 26-class set sized so an epoch is real work (one-vs-rest: features × classes
    products per row)."""
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    rng = np.random.default_rng(0)
    rows, features, classes = (6000, 64, 8) if quick else (60000, 256, 26)
    centres = rng.normal(size=(classes, features))
    label = rng.integers(0, classes, size=rows)
    X = centres[label] + 2.0 * rng.normal(size=(rows, features))
    out = [(f"synthetic {classes} classes", X, label.astype(float))]
    folder = shared_datasets()
    if folder is not None:
        Xm, ym = load_mnist(folder, limit=2000 if quick else None)
        Xa, ya = load_a9a(folder)
        limit = 4000 if quick else None
        out += [("MNIST-10k", Xm, ym.astype(float)), ("a9a.t", Xa[:limit], (ya[:limit] > 0) * 1.0)]
    return out


def _train(
    engine: BenchEngine, options: dict[str, Any], source: str = "NULL", label: str = "y"
) -> dict[str, Any]:
    opts = json.dumps({"replace": True, "progress": False, **options})
    call = f"SELECT {engine.loom}loom_train('bench_pm', {source}, '{label}', '{opts}')"
    summary = json.loads(engine.scalar(call))
    history = engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_pm'")
    history = json.loads(history) if isinstance(history, str) else history
    epochs = [h for h in history if "epoch" in h]
    seconds = [h["seconds"] for h in epochs]
    return {
        "epochs": len(epochs),
        "epoch_ms": float(np.median(seconds[1:] or seconds)) * 1000,
        "loss": summary["loss"],
        "workers": epochs[-1].get("workers", 1),
        "train_s": summary["seconds"],
    }


def parallel_table(
    data: Sequence[Data], dsn: str | None, epochs: int, shards: Sequence[int] = (1, 2)
) -> BenchTable:
    """Epoch time, speed-up and loss after ``epochs`` epochs per shard count."""
    table = BenchTable(
        f"parallel: epoch time and loss, 1 vs {' vs '.join(map(str, shards[1:]))} shards "
        f"(logistic, {epochs} epochs)",
        ["engine", "data", "format", "parallel", "workers", "epoch ms", "speed-up", "loss"],
        notes=[
            "epoch ms: the median of epochs 2.. (tol 0); speed-up: parallel 1's epoch ms / "
            "this one's; workers: processes (PostgreSQL) or threads (DuckDB) that ran shards "
            "in the last epoch",
            "loss: the training loss after the same epochs — n shards take 1/n of the serial "
            "steps each per epoch, so it trails the serial loss until both converge (next table)",
            "BLAS held to 1 thread in this process for every count (the shards hold it so "
            "themselves); the PostgreSQL server's serial trains use the threads its "
            "environment sets",
        ],
        digits={"epoch ms": 3, "speed-up": 3, "loss": 4},
    )
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1), engines(dsn) as found:
        for engine in found:
            for name, X, y in data:
                engine.load("bench_par", X, y)
                for fmt in FORMATS:
                    built = json.dumps({"format": fmt})
                    engine.scalar(
                        f"SELECT {engine.loom}loom_create_index('bench_px', "
                        f"'bench_par', 'y', '{built}')"
                    )
                    serial = None
                    for n in shards:
                        r = _train(
                            engine, {"index": "bench_px", "epochs": epochs, "tol": 0, "parallel": n}
                        )
                        serial = serial or r
                        speed = serial["epoch_ms"] / r["epoch_ms"]
                        table.add(
                            engine.name, name, fmt, n, r["workers"], r["epoch_ms"], speed, r["loss"]
                        )
                    engine.run(f"SELECT {engine.loom}loom_drop_index('bench_px')")
            engine.run(f"SELECT {engine.loom}loom_drop_model('bench_pm')")
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return table


def convergence_table(dsn: str | None, shards: Sequence[int] = (1, 2)) -> BenchTable:
    """Final loss at convergence (default tol) of the bundled real samples, per shard count."""
    table = BenchTable(
        "parallel: final loss at convergence (logistic, default tol, bundled samples)",
        ["engine", "data", "format", "parallel", "epochs", "train s", "loss", "vs serial %"],
        notes=["vs serial %: (loss / parallel 1's loss − 1) × 100; the target is within ±1%"],
        digits={"loss": 5, "vs serial %": 2, "train s": 3},
    )
    samples = [("digits", "digit"), ("breast_cancer", "benign")]
    with engines(dsn) as found:
        for engine in found:
            for sample, label in samples:
                engine.run(f"DROP TABLE IF EXISTS bench_par_{sample}")
                engine.run(
                    f"SELECT {engine.loom}loom_load('sample', '{sample}', 'bench_par_{sample}')"
                )
                for fmt in FORMATS:
                    serial = None
                    for n in shards:
                        opts = {"format": fmt, "parallel": n}
                        r = _train(engine, opts, f"'bench_par_{sample}'", label)
                        serial = serial or r
                        table.add(
                            engine.name,
                            sample,
                            fmt,
                            n,
                            r["epochs"],
                            r["train_s"],
                            r["loss"],
                            (r["loss"] / serial["loss"] - 1) * 100,
                        )
                engine.run(f"DROP TABLE bench_par_{sample}")
            engine.run(f"SELECT {engine.loom}loom_drop_model('bench_pm')")
    return table


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    shards = counts()
    return [
        parallel_table(datasets(quick), dsn, 4 if quick else 10, shards),
        convergence_table(dsn, shards[:2]),
    ]
