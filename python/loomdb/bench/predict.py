"""``loomdb bench predict``: prediction in SELECT vs the engine's own dot product.
No paper section.

Over N rows (1M by default) of 16 features, each engine computes, in one aggregate query:
* native — ``CASE WHEN b + Σ wᵢ·xᵢ > 0 THEN 1 ELSE 0 END`` written by hand (the peer);
* compiled — ``loom_predict_sql(model)``'s expression (standardisation included);
* deployed — ``predict_<model>(x0, …)`` made by ``loom_deploy`` (a MACRO in DuckDB, an inlined
  parallel-safe SQL function in PostgreSQL);
* UDF — ``loom_predict(model, [x0, …])`` (an arrow UDF in DuckDB; per row in PostgreSQL).
Ratios are native time / method time: 1.0 means as fast as native.
"""

from __future__ import annotations

import json

import numpy as np

from loomdb.bench.engines import engines
from loomdb.bench.table import BenchTable

M = 16


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    n = 20_000 if quick else 1_000_000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, M))
    y = (X @ rng.normal(size=M) + 0.3 * rng.normal(size=n) > 0).astype(float)
    table = BenchTable(
        f"predict: {n:,} rows × {M} features, best of 3, seconds and speed vs native",
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
            answers = {k: engine.scalar(q) for k, q in queries.items()}
            if len({float(v) for v in answers.values()}) != 1:
                table.notes.append(f"{engine.name}: methods disagree: {answers}")
            repeat = 1 if engine.name == "postgres" and not quick else 3
            times = {k: engine.timed(q, repeat) for k, q in queries.items()}
            for method, seconds in times.items():
                table.add(engine.name, method, seconds, n / seconds, times["native"] / seconds)
            engine.run("SELECT loom_drop_model('bench_p')")
        if len(found) == 1:
            table.notes.append("PostgreSQL not measured: pass --dsn to include it")
    return [table]
