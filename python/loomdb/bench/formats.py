"""Epoch time per storage format, through SQL, on both engines (part of ``bench toc``).

The same source is laid out as ``dense``, ``toc`` and ``toc`` + zstd; the same model is then
trained on each index and the median epoch time is read from the model's history.
"""

from __future__ import annotations

import json

import numpy as np

from loomdb.bench.engines import engines
from loomdb.bench.table import BenchTable

LAYOUTS = [
    ("dense", {"format": "dense"}),
    ("toc", {"format": "toc"}),
    ("toc+zstd", {"format": "toc", "entropy": "zstd"}),
]


def epoch_times(
    datasets: list[tuple[str, np.ndarray, np.ndarray]],
    dsn: str | None = None,
    epochs: int = 5,
    batch_size: int = 250,
) -> BenchTable:
    table = BenchTable(
        f"epoch time per storage format (logistic, {batch_size}-row batches, median of "
        f"{epochs} epochs)",
        [
            "engine",
            "data",
            "format",
            "stored bytes",
            "ratio vs dense",
            "epoch ms",
            "speed vs dense",
        ],
    )
    with engines(dsn) as found:
        for engine in found:
            for name, X, y in datasets:
                engine.load("bench_fmt", X, y)
                base: dict[str, float] = {}
                for label, layout in LAYOUTS:
                    opts = json.dumps({**layout, "batch_size": batch_size})
                    info = json.loads(
                        engine.scalar(
                            f"SELECT loom_create_index('bench_ix', 'bench_fmt', 'y', '{opts}')"
                        )
                    )
                    train = json.dumps(
                        {"index": "bench_ix", "epochs": epochs, "replace": True, "progress": False}
                    )
                    engine.scalar(f"SELECT loom_train('bench_fm', NULL, 'y', '{train}')")
                    history = json.loads(
                        engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_fm'")
                    )
                    ms = float(np.median([h["seconds"] for h in history])) * 1000
                    base.setdefault("bytes", info["bytes"])
                    base.setdefault("ms", ms)
                    table.add(
                        engine.name,
                        name,
                        label,
                        info["bytes"],
                        base["bytes"] / info["bytes"],
                        ms,
                        base["ms"] / ms,
                    )
                    engine.run("SELECT loom_drop_index('bench_ix')")
                engine.run("SELECT loom_drop_model('bench_fm')")
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return table
