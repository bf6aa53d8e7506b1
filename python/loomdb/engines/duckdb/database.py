"""``Database`` over a DuckDB Python connection (a cursor of the user's connection)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

TYPES = {
    "text": "VARCHAR",
    "double": "DOUBLE",
    "double[]": "DOUBLE[]",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "bytes": "BLOB",
    "timestamp": "TIMESTAMP",
}
NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL(\(\d+,\s*\d+\))?)$"
)
progress_log = logging.getLogger("loomdb.progress")


class DuckDatabase:
    dialect = "duckdb"
    catalog_private = True  # an embedded database: only this process writes its catalog

    def __init__(self, cursor: Any, cache_key: Any = None):
        self.cur = cursor
        self.cache_key = cache_key if cache_key is not None else cursor
        self._depth = 0

    def type(self, abstract: str) -> str:
        return TYPES[abstract]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.cur.execute(sql, list(params) if params else None).fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.cur.execute(sql, list(params) if params else None)

    def stream(self, sql: str, params: Sequence[Any] = (), size: int = 16) -> Iterator[tuple]:
        # A DuckDB result ends when the connection runs another statement, and another
        # connection would not see this transaction's rows: so the result is fetched whole.
        # Callers that read much (formats reading batches) page with WHERE ranges.
        yield from self.query(sql, params)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        outer = self._depth == 0
        if outer:
            self.cur.execute("BEGIN TRANSACTION")
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if outer:
                self.cur.execute("ROLLBACK")
            raise
        self._depth -= 1
        if outer:
            self.cur.execute("COMMIT")

    def notice(self, message: str) -> None:
        progress_log.info(message)

    def columns(self, relation: str) -> list[tuple[str, str]]:
        rows = self.cur.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        return [
            (name, "numeric" if NUMERIC.match(typ) else "boolean" if typ == "BOOLEAN" else "other")
            for name, typ, *_ in rows
        ]

    def signature(self, relation: str, columns: Sequence[str], where: str | None) -> str:
        filtered = f" WHERE {where}" if where else ""
        n, total = self.query(
            f"SELECT count(*), sum(hash({', '.join(columns)})) FROM {relation}{filtered}"
        )[0]
        return f"{n}:{total}"

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[np.ndarray]:
        values = ", ".join(f"CAST({c} AS DOUBLE)" for c in columns)
        filtered = f" WHERE {where}" if where else ""
        order = (
            f" ORDER BY hash(loom_rn, {int(shuffle_seed)}), loom_rn"
            if shuffle_seed is not None
            else " ORDER BY loom_rn"
        )
        sql = (
            f"SELECT {values} FROM (SELECT *, row_number() OVER () AS loom_rn "
            f"FROM {relation}{filtered}) loom_a{order}"
        )
        # The source is read through a connection of its own (it is not written by loomdb), so
        # the caller can write batches on this one while the rows stream in.
        cur = self.cur.cursor()
        try:
            reader = cur.sql(sql).to_arrow_reader(chunk)
            for rb in reader:
                if rb.num_rows:
                    yield np.column_stack(
                        [c.to_numpy(zero_copy_only=False) for c in rb.columns]
                    ).astype(np.float64, copy=False)
        finally:
            cur.close()
