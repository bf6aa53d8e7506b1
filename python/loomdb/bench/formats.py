"""Epoch time per storage format, through SQL, on both engines (part of ``bench toc``).

The same source is laid out as ``dense``, ``toc`` and ``toc`` + zstd; the same model is then
trained on each index twice: cold (``"cache_mb": 0``, every epoch reads and decodes the index)
and warm (the default cache: epoch 1 reads, later epochs reuse the decoded batches).  The epoch
times come from the model's history.
"""

from __future__ import annotations

import json

import numpy as np

from loomdb.bench.engines import BenchEngine, engines
from loomdb.bench.table import BenchTable

LAYOUTS = [
    ("dense", {"format": "dense"}),
    ("toc", {"format": "toc"}),
    ("toc+zstd", {"format": "toc", "entropy": "zstd"}),
]


def _epoch_seconds(engine: BenchEngine, epochs: int, **opts: object) -> list[float]:
    train = json.dumps(
        {
            "index": "bench_ix",
            "model": "logistic",
            "epochs": epochs,
            "tol": 0,
            "replace": True,
            "progress": False,
            **opts,
        }
    )
    engine.scalar(f"SELECT {engine.loom}loom_train('bench_fm', NULL, 'y', '{train}')")
    history = engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_fm'")
    history = json.loads(history) if isinstance(history, str) else history
    return [h["seconds"] for h in history if "epoch" in h]


def epoch_times(
    datasets: list[tuple[str, np.ndarray, np.ndarray]],
    dsn: str | None = None,
    epochs: int = 5,
    batch_size: int = 250,
) -> BenchTable:
    table = BenchTable(
        f"epoch time per storage format (logistic, {batch_size}-row batches, {epochs} epochs)",
        [
            "engine",
            "data",
            "format",
            "stored bytes",
            "ratio vs dense",
            "cold epoch ms",
            "cold vs dense",
            "warm epoch ms",
            "warm vs dense",
        ],
        notes=[
            "cold: cache_mb 0, the median epoch (each reads and decodes the index); warm: the "
            "default cache, the median of epochs 2.. (epoch 1 reads, the rest reuse the "
            "decoded batches)",
            "ratio vs dense: dense bytes / these bytes; vs dense: dense epoch ms / these ms "
            "(above 1 this format is faster)",
            "BLAS held to 1 thread in this process (loomdb on DuckDB runs here); the "
            "PostgreSQL server's threads are what its environment sets",
        ],
    )
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1), engines(dsn) as found:
        for engine in found:
            for name, X, y in datasets:
                engine.load("bench_fmt", X, y)
                base: dict[str, float] = {}
                for label, layout in LAYOUTS:
                    opts = json.dumps({**layout, "batch_size": batch_size})
                    info = json.loads(
                        engine.scalar(
                            f"SELECT {engine.loom}loom_create_index('bench_ix', "
                            f"'bench_fmt', 'y', '{opts}')"
                        )
                    )
                    cold = float(np.median(_epoch_seconds(engine, epochs, cache_mb=0))) * 1000
                    warm_all = _epoch_seconds(engine, epochs)
                    warm = float(np.median(warm_all[1:] or warm_all)) * 1000
                    base.setdefault("bytes", info["bytes"])
                    base.setdefault("cold", cold)
                    base.setdefault("warm", warm)
                    table.add(
                        engine.name,
                        name,
                        label,
                        info["bytes"],
                        base["bytes"] / info["bytes"],
                        cold,
                        base["cold"] / cold,
                        warm,
                        base["warm"] / warm,
                    )
                    engine.run(f"SELECT {engine.loom}loom_drop_index('bench_ix')")
                engine.run(f"SELECT {engine.loom}loom_drop_model('bench_fm')")
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return table
