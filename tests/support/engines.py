"""Both engines behind one small interface, so engine-level tests run the same SQL on both."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg

import loomdb
from loomdb.bench.tables import load_duckdb, load_postgres


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

    def close(self) -> None:
        raise NotImplementedError


class DuckEngine(Engine):
    name = "duckdb"
    errors = (loomdb.LoomError, duckdb.Error)

    def __init__(self, path: str | None = None) -> None:
        self.con = loomdb.connect(path, progress=False)

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

    def __init__(self, dsn: str, reset: bool = True) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.notices: list[str] = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary or ""))
        if reset:
            self.reset()

    def reset(self) -> None:
        """Drop every index and model (through loomdb's functions) and a fresh test schema
        (first: a CREATE INDEX … USING index goes with its relation, not loom_drop_index)."""
        self.rows("DROP SCHEMA IF EXISTS loomtest CASCADE")
        self.rows("SELECT loom_drop_index(name) FROM loom.indexes")
        self.rows("SELECT loom_drop_model(name) FROM loom.models")
        self.rows("CREATE SCHEMA loomtest")
        self.rows("SET search_path = loomtest, public")

    def rows(self, sql: str) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def load(self, table, X, y=None, columns=None, label="y"):
        return load_postgres(self.conn, table, X, y, columns, label)

    def close(self) -> None:
        self.rows("SELECT loom_drop_index(name) FROM loom.indexes")  # leave the server clean
        self.rows("SELECT loom_drop_model(name) FROM loom.models")
        self.conn.close()


def readable_dir() -> Path:
    """A fresh directory every OS user can read: the PostgreSQL server reads files from it."""
    path = Path(tempfile.mkdtemp(prefix="loomdb-files-"))
    path.chmod(0o755)
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # the test run leaves none behind
    return path
