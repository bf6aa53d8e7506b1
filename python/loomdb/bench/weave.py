"""``loomdb bench weave``: any-precision training over one MLWeaving index.

For MNIST-10k and a9a.t (least squares on {0,1} labels, as the paper trains):

* the index build speed;
* an epoch of the bit-sliced products alone (``weave_products``: A·w then gᵀ·A on every
  256-row block, in memory) at each precision, against BLAS on the same values as float64 —
  also for random tables of ``NARROW`` features, whose words the kernels read one, two or four
  bytes of;
* for each precision s ∈ {1, 2, 3, 4, 8, 16, 32} and the adaptive schedule, the bytes an epoch
  reads (what the engine returned), Eq. 4's prediction, and the epoch time, each with its ratio
  to s = 32 — with a **cold** cache (``cache_mb`` 0: every epoch reads its planes from the
  database) and a **warm** one (the batches kept between epochs: epochs 2… only compute) — and
  the final training loss; the dense float64 format on the same rows is the peer.

Epoch times are medians over every measured epoch of ``ROUNDS`` trainings per precision, the
precisions interleaved round by round so that a change of load on a shared machine falls on all
of them alike.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine, binary_datasets, engines
from loomdb.bench.table import BenchTable
from loomdb.codecs import weave

PRECISIONS: list[int | str] = [1, 2, 3, 4, 8, 16, 32, "adaptive"]
NARROW = (6, 12, 20)  # features of the random narrow tables in the products' table
CACHES = {"cold": 0, "warm": 256}  # cache_mb


def _codec_seconds(X: np.ndarray) -> float:
    mins, maxs = weave.column_ranges(X)
    weave.weave_block(weave.quantize(X[:8], mins, maxs))  # compile outside the timing
    started = time.perf_counter()
    for i in range(0, len(X), 256):
        weave.weave_block(weave.quantize(X[i : i + 256], mins, maxs))
    return time.perf_counter() - started


def _best_ms(f: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - started)
    return best * 1e3


def _kernels(table: BenchTable, name: str, X: np.ndarray, repeat: int) -> None:
    """An epoch of products in memory — A·w then gᵀ·A on every 256-row block — bit-sliced
    from the planes against BLAS on the same values held as float64."""
    lo, hi = weave.column_ranges(X)
    blocks = [weave.quantize(X[i : i + 256], lo, hi) for i in range(0, len(X), 256)]
    woven = [[bytes(p) for p in weave.weave_block(U)] for U in blocks]
    rng = np.random.default_rng(0)
    w = np.asarray(rng.normal(size=X.shape[1]))
    g = np.asarray(rng.normal(size=256))
    for s in (1, 2, 3, 4, 8, 16, 32):
        mats = [weave.WovenMatrix(p, len(U), X.shape[1], s) for p, U in zip(woven, blocks)]
        dense = [weave.values(weave.truncate(U, s), s) for U in blocks]

        def sliced(mats: list[weave.WovenMatrix] = mats) -> None:
            for M in mats:
                M @ w  # noqa: B018
                g[: M.n] @ M  # noqa: B018

        def floats(dense: list[np.ndarray] = dense) -> None:
            for A in dense:
                A @ w  # noqa: B018
                g[: len(A)] @ A  # noqa: B018

        sliced()  # arrange the planes (and compile) outside the timing
        held = sum(M.words().nbytes for M in mats) / 1e6
        t, d = _best_ms(sliced, repeat), _best_ms(floats, repeat)
        table.add(name, s, held, t, sum(A.nbytes for A in dense) / 1e6, d, t / d, np.nan)
    ref = next(r[3] for r in table.rows if r[:2] == [name, 32])
    for row in table.rows:
        if row[0] == name:
            row[7] = row[3] / ref


def _history(engine: BenchEngine, opts: dict[str, Any]) -> list[dict[str, Any]]:
    engine.scalar(f"SELECT {engine.loom}loom_train('bench_wm', NULL, 'y', '{json.dumps(opts)}')")
    history = json.loads(engine.scalar("SELECT history FROM loom.models WHERE name = 'bench_wm'"))
    return [h for h in history if "epoch" in h]  # a restart entry has no epoch


def _epochs(engine, name, index, X, y, epochs, rounds, table, peer: str) -> None:
    """Rows of ``table`` for one index: every precision, cold then warm, and the dense peer."""
    base = {"epochs": epochs, "model": "linear", "standardize": "minmax", "replace": True}
    base.update({"progress": False, "lr": 0.01})
    for cache, mb in CACHES.items():
        runs: dict[str, list[float]] = {}
        last: dict[str, dict[str, Any]] = {}
        first: dict[str, dict[str, Any]] = {}
        for _ in range(rounds):
            for s in [*PRECISIONS, "dense"]:
                opts = {**base, "index": peer if s == "dense" else index, "cache_mb": mb}
                if s != "dense":
                    opts["precision"] = s
                history = _history(engine, opts)
                measured = history if cache == "cold" else history[1:]
                runs.setdefault(str(s), []).extend(h["seconds"] * 1000 for h in measured)
                last[str(s)], first[str(s)] = history[-1], history[0]
        for s in runs:
            p = first[s]["precision"]
            eq4 = weave.epoch_bytes(len(y), X.shape[1], p) if s != "dense" else np.nan
            ms = float(np.median(runs[s]))
            loss = f"{last[s]['loss']:.5f}"
            nbytes = first[s]["bytes_read"]
            table.add(engine.name, name, cache, s, nbytes, eq4, np.nan, ms, np.nan, loss)


def _ratios(table: BenchTable, data: str) -> None:
    """Bytes and time of each row over those of s = 32 (same engine, data set and cache)."""
    for row in table.rows:
        if row[1] != data:
            continue
        ref = next(r for r in table.rows if r[:3] == [row[0], data, row[2]] and r[3] == "32")
        row[6] = row[4] / ref[4]
        row[8] = row[7] / ref[7]


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    epochs, rounds, repeat = (3, 1, 3) if quick else (5, 3, 15)
    table = BenchTable(
        f"weave: least squares on an mlweaving index, {epochs} epochs × {rounds} rounds",
        [
            "engine",
            "data",
            "cache",
            "precision",
            "bytes/epoch",
            "Eq. 4",
            "bytes vs s=32",
            "epoch ms",
            "time vs s=32",
            "final loss",
        ],
    )
    kernels = BenchTable(
        "weave: an epoch of products in memory (A·w then gᵀ·A on each 256-row block, best of "
        f"{repeat})",
        [
            "data",
            "precision",
            "planes MB",
            "bit-sliced ms",
            "f64 MB",
            "f64 ms",
            "vs f64",
            "vs s=32",
        ],
        notes=[
            "bit-sliced: from the planes read (weave_products); f64: BLAS on the same values "
            "held as float64 (what the CPU path multiplied before: 64 bits per value)"
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
    datasets = binary_datasets(quick)
    for name, X, _ in datasets:
        _kernels(kernels, name, X, repeat)
    rng = np.random.default_rng(0)
    for m in NARROW:
        _kernels(kernels, f"{m} features", rng.normal(size=(2_000 if quick else 10_000, m)), repeat)
    with engines(dsn) as found:
        for engine in found:
            for name, X, y in datasets:
                engine.load("bench_w", X, y)
                started = time.perf_counter()
                info = json.loads(
                    engine.scalar(
                        f"SELECT {engine.loom}loom_create_index('bench_wi', 'bench_w', 'y', "
                        '\'{"format": "mlweaving"}\')'
                    )
                )
                seconds = time.perf_counter() - started
                dense = json.dumps({"format": "dense"})
                engine.scalar(
                    f"SELECT {engine.loom}loom_create_index('bench_wd', 'bench_w', 'y', '{dense}')"
                )
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
                _epochs(engine, name, "bench_wi", X, y, epochs, rounds, table, "bench_wd")
                _ratios(table, name)
                engine.run(f"SELECT {engine.loom}loom_drop_index('bench_wi')")
                engine.run(f"SELECT {engine.loom}loom_drop_index('bench_wd')")
                engine.run(f"SELECT {engine.loom}loom_drop_model('bench_wm')")
    if dsn is None:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    table.notes += [
        "cold: cache_mb 0, every epoch reads its planes from the database (median of every "
        "epoch); warm: the batches kept between epochs (median of epochs 2…)",
        "bytes/epoch and Eq. 4: the first epoch's (for adaptive, at its first precision), as "
        "the engine returned them; final loss: the last epoch's; dense: the float64 dense "
        "format on the same rows (the peer)",
    ]
    return [build, kernels, table]
