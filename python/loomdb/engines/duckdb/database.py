"""``Database`` over a DuckDB Python connection (a cursor of the user's connection).

No paper section.  A loomdb function runs on a cursor of the caller's connection (a connection
of its own to the same database), so its writes are its own transaction: ``atomic`` commits or
rolls back everything a call wrote.  Engine errors become loomdb's (``LoomConflictError`` for
a write-write race or a taken key, ``LoomDatabaseError`` otherwise) with DuckDB's message minus
the ``LINE …`` excerpt of loomdb's own query.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from loomdb.engines.duckdb.state import ConnectionState
from loomdb.errors import LoomConflictError, LoomDatabaseError, LoomError

TYPES = {
    "text": "VARCHAR",
    "double": "DOUBLE",
    "double[]": "DOUBLE[]",
    "integer[]": "INTEGER[]",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "smallint": "SMALLINT",
    "boolean": "BOOLEAN",
    "bytes": "BLOB",
    "timestamp": "TIMESTAMP",
}
KINDS = {"BOOLEAN": "boolean", "BLOB": "bytes"}
NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL(\(\d+,\s*\d+\))?)$"
)


def clean(error: BaseException) -> str:
    """DuckDB's message without the excerpt of the query that failed."""
    text = str(error)
    return re.split(r"\n\s*\nLINE \d+:|\nLINE \d+:", text)[0].strip()


def translate(error: duckdb.Error) -> LoomError:
    message = clean(error)
    if isinstance(error, duckdb.TransactionException) or (
        isinstance(error, duckdb.ConstraintException) and "PRIMARY KEY" in message.upper()
    ):
        return LoomConflictError(
            f"another loomdb call changed the same catalog rows first: {message}",
            hint="nothing was written; run the call again",
        )
    return LoomDatabaseError(message)


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except duckdb.Error as e:
        raise translate(e) from None


class DuckDatabase:
    dialect = "duckdb"

    def __init__(self, cursor: Any, state: ConnectionState):
        self.cur = cursor
        self.state = state
        self.identity = state.identity
        self._depth = 0

    def type(self, abstract: str) -> str:
        return TYPES[abstract]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with translated():
            return self.cur.execute(sql, list(params) if params else None).fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with translated():  # fetched to the end: an unfinished result blocks cursors
            self.cur.execute(sql, list(params) if params else None).fetchall()

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        table = pa.table(
            {
                c: pa.array([r[i] for r in rows], type=_arrow_type(rows, i))
                for i, c in enumerate(columns)
            }
        )
        name = "loom_insert_rows"
        with translated():
            self.cur.register(name, table)
            try:
                self.cur.execute(
                    f"INSERT INTO {relation} ({', '.join(columns)}) SELECT * FROM {name}"
                )
            finally:
                self.cur.unregister(name)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        outer = self._depth == 0
        if outer:
            self.execute("BEGIN TRANSACTION")
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if outer:
                with contextlib.suppress(duckdb.Error):
                    self.cur.execute("ROLLBACK")
            raise
        self._depth -= 1
        if outer:
            self.execute("COMMIT")

    def notice(self, message: str) -> None:
        self.state.notice(message)

    def check_interrupt(self) -> None:
        self.state.check_interrupt()

    def role(self) -> str | None:
        return None

    def is_superuser(self) -> bool:
        return True

    def as_role(self, role: str | None) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def columns(self, relation: str) -> list[tuple[str, str]]:
        rows = self.query(f"DESCRIBE SELECT * FROM {relation}")
        return [
            (name, "numeric" if NUMERIC.match(typ) else KINDS.get(typ, "other"))
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
        for rb in self._batches(relation, columns, where, shuffle_seed, chunk):
            yield np.column_stack([c.to_numpy(zero_copy_only=False) for c in rb.columns]).astype(
                np.float64, copy=False
            )

    def read_rows(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[list[tuple]]:
        for rb in self._batches(relation, columns, where, shuffle_seed, chunk):
            yield list(zip(*(c.to_pylist() for c in rb.columns)))

    def _batches(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[Any]:
        """Arrow record batches of ``columns`` in ``read_matrix``'s order."""
        filtered = f" WHERE {where}" if where else ""
        order = (
            f" ORDER BY hash(loom_rn, {int(shuffle_seed)}), loom_rn"
            if shuffle_seed is not None
            else " ORDER BY loom_rn"
        )
        values = ", ".join(f"{c} AS c{i}" for i, c in enumerate(columns))
        sql = (
            f"SELECT {values} FROM (SELECT *, row_number() OVER () AS loom_rn "
            f"FROM {relation}{filtered}) loom_a{order}"
        )
        # The source is read through a connection of its own (it is not written by loomdb), so
        # the caller can write batches on this one while the rows stream in.
        cur = self.cur.cursor()
        try:
            with translated():
                reader = cur.sql(sql).to_arrow_reader(chunk)
                for rb in reader:
                    if rb.num_rows:
                        yield rb
        finally:
            cur.close()


def _arrow_type(rows: Sequence[tuple], i: int) -> Any:
    sample = rows[0][i] if rows else None
    if isinstance(sample, (bytes, bytearray, memoryview)):
        return pa.binary()
    if isinstance(sample, int):
        return pa.int64()
    return None
