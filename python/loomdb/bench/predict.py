"""``loomdb bench predict``: prediction in SELECT vs the engine's own dot product.
No paper section.

Over N rows (1M by default) of 16 features, each engine computes, in one aggregate query:
* native — ``CASE WHEN b + Σ wᵢ·xᵢ > 0 THEN 1 ELSE 0 END`` written by hand (the peer);
* compiled — ``loom_predict_sql(model)``'s expression (standardisation included);
* deployed — ``predict_<model>(x0, …)`` made by ``loom_deploy`` (a MACRO in DuckDB, an inlined
  parallel-safe SQL function in PostgreSQL);
* UDF — ``loom_predict(model, [x0, …])`` (an arrow UDF in DuckDB; per row in PostgreSQL, in C
  where loomdb's C module is installed).
PostgreSQL also runs native and deployed in a parallel plan (2 workers, forced: setup and tuple
costs 0, no minimum table size; ``EXPLAIN ANALYZE`` must show a Gather with workers launched,
else the row says so); their ratio is against native in the same parallel plan.
Ratios are native time / method time: 1.0 means as fast as native.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import numpy as np

from loomdb.bench.engines import engines
from loomdb.bench.table import BenchTable

M = 16


ROUNDS = 7  # each method's time is its median of ROUNDS runs, interleaved (_interleaved)
SLOW_S = 5.0  # a method slower than this at its first run is timed once more only
PARALLEL = {  # a parallel plan whatever the table's size (the deployed function is parallel safe)
    "parallel_setup_cost": "0",
    "parallel_tuple_cost": "0",
    "min_parallel_table_scan_size": "0",
    "max_parallel_workers_per_gather": "2",
}


def run(
    quick: bool = False, dsn: str | None = None, rows: list[int] | None = None
) -> list[BenchTable]:
    n = rows[0] if rows else 20_000 if quick else 1_000_000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, M))
    y = (X @ rng.normal(size=M) + 0.3 * rng.normal(size=n) > 0).astype(float)
    table = BenchTable(
        f"predict: {n:,} rows × {M} features, median of 7, seconds and speed vs native",
        ["engine", "method", "seconds", "rows/s", "vs native"],
    )
    cols = [f"x{i}" for i in range(M)]
    with engines(dsn) as found:
        for engine in found:
            engine.load("bench_pred", X, y, cols)
            engine.load("bench_fit", X[:10_000], y[:10_000], cols)
            engine.scalar(
                "SELECT loom_train('bench_p', 'bench_fit', 'y', "
                '\'{"epochs": 3, "replace": true, "progress": false}\')'
            )
            info = json.loads(engine.scalar("SELECT loom_model_info('bench_p')"))
            w = np.asarray(info["coefficients"])[:, 0] * np.asarray(
                info["standardization"]["scale"]
            )
            b = info["intercept"][0] - float(np.asarray(info["standardization"]["shift"]) @ w)
            dot = " + ".join([repr(float(b))] + [f"{float(wi)!r} * {c}" for wi, c in zip(w, cols)])
            compiled = engine.scalar("SELECT loom_predict_sql('bench_p')")
            engine.scalar("SELECT loom_deploy('bench_p')")
            array = "ARRAY[" + ", ".join(cols) + "]"
            queries = {
                "native": f"SELECT sum(CASE WHEN {dot} > 0 THEN 1 ELSE 0 END) FROM bench_pred",
                "compiled": f"SELECT sum({compiled}) FROM bench_pred",
                "deployed": f"SELECT sum(predict_bench_p({', '.join(cols)})) FROM bench_pred",
                "UDF": f"SELECT sum(loom_predict('bench_p', {array})) FROM bench_pred",
            }
            answers, first = {}, {}
            for k, q in queries.items():
                started = time.perf_counter()
                answers[k] = engine.scalar(q)
                first[k] = time.perf_counter() - started
            if len({float(v) for v in answers.values()}) != 1:
                table.notes.append(f"{engine.name}: methods disagree: {answers}")
            times = _interleaved(engine, queries, first)
            for method, seconds in times.items():
                table.add(engine.name, method, seconds, n / seconds, times["native"] / seconds)
            if engine.name == "postgres":
                _parallel(engine, table, {k: queries[k] for k in ("native", "deployed")}, n)
            engine.run("SELECT loom_drop_model('bench_p')")
        if len(found) == 1:
            table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table]


def _interleaved(engine: Any, queries: dict[str, str], first: dict[str, float]) -> dict[str, float]:
    """Each query's median time over ``ROUNDS`` rounds that run every query once in turn, so a
    machine that slows down for a while slows every method alike (the median, not the best: on
    PostgreSQL each run compiles its plan again (JIT) for most of a 10M-row query's time, and
    the luckiest run of one method decided the ratio); ``first`` is the run each already had,
    which warms it.  What is slow (PostgreSQL's per-row Python without the C module) keeps its
    first run and one more."""
    runs: dict[str, list[float]] = {method: [] for method in queries}
    for r in range(ROUNDS):
        for method, query in queries.items():
            if r == 0 or first[method] <= SLOW_S:
                runs[method].append(engine.timed(query))
    return {
        method: float(np.median(times if len(times) > 1 else [*times, first[method]]))
        for method, times in runs.items()
    }


def _parallel(engine: Any, table: BenchTable, queries: dict[str, str], n: int) -> None:
    """Native and deployed in a forced parallel plan, each row naming the workers its
    ``EXPLAIN ANALYZE`` launched under a Gather; a note when there were none."""
    for name, value in PARALLEL.items():
        engine.run(f"SET {name} = {value}")
    try:
        times, labels = {}, {}
        for method, query in queries.items():
            plan = "\n".join(r[0] for r in engine.run(f"EXPLAIN (ANALYZE, VERBOSE) {query}"))
            launched = re.search(r"Workers Launched: (\d+)", plan)
            planned = re.search(r"Workers Planned: (\d+)", plan)
            if "Gather" not in plan or not launched or not planned or launched.group(1) == "0":
                table.notes.append(f"postgres: {method} ran without parallel workers:\n{plan}")
            if method == "deployed" and "predict_bench_p" in plan:
                table.notes.append("postgres: the deployed function was not inlined")
            workers = f"{launched.group(1)} of {planned.group(1)}" if launched and planned else "no"
            labels[method] = f"{method}, Gather ({workers} workers)"
            times[method] = engine.timed(query)
        times = _interleaved(engine, queries, times)
        for method, seconds in times.items():
            table.add(engine.name, labels[method], seconds, n / seconds, times["native"] / seconds)
    finally:
        for name in PARALLEL:
            engine.run(f"RESET {name}")
