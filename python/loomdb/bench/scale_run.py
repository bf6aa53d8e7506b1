"""One step of ``loomdb bench scale`` in a process of its own, so that its peak memory is its
own: ``make`` the table, ``fetch`` it into numpy (the peer), lay it out and ``train``, or
compare the whole ``call`` of ``loom_train`` with what a user would ``fit`` instead.
Prints one JSON line.  No paper section.

``python -m loomdb.bench.scale_run '{"step": …, "engine": "duckdb"|"postgres", "rows": n, …}'``
"""

from __future__ import annotations

import functools
import json
import resource
import sys
import time
from typing import Any

import numpy as np

SOURCE = "loomdb_scale_src"
INDEX = "loomdb_scale_ix"
MODEL = "loomdb_scale_m"
FEW = "loomdb_scale_few"  # the rows of a process's first train (``call``)
FETCH_ROWS = 100_000  # rows a PostgreSQL fetch brings at a time into the preallocated array


def table_sql(rows: int, features: int) -> str:
    """The same CREATE TABLE AS on both engines: features from modular sequences of the row
    number (deterministic, no random() whose seeding differs), a linear label."""
    xs = [
        f"CAST((i * {7919 + 104 * j} + {13 * j}) % {1009 + 10 * j} AS DOUBLE PRECISION) "
        f"/ {1009 + 10 * j} - 0.5 AS x{j}"
        for j in range(features)
    ]
    score = " + ".join(f"{(-1) ** j * (1 + j % 3)} * x{j}" for j in range(features))
    return (
        f"CREATE TABLE {SOURCE} AS SELECT s.*, CAST({score} > 0 AS INTEGER) AS y "
        f"FROM (SELECT {', '.join(xs)} "
        f"FROM generate_series(CAST(1 AS BIGINT), CAST({rows} AS BIGINT)) AS g(i)) AS s"
    )


class Engine:
    """A connection to the engine with loomdb, and the peak memory of whoever runs it."""

    def __init__(self, task: dict[str, Any], with_loomdb: bool = True):
        from loomdb.bench.scale import DUCKDB_MEMORY, USER_STEPS

        self.name = task["engine"]
        self.raw: Any
        if self.name == "duckdb":
            import duckdb

            import loomdb

            limited = task["step"] not in USER_STEPS  # where peak memory is measured
            config: dict[str, Any] = {"memory_limit": DUCKDB_MEMORY} if limited else {}
            self.raw = duckdb.connect(task["path"], config=config)
            if with_loomdb:
                loomdb.register(self.raw, progress=False)
            self.pid = None
        else:
            import psycopg

            self.raw = psycopg.connect(task["dsn"], autocommit=True)
            self.pid = int(self.rows("SELECT pg_backend_pid()")[0][0])

    @functools.cached_property
    def loom(self) -> str:
        """What a call of loomdb's function is prefixed with: on PostgreSQL the extension's
        schema (``engines.loom_prefix``), asked once, where a step calls loomdb."""
        if self.name == "duckdb":
            return ""
        from loomdb.bench.engines import loom_prefix

        return loom_prefix(self.raw)

    def rows(self, sql: str) -> list[tuple]:
        if self.name == "duckdb":
            return self.raw.execute(sql).fetchall()
        with self.raw.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall() if cur.description else []

    def peak_mb(self) -> float:
        """Peak resident memory: this process's (DuckDB), the server backend's (PostgreSQL)."""
        if self.pid is None:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")  # the server runs elsewhere


def make(task: dict[str, Any]) -> dict[str, Any]:
    from loomdb.bench.scale import FEATURES

    engine = Engine(task, with_loomdb=False)
    engine.rows(f"DROP TABLE IF EXISTS {SOURCE}")
    started = time.perf_counter()
    engine.rows(table_sql(task["rows"], FEATURES))
    return {"seconds": time.perf_counter() - started}


def _fetched(engine: Engine) -> np.ndarray:
    """The rows into one float64 array (the label last), as a careful user would (no Python
    row per value where the driver allows it)."""
    if engine.name == "duckdb":
        columns = engine.raw.execute(f"SELECT * FROM {SOURCE}").fetchnumpy()
        return np.column_stack([np.asarray(c, dtype=np.float64) for c in columns.values()])
    with engine.raw.transaction(), engine.raw.cursor(name="loomdb_scale_fetch") as cur:
        cur.execute(f"SELECT * FROM {SOURCE}")
        chunks = []
        while batch := cur.fetchmany(FETCH_ROWS):
            chunks.append(np.asarray(batch, dtype=np.float64))
        return np.concatenate(chunks)


def fetch(task: dict[str, Any]) -> dict[str, Any]:
    engine = Engine(task, with_loomdb=False)
    started = time.perf_counter()
    X = _fetched(engine)
    seconds = time.perf_counter() - started
    # the client's peak: DuckDB's is this process, PostgreSQL's fetch ends here too
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak, "shape": list(X.shape)}


def call(task: dict[str, Any]) -> dict[str, Any]:
    """The whole ``loom_train`` from the table, every option but the objective's and
    ``task["options"]`` its default: its wall seconds, epochs, and the model on raw rows; after
    a first train on a few rows that pays what a process pays once (loomdb's modules, numba's
    compiled kernels from its cache), as the peer's imports happen before its clock starts."""
    from loomdb.bench.loom_runs import stored
    from loomdb.bench.objective import L2

    engine = Engine(task)
    opts = json.dumps(
        {"model": "logistic", "l2": L2, "replace": True, "progress": False, **task["options"]}
    )
    engine.rows(f"DROP TABLE IF EXISTS {FEW}")  # a previous run's, interrupted
    engine.rows(f"CREATE TABLE {FEW} AS SELECT * FROM {SOURCE} LIMIT 2000")
    started = time.perf_counter()
    engine.rows(f"SELECT {engine.loom}loom_train('{MODEL}', '{FEW}', 'y', '{opts}')")
    first = time.perf_counter() - started
    engine.rows(f"DROP TABLE {FEW}")
    started = time.perf_counter()
    engine.rows(f"SELECT {engine.loom}loom_train('{MODEL}', '{SOURCE}', 'y', '{opts}')")
    trained = stored(engine.rows, MODEL, time.perf_counter() - started)
    engine.rows(f"SELECT {engine.loom}loom_drop_model('{MODEL}')")
    return {
        "seconds": trained.wall,
        "first_s": first,
        "epochs": len(trained.epochs),
        "layout_s": trained.timings["layout_s"],
        "train_s": trained.timings["train_s"],
        "cache_mb": trained.used["cache_mb"],
        "w": trained.w.tolist(),
        "b": trained.b,
    }


def fit(task: dict[str, Any]) -> dict[str, Any]:
    """What a user does instead of ``call``: fetch the rows, z-score them and fit
    scikit-learn's lbfgs on the same objective (one BLAS thread, as loomdb steps on one core);
    the objective of this fit and of each of ``task["models"]``, on the fetched rows."""
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    from loomdb.bench.objective import L2, Objective, to_raw
    from loomdb.bench.peers import lbfgs, quiet_fit

    engine = Engine(task, with_loomdb=False)
    with threadpool_limits(limits=1):
        started = time.perf_counter()
        data = _fetched(engine)
        fetched = time.perf_counter()
        X, y = data[:, :-1], data[:, -1]
        scaler = StandardScaler()
        model = lbfgs(len(y), L2, max_iter=1000)
        quiet_fit(model, scaler.fit_transform(X), y)
        done = time.perf_counter()
        obj = Objective(X, y, L2)
        w, b = to_raw(model.coef_[0], model.intercept_[0], scaler.mean_, scaler.scale_)
        return {
            "fetch_s": fetched - started,
            "fit_s": done - fetched,
            "iterations": int(np.max(model.n_iter_)),
            "objective": obj(w, b),
            "objectives": {k: obj(np.asarray(m["w"]), m["b"]) for k, m in task["models"].items()},
        }


def _train(engine: Engine, **options: Any) -> list[dict[str, Any]]:
    opts = {"index": INDEX, "epochs": 3, "tol": 0, "model": "logistic", "replace": True}
    opts.update(progress=False, **options)
    engine.rows(f"SELECT {engine.loom}loom_train('{MODEL}', NULL, 'y', '{json.dumps(opts)}')")
    history = engine.rows(f"SELECT history FROM loom.models WHERE name = '{MODEL}'")[0][0]
    history = json.loads(history) if isinstance(history, str) else history
    return [h for h in history if "epoch" in h]


def _parallel_exists() -> bool:
    from loomdb.functions import train_options

    return "parallel" in train_options.TRAIN.names()


def train(task: dict[str, Any]) -> dict[str, Any]:
    engine = Engine(task)
    if engine.rows(f"SELECT count(*) FROM loom.indexes WHERE name = '{INDEX}'")[0][0]:
        engine.rows(
            f"SELECT {engine.loom}loom_drop_index('{INDEX}')"
        )  # a previous run's, interrupted
    opts = json.dumps({"format": task["format"]})
    started = time.perf_counter()
    engine.rows(f"SELECT {engine.loom}loom_create_index('{INDEX}', '{SOURCE}', 'y', '{opts}')")
    out: dict[str, Any] = {"layout_s": time.perf_counter() - started}
    cold = _train(engine, cache_mb=0)
    out["cold_s"] = float(np.median([h["seconds"] for h in cold]))
    warm = _train(engine)
    out["warm_s"] = float(np.median([h["seconds"] for h in warm[1:]]))
    out["loss"] = warm[-1]["loss"]
    if _parallel_exists():
        two = _train(engine, parallel=2)
        out["parallel_s"] = float(np.median([h["seconds"] for h in two[1:]]))
        out["parallel_loss"] = two[-1]["loss"]
    out["peak_mb"] = engine.peak_mb()
    engine.rows(f"SELECT {engine.loom}loom_drop_model('{MODEL}')")
    engine.rows(f"SELECT {engine.loom}loom_drop_index('{INDEX}')")
    return out


STEPS = {"make": make, "fetch": fetch, "train": train, "call": call, "fit": fit}

if __name__ == "__main__":
    task = json.loads(sys.argv[1])
    print(json.dumps(STEPS[task["step"]](task)))
