"""Fixtures shared by the test suite: both engines behind one small interface.

``engine`` is parametrised over DuckDB and PostgreSQL, so every engine-level test runs on both.
PostgreSQL comes from ``LOOMDB_TEST_DSN``, else testcontainers, else a throwaway cluster
(tests/pgserver.py).  When none can be had the PostgreSQL tests skip locally and FAIL in CI
(``CI`` set): a missing PostgreSQL is never a silent pass there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import loomdb  # noqa: E402
import pgserver  # noqa: E402
from loomdb.bench.tables import load_duckdb, load_postgres  # noqa: E402
from loomdb.datasets import shared_datasets  # noqa: E402


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    try:
        with pgserver.provision() as dsn:
            yield dsn
    except pgserver.PostgresUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI and could not be provisioned: {e}")
        pytest.skip(f"no PostgreSQL available: {e}")


class Engine:
    """Run SQL on one engine; load numpy data as tables; same calls on both engines."""

    name: str
    errors: tuple[type[BaseException], ...]

    def rows(self, sql: str) -> list[tuple]:
        raise NotImplementedError

    def scalar(self, sql: str) -> Any:
        return self.rows(sql)[0][0]

    def load(
        self,
        table: str,
        X: np.ndarray,
        y: np.ndarray | None = None,
        columns: Sequence[str] | None = None,
        label: str = "y",
    ) -> list[str]:
        raise NotImplementedError

    def array(self, columns: Sequence[str]) -> str:
        return "ARRAY[" + ", ".join(f'"{c}"' for c in columns) + "]"


class DuckEngine(Engine):
    name = "duckdb"
    errors = (loomdb.LoomError, duckdb.Error)

    def __init__(self) -> None:
        self.con = loomdb.connect()

    def rows(self, sql: str) -> list[tuple]:
        cur = self.con.execute(sql)
        return cur.fetchall() if cur.description else []

    def load(self, table, X, y=None, columns=None, label="y"):
        return load_duckdb(self.con.duckdb, table, X, y, columns, label)

    def close(self) -> None:
        self.con.close()


class PgEngine(Engine):
    name = "postgres"
    errors = (psycopg.Error,)

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.notices: list[str] = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary or ""))
        self.schema_reset()

    def schema_reset(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("DELETE FROM loom.models")
            cur.execute("SELECT storage_table FROM loom.indexes")
            for (t,) in cur.fetchall():
                cur.execute(f"DROP TABLE IF EXISTS {t}")
            cur.execute("DELETE FROM loom.indexes")
            cur.execute("DROP SCHEMA IF EXISTS loomtest CASCADE")
            cur.execute("CREATE SCHEMA loomtest")
            cur.execute("SET search_path = loomtest, public")

    def rows(self, sql: str) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall() if cur.description else []

    def load(self, table, X, y=None, columns=None, label="y"):
        return load_postgres(self.conn, table, X, y, columns, label)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request) -> Iterator[Engine]:
    if request.param == "duckdb":
        e: Engine = DuckEngine()
    else:
        e = PgEngine(request.getfixturevalue("pg_dsn"))
    yield e
    e.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def datasets() -> Path:
    path = shared_datasets()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("../shared/datasets is missing in CI")
        pytest.skip("the shared datasets folder (../shared/datasets) is absent")
    return path
