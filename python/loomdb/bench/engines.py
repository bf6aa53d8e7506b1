"""Open the engines a benchmark compares: embedded DuckDB always, PostgreSQL when a DSN is given.
No paper section."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.bench.tables import load_duckdb, load_postgres


@dataclass
class BenchEngine:
    name: str
    run: Callable[[str], list[tuple]]
    load: Callable[..., list[str]]
    raw: Any = None  # the engine's own connection (duckdb / psycopg), for what a user would do
    loom: str = ""  # what a call of loomdb's function is prefixed with (:func:`loom_prefix`)

    def scalar(self, sql: str) -> Any:
        return self.run(sql)[0][0]

    def timed(self, sql: str, repeat: int = 1) -> float:
        """Best wall time of ``repeat`` runs of ``sql``, in seconds."""
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            self.run(sql)
            best = min(best, time.perf_counter() - started)
        return best


def loom_prefix(conn: Any) -> str:
    """``"schema".``, the loomdb extension's schema on the psycopg connection ``conn``: the
    bench names it in every call of loomdb's functions, as loomdb's other clients do
    (``client.extension_schema``), so that a function of the same signature another role made
    in a schema earlier on the search_path is never the one run."""
    from loomdb.engines.postgres.client import PsycopgDatabase, extension_schema
    from loomdb.store.names import quote_ident

    return quote_ident(extension_schema(PsycopgDatabase(conn))) + "."


@contextmanager
def engines(dsn: str | None) -> Iterator[list[BenchEngine]]:
    import loomdb

    con = loomdb.connect()
    found = [
        BenchEngine(
            "duckdb",
            lambda sql: con.execute(sql).fetchall(),
            lambda *a, **k: load_duckdb(con.duckdb, *a, **k),
            con.duckdb,
        )
    ]
    conn = None
    if dsn:
        import psycopg

        conn = psycopg.connect(dsn, autocommit=True)

        def run_pg(sql: str) -> list[tuple]:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else []

        run_pg("DROP SCHEMA IF EXISTS loombench CASCADE")
        run_pg("CREATE SCHEMA loombench")
        run_pg("SET search_path = loombench, public")
        found.append(
            BenchEngine(
                "postgres",
                run_pg,
                lambda *a, **k: load_postgres(conn, *a, **k),
                conn,
                loom_prefix(conn),
            )
        )
    try:
        yield found
    finally:
        con.close()
        if conn is not None:
            conn.execute("DROP SCHEMA IF EXISTS loombench CASCADE")
            conn.close()


def binary_datasets(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Real binary tasks: a9a.t and MNIST (digit < 5); synthetic when the files are absent."""
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    folder = shared_datasets()
    if folder is None:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(4000 if quick else 20000, 50))
        return [("synthetic", X, (X @ rng.normal(size=50) > 0).astype(float))]
    Xa, ya = load_a9a(folder)
    Xm, ym = load_mnist(folder, limit=2000 if quick else None)
    if quick:
        Xa, ya = Xa[:3000], ya[:3000]
    return [("a9a.t", Xa, (ya > 0).astype(float)), ("mnist<5", Xm, (ym < 5).astype(float))]
