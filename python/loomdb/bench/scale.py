"""``loomdb bench scale``: how loomdb grows with the table — peak memory, layout and epoch time
per format and engine at 1M and 10M rows (``--rows`` for others, e.g. 100M), and the speed-up of
``{"parallel": 2}`` where that option exists.  No paper section.

Every measurement runs in a process of its own (``bench.scale_run``), so its peak resident
memory is its own: DuckDB's peak is that process's; PostgreSQL's is the server backend's that ran
the statements (read from ``/proc`` when the server runs on this machine).  The table is made
once per size inside the engine (``scale_run.table_sql``: 20 features, a linear label), DuckDB's
in a database file.  The peer is what a user pays to get the same rows out of the engine into numpy
(``fetch``: its seconds and its peak memory), measured the same way; and where the fetch fits in
memory, the whole ``loom_train`` call against that fetch followed by scikit-learn's fit.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Any

from loomdb.bench.table import BenchTable
from loomdb.errors import LoomOptionError

FORMATS = ["dense", "toc", "mlweaving"]
FEATURES = 20
DUCKDB_MEMORY = "3GB"  # DuckDB's own memory_limit in the bench (its default is 80% of RAM)
USER_STEPS = ("call", "fit")  # the steps run as a user would: DuckDB's default memory_limit
FETCH_PEAK_PER_RAW = 3  # the fetch peer's peak memory ÷ raw MB, measured at 10M rows (2.96)


def run(
    quick: bool = False,
    dsn: str | None = None,
    rows: list[int] | None = None,
    formats: list[str] | None = None,
):
    sizes = rows or ([200_000] if quick else [1_000_000, 10_000_000])
    unknown = sorted(set(formats or []) - set(FORMATS))
    if unknown or formats == []:
        raise LoomOptionError(
            f"bench scale lays out {', '.join(FORMATS)}; got {', '.join(unknown) or 'none'}",
            hint="e.g. --formats dense,toc",
        )
    table = BenchTable(
        f"scale: {FEATURES} features, logistic, 3 epochs",
        ["engine", "rows", "format", "raw MB", "peak MB", "peak ÷ raw", "layout s"]
        + ["fetch s", "layout ÷ fetch", "cold epoch s", "warm epoch s"],
        notes=[
            "raw MB: rows × (features + label) × 8 bytes; peak MB: the measuring process's "
            "peak resident memory (PostgreSQL: the server backend's) over layout and both trains",
            "fetch: the peer — the same rows fetched into a numpy array (DuckDB fetchnumpy, "
            "PostgreSQL a server-side cursor, 100,000 rows a fetch): its seconds, and its own "
            "process's peak memory in the peak MB column of its row",
            'cold: "cache_mb": 0, every epoch reads the index; warm: the default cache '
            "(median of epochs 2 and 3)",
            f"DuckDB runs with memory_limit {DUCKDB_MEMORY} and a database file (the whole call "
            "and fetch + fit below: its default memory_limit, as a user's)",
        ],
        digits={"layout s": 3, "fetch s": 3, "cold epoch s": 3, "warm epoch s": 3},
    )
    speedups = BenchTable(
        'scale: {"parallel": 2} against 1, warm epoch seconds (same index, same seed)',
        ["engine", "rows", "format", "epoch s, 1", "epoch s, 2", "speed-up", "loss ratio"],
        notes=["loss ratio: the final loss with 2 workers ÷ with 1 (model averaging)"],
        digits={"epoch s, 1": 3, "epoch s, 2": 3},
    )
    calls = BenchTable(
        "scale: the whole loom_train call against fetch + fit, logistic, l2 0.0001",
        ["engine", "rows", "system", "passes", "fetch/layout s", "fit s", "total s"]
        + ["loomdb ÷ this", "obj ÷ lbfgs"],
        notes=[
            'loomdb: SELECT loom_train(\'m\', table, \'y\', \'{"model": "logistic", "l2": '
            "0.0001}'), every other option its default (it stops where its tol says); "
            "fetch/layout s and fit s: its own layout_s and train_s; total s: the SELECT's "
            "wall time",
            "fetch + lbfgs: the fetch above, StandardScaler, then scikit-learn's "
            "LogisticRegression(C = 1/(n·l2), max_iter = 1000) with one BLAS thread, as "
            "loomdb steps on one core; passes: its iterations",
            "loomdb ÷ this: loomdb's total s (its defaults) / this row's (below 1 loomdb is "
            "faster); obj ÷ lbfgs: the objective (mean log-loss + l2/2·‖w∘σ‖²) of the row's "
            "model on the fetched rows ÷ lbfgs's",
        ],
        digits={"fetch/layout s": 3, "fit s": 3, "total s": 3, "obj ÷ lbfgs": 5},
    )
    with tempfile.TemporaryDirectory(prefix="loomdb-scale-") as folder:
        for engine in ["duckdb", *(["postgres"] if dsn else [])]:
            for n in sizes:
                where = {"engine": engine, "dsn": dsn, "path": os.path.join(folder, f"{n}.duckdb")}
                _child({**where, "step": "make", "rows": n})
                raw = n * (FEATURES + 1) * 8 / 2**20
                nan = float("nan")
                fetch = {"seconds": nan}
                if raw * FETCH_PEAK_PER_RAW < _memory_mb():
                    fetch = _child({**where, "step": "fetch", "rows": n})
                    peer = [fetch["peak_mb"], fetch["peak_mb"] / raw, nan, fetch["seconds"], 1.0]
                    table.add(engine, n, "fetch (peer)", raw, *peer, nan, nan)
                    _calls(calls, where, engine, n)
                elif not any("not run" in note for note in table.notes):
                    table.notes.append(
                        f"fetch (peer) not run where it needs more than this machine's "
                        f"{_memory_mb() / 1024:.0f} GB: about {FETCH_PEAK_PER_RAW}x raw MB at 10M "
                        "rows (the rows as columns, then stacked)"
                    )
                for fmt in formats or FORMATS:
                    got = _child({**where, "step": "train", "rows": n, "format": fmt})
                    print(f"bench scale {engine} {n} {fmt}: {json.dumps(got)}", file=sys.stderr)
                    table.add(
                        engine,
                        n,
                        fmt,
                        raw,
                        got["peak_mb"],
                        got["peak_mb"] / raw,
                        got["layout_s"],
                        fetch["seconds"],
                        got["layout_s"] / fetch["seconds"],
                        got["cold_s"],
                        got["warm_s"],
                    )
                    if got.get("parallel_s") is not None:
                        speedups.add(
                            engine,
                            n,
                            fmt,
                            got["warm_s"],
                            got["parallel_s"],
                            got["warm_s"] / got["parallel_s"],
                            got["parallel_loss"] / got["loss"],
                        )
    if not dsn:
        table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table, calls] + ([speedups] if speedups.rows else [])


def _calls(table: BenchTable, where: dict[str, Any], engine: str, n: int) -> None:
    """loomdb's whole call and a user's fetch + fit on the same rows, each in a process of its
    own, every model judged on the fetched rows.  Where the rows exceed the cache the default
    call used, loomdb also runs with a cache that holds them (the option a user with the
    memory sets)."""
    from loomdb.store.budget import MB

    default = _child({**where, "step": "call", "rows": n, "options": {}})
    loom = {"loomdb loom_train": default}
    raw = n * (FEATURES + 1) * 8
    if raw > default["cache_mb"] * MB:
        holding = math.ceil(raw * 1.25 / MB)
        options = {"cache_mb": holding}
        what = f'loomdb loom_train, "cache_mb": {holding}'
        loom[what] = _child({**where, "step": "call", "rows": n, "options": options})
    user = _child({**where, "step": "fit", "rows": n, "models": loom})
    total = user["fetch_s"] + user["fit_s"]
    default_s = loom["loomdb loom_train"]["seconds"]
    for what, got in loom.items():
        row = [got["epochs"], got["layout_s"], got["train_s"], got["seconds"]]
        quality = user["objectives"][what] / user["objective"]
        table.add(engine, n, what, *row, default_s / got["seconds"], quality)
    row = [user["iterations"], user["fetch_s"], user["fit_s"], total]
    table.add(engine, n, "fetch + lbfgs", *row, default_s / total, 1.0)
    first = loom["loomdb loom_train"]["first_s"]
    table.notes.append(
        f"{engine}, {n:,} rows: loomdb's process first trained on 2,000 of the rows, "
        f"{first:.2f} s, what a process (PostgreSQL: a session) pays once for loomdb's modules "
        "and compiled kernels; not in the rows, as the peer's imports are not; its default "
        f"cache_mb was {default['cache_mb']}"
    )


def _memory_mb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


def _child(task: dict[str, Any]) -> dict[str, Any]:
    """Run one step in a fresh Python process and return what it printed last (JSON)."""
    done = subprocess.run(
        [sys.executable, "-m", "loomdb.bench.scale_run", json.dumps(task)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench scale step {task['step']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
