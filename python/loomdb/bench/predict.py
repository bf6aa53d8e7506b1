"""``loomdb bench predict``: prediction in SELECT vs the engine's own dot product.
No paper section.

Over N rows (1M by default) of 16 features, each engine computes, in one aggregate query:
* native — ``CASE WHEN b + Σ wᵢ·xᵢ > 0 THEN 1 ELSE 0 END`` written by hand (the peer);
* compiled — ``loom_predict_sql(model)``'s expression (standardisation included);
* deployed — ``predict_<model>(x0, …)`` made by ``loom_deploy`` (a MACRO in DuckDB, an inlined
  parallel-safe SQL function in PostgreSQL);
* UDF — ``loom_predict(model, [x0, …])`` (an arrow UDF in DuckDB; per row in PostgreSQL, in C
  where loomdb's C module is installed);
* UDF, row — DuckDB only: ``loom_predict(model, t) FROM t``, the row form binding the features
  by name (the same arrow UDF, handed a STRUCT; PostgreSQL's row form reads each row's
  ``to_jsonb`` in PL/Python, a per-row path not timed here).
PostgreSQL also runs native and deployed in a parallel plan (2 workers, forced: setup and tuple
costs 0, no minimum table size; ``EXPLAIN ANALYZE`` must show a Gather with workers launched,
else the row says so); their ratio is against native in the same parallel plan.  DuckDB also
runs native, the two UDF forms and a Python arrow UDF that takes the same list and returns
zeros without reading it (the least any Python UDF costs) on one thread, where Python's lock
is not fought over; their ratio is against native on one thread.
A second table does the same for a model with a text column (one-hot, ``ENCODED_K`` of
``ENCODED_VALUES`` values kept, the rest ``<other>``) and ``ENCODED_M`` numbers, written by hand
from ``loom_model_info`` two ways: a ``CASE`` on the text giving each category's weight
(native, the peer) and one indicator term per feature, ``w·CASE WHEN city = 'v' THEN 1.0 ELSE
0.0 END`` (how the compiled expression wrote it before).
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
ENCODED_M, ENCODED_K, ENCODED_VALUES = 8, 64, 100


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
    encoded = BenchTable(
        f"predict, a model of one text column ({ENCODED_K} of {ENCODED_VALUES} values one-hot, "
        f"the rest <other>) and {ENCODED_M} numbers: {n:,} rows, median of 7, seconds and speed "
        "vs native",
        ["engine", "method", "seconds", "rows/s", "vs native"],
    )
    cols = [f"x{i}" for i in range(M)]
    with engines(dsn) as found:
        for engine in found:
            engine.load("bench_pred", X, y, cols)
            engine.load("bench_fit", X[:10_000], y[:10_000], cols)
            engine.scalar(
                f"SELECT {engine.loom}loom_train('bench_p', 'bench_fit', 'y', "
                '\'{"epochs": 3, "replace": true, "progress": false}\')'
            )
            info = json.loads(engine.scalar(f"SELECT {engine.loom}loom_model_info('bench_p')"))
            w = np.asarray(info["coefficients"])[:, 0] * np.asarray(
                info["standardization"]["scale"]
            )
            b = info["intercept"][0] - float(np.asarray(info["standardization"]["shift"]) @ w)
            dot = " + ".join([repr(float(b))] + [f"{float(wi)!r} * {c}" for wi, c in zip(w, cols)])
            compiled = engine.scalar(f"SELECT {engine.loom}loom_predict_sql('bench_p')")
            engine.scalar(f"SELECT {engine.loom}loom_deploy('bench_p')")
            array = "ARRAY[" + ", ".join(cols) + "]"
            queries = {
                "native": f"SELECT sum(CASE WHEN {dot} > 0 THEN 1 ELSE 0 END) FROM bench_pred",
                "compiled": f"SELECT sum({compiled}) FROM bench_pred",
                "deployed": f"SELECT sum(predict_bench_p({', '.join(cols)})) FROM bench_pred",
                "UDF": f"SELECT sum({engine.loom}loom_predict('bench_p', {array})) FROM bench_pred",
            }
            if engine.name == "duckdb":
                queries["UDF, row"] = "SELECT sum(loom_predict('bench_p', t)) FROM bench_pred t"
            _compare(engine, table, queries, n)
            if engine.name == "postgres":
                _parallel(engine, table, {k: queries[k] for k in ("native", "deployed")}, n)
            else:
                noop = f"SELECT sum(bench_noop({array})) FROM bench_pred"
                single = {k: queries[k] for k in ("native", "UDF", "UDF, row")}
                _one_thread(engine, table, {**single, "no-op Python UDF": noop}, n)
            engine.run(f"SELECT {engine.loom}loom_drop_model('bench_p')")
            _encoded(engine, encoded, n)
        if len(found) == 1:
            table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table, encoded]


def _encoded(engine: Any, table: BenchTable, n: int) -> None:
    """The methods over a model with a one-hot text column (``table``'s rows)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, ENCODED_M))
    codes = rng.integers(0, ENCODED_VALUES, n)
    y = (X[:, 0] + (codes % 7 - 3) * 0.3 > 0).astype(float)
    cols = [f"x{i}" for i in range(ENCODED_M)]
    listed = ", ".join(cols)
    engine.load("bench_enc_raw", np.column_stack([X, codes]), y, [*cols, "k"])
    city = "'c' || CAST(CAST(k AS INTEGER) AS VARCHAR)"
    for name, rows in (("bench_enc", ""), ("bench_enc_fit", " LIMIT 20000")):
        engine.run(
            f"CREATE TABLE {name} AS SELECT {listed}, {city} AS city, y FROM bench_enc_raw{rows}"
        )
    options = {
        "epochs": 3,
        "progress": False,
        "replace": True,
        "preprocess": {"city": {"top_k": ENCODED_K}},
    }
    engine.scalar(
        f"SELECT {engine.loom}loom_train('bench_e', 'bench_enc_fit', 'y', '{json.dumps(options)}')"
    )
    info = json.loads(engine.scalar(f"SELECT {engine.loom}loom_model_info('bench_e')"))
    w = np.asarray(info["coefficients"])[:, 0] * np.asarray(info["standardization"]["scale"])
    b = info["intercept"][0] - float(np.asarray(info["standardization"]["shift"]) @ w)
    weight = {
        f: f"CAST({x!r} AS DOUBLE PRECISION)" for f, x in zip(info["feature_names"], w.tolist())
    }
    numbers = " + ".join(f"{weight[c]} * {c}" for c in cols)
    names = [f.removeprefix("city=") for f in info["feature_names"] if f.startswith("city=")]
    kept = [v for v in names if v != "<other>"]
    other = weight["city=<other>"]
    indicator = "CAST(CASE WHEN {} THEN 1.0 ELSE 0.0 END AS DOUBLE PRECISION)"
    literals = {v: f"'{v}'" for v in kept}  # c0 … c99: nothing to escape
    terms = [f"{weight['city=' + v]} * {indicator.format('city = ' + literals[v])}" for v in kept]
    outside = indicator.format("city NOT IN (" + ", ".join(literals.values()) + ")")
    whens = " ".join(f"WHEN {literals[v]} THEN {weight['city=' + v]}" for v in kept)
    deployed = json.loads(engine.scalar(f"SELECT {engine.loom}loom_deploy('bench_e')"))[
        "functions"
    ][0]
    compiled = engine.scalar(f"SELECT {engine.loom}loom_predict_sql('bench_e')")
    queries = {
        "native": f"SELECT sum(CASE WHEN {b!r} + {numbers} + "
        f"CASE city {whens} ELSE {other} END > 0 THEN 1 ELSE 0 END) FROM bench_enc",
        "native, indicator terms": f"SELECT sum(CASE WHEN {b!r} + {numbers} + "
        f"{' + '.join(terms)} + {other} * {outside} > 0 THEN 1 ELSE 0 END) FROM bench_enc",
        "compiled": f"SELECT sum({compiled}) FROM bench_enc",
        "deployed": f"SELECT sum({deployed}) FROM bench_enc",  # schema.predict_bench_e(columns)
    }
    _compare(engine, table, queries, n)
    engine.run(f"SELECT {engine.loom}loom_drop_model('bench_e')")


def _compare(engine: Any, table: BenchTable, queries: dict[str, str], n: int) -> None:
    """Time ``queries`` (``_interleaved``) into ``table``, with a note if their answers differ."""
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


def _one_thread(engine: Any, table: BenchTable, queries: dict[str, str], n: int) -> None:
    """DuckDB's ``queries`` on one thread; ``bench_noop`` is a Python arrow UDF that returns
    zeros."""
    import duckdb
    import pyarrow as pa

    def zeros(features):  # unannotated: DuckDB reads a UDF's annotations as types
        return pa.array(np.zeros(len(features)))

    listed = duckdb.list_type(duckdb.sqltype("DOUBLE"))
    engine.raw.create_function(
        "bench_noop", zeros, [listed], duckdb.sqltype("DOUBLE"), type="arrow", side_effects=True
    )
    engine.run("SET threads = 1")
    try:
        times = _interleaved(engine, queries, {k: engine.timed(q) for k, q in queries.items()})
        for method, seconds in times.items():
            label = f"{method}, 1 thread"
            table.add(engine.name, label, seconds, n / seconds, times["native"] / seconds)
    finally:
        engine.run("RESET threads")
        engine.raw.remove_function("bench_noop")


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
