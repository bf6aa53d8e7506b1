"""``loomdb bench weave``: any-precision training over one MLWeaving index.

For MNIST-10k and a9a.t (least squares on {0,1} labels, as the paper trains): the index build
speed, then for each precision s ∈ {1, 2, 3, 4, 8, 16, 32} and the adaptive schedule the bytes
an epoch reads (what the engine returned), Eq. 4's prediction, the epoch time, its ratio to
s = 32, and the final training loss.
"""

from __future__ import annotations

import json
import time

import numpy as np

from loomdb.bench.engines import binary_datasets, engines
from loomdb.bench.table import BenchTable
from loomdb.codecs import weave

PRECISIONS: list[int | str] = [1, 2, 3, 4, 8, 16, 32, "adaptive"]


def _codec_seconds(X: np.ndarray) -> float:
    mins, maxs = weave.column_ranges(X)
    weave.weave_block(weave.quantize(X[:8], mins, maxs))  # compile outside the timing
    started = time.perf_counter()
    for i in range(0, len(X), 256):
        weave.weave_block(weave.quantize(X[i : i + 256], mins, maxs))
    return time.perf_counter() - started


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    epochs = 4 if quick else 20
    table = BenchTable(
        f"weave: least squares on an mlweaving index, {epochs} epochs",
        [
            "engine",
            "data",
            "precision",
            "bytes/epoch",
            "Eq. 4",
            "epoch ms",
            "vs s=32",
            "final loss",
        ],
    )
    build = BenchTable(
        "weave: index build (MB of float64 input per second)",
        [
            "engine",
            "data",
            "rows",
            "MB in",
            "codec MB/s",
            "SQL build s",
            "SQL build MB/s",
            "index bytes",
            "⌈N/8⌉·⌈M/64⌉·2048",
        ],
        notes=[
            "codec: quantise + weave 256-row blocks in memory (one core); SQL build: "
            "loom_create_index end to end (profile in SQL, shuffle, read, weave, insert)"
        ],
    )
    with engines(dsn) as found:
        for engine in found:
            for name, X, y in binary_datasets(quick):
                engine.load("bench_w", X, y)
                started = time.perf_counter()
                info = json.loads(
                    engine.scalar(
                        "SELECT loom_create_index('bench_wi', 'bench_w', 'y', "
                        '\'{"format": "mlweaving"}\')'
                    )
                )
                seconds = time.perf_counter() - started
                mb = X.nbytes / 1e6
                build.add(
                    engine.name,
                    name,
                    len(y),
                    mb,
                    mb / _codec_seconds(X),
                    seconds,
                    mb / seconds,
                    info["bytes"],
                    weave.index_size(*X.shape),
                )
                times: dict[str, float] = {}
                for s in PRECISIONS:
                    opts = json.dumps(
                        {
                            "index": "bench_wi",
                            "precision": s,
                            "epochs": epochs,
                            "model": "linear",
                            "standardize": "minmax",
                            "replace": True,
                            "progress": False,
                            "lr": 0.05,
                        }
                    )
                    engine.scalar(f"SELECT loom_train('bench_wm', NULL, 'y', '{opts}')")
                    history = json.loads(
                        engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_wm'")
                    )
                    ms = float(np.median([h["seconds"] for h in history])) * 1000
                    times[str(s)] = ms
                    last = history[-1]
                    eq4 = weave.epoch_bytes(len(y), X.shape[1], last["precision"])
                    table.add(
                        engine.name,
                        name,
                        str(s),
                        last["bytes_read"],
                        eq4,
                        ms,
                        ms / times.get("32", ms) if s != 32 else 1.0,
                        last["loss"],
                    )
                engine.run("SELECT loom_drop_index('bench_wi')")
                engine.run("SELECT loom_drop_model('bench_wm')")
    for row in table.rows:  # ratios against s = 32, known only once it has run
        ref = next(r[5] for r in table.rows if r[0] == row[0] and r[1] == row[1] and r[2] == "32")
        row[6] = row[5] / ref
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    table.notes.append(
        "bytes/epoch: what the engine returned for the planes and labels read; "
        "for adaptive, the last epoch's"
    )
    return [build, table]
