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
        import pyarrow as pa

        columns = list(columns or [f"x{i}" for i in range(X.shape[1])])
        data = {c: pa.array(X[:, i], from_pandas=True) for i, c in enumerate(columns)}
        if y is not None:
            data[label] = pa.array(y, from_pandas=True)  # NaN → NULL, as in PostgreSQL
        self.con.duckdb.register("loom_test_arrow", pa.table(data))
        self.con.duckdb.execute(
            f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM loom_test_arrow'
        )
        self.con.duckdb.unregister("loom_test_arrow")
        return columns

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
        columns = list(columns or [f"x{i}" for i in range(X.shape[1])])
        names = columns + ([label] if y is not None else [])
        data = np.column_stack([X, y]) if y is not None else X
        cols_sql = ", ".join(f'"{c}" double precision' for c in names)
        with self.conn.cursor() as cur:
            cur.execute(f'DROP TABLE IF EXISTS "{table}"')
            cur.execute(f'CREATE TABLE "{table}" ({cols_sql})')
            with cur.copy(f'COPY "{table}" FROM STDIN') as copy:
                for row in data:
                    copy.write_row([None if v != v else float(v) for v in row])
        return columns

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
