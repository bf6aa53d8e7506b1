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
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa  # (pyarrow.compute, 30 ms to import, only where it is used)

from loomdb.csr import CsrRows
from loomdb.engines.duckdb import memory
from loomdb.engines.duckdb.state import ConnectionState
from loomdb.errors import (
    LoomConflictError,
    LoomDatabaseError,
    LoomDataError,
    LoomError,
    LoomNotFoundError,
)
from loomdb.store.names import quote_ident

TYPES = {
    "text": "VARCHAR",
    "double": "DOUBLE",
    "double[]": "DOUBLE[]",
    "integer[]": "INTEGER[]",
    "bigint[]": "BIGINT[]",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "smallint": "SMALLINT",
    "boolean": "BOOLEAN",
    "bytes": "BLOB",
    "timestamp": "TIMESTAMP",
}
STAGED_NAME = re.compile(r"^staged\$[0-9a-f]{32}$")  # storage.staged_relation's tables
_STAGING: set[tuple[str, str]] = set()  # (database, relation) of the layouts this process runs
#: DuckDB's message for a read of loomdb's catalog (or storage) schema where there is none
NO_CATALOG = re.compile(r'schema "loom(_data)?" does not exist')
KINDS = {"BOOLEAN": "boolean", "BLOB": "bytes", "VARCHAR": "text"}
NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL(\(\d+,\s*\d+\))?)$"
)
INTEGER_LIST = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER)\[\d*\]$")
NUMBER_LIST = re.compile(r"^(FLOAT|DOUBLE|REAL|DECIMAL(\(\d+,\s*\d+\))?|UBIGINT|HUGEINT)\[\d*\]$")


def column_kind(typ: str) -> str:
    """numeric | boolean | bytes | text | integer[] | double[] | other
    (``store.db.Queryable.columns``)."""
    if NUMERIC.match(typ):
        return "numeric"
    if typ in KINDS:
        return KINDS[typ]
    if INTEGER_LIST.match(typ):
        return "integer[]"
    return "double[]" if NUMBER_LIST.match(typ) else "other"


def clean(error: BaseException) -> str:
    """DuckDB's message without the excerpt of the query that failed."""
    text = str(error)
    return re.split(r"\n\s*\nLINE \d+:|\nLINE \d+:", text)[0].strip()


def translate(error: duckdb.Error, read_only: bool = False) -> LoomError:
    """loomdb's error for DuckDB's ``error``; ``read_only``: the database is open read-only,
    where loomdb's catalog is never created."""
    message = clean(error)
    if read_only and isinstance(error, duckdb.CatalogException) and NO_CATALOG.search(message):
        return LoomNotFoundError(
            "this database has no loomdb catalog: no model was trained in it",
            hint="open it writable once (loomdb.connect(path) without read_only=True) to "
            "create the catalog, and train a model there",
        )
    # A transaction error is a race only where DuckDB says so ("write-write conflict", "Conflict
    # on update", or a key another transaction committed first, which DuckDB finds only at
    # COMMIT: "Failed to commit: PRIMARY KEY or UNIQUE constraint violation"): a commit that
    # failed for want of disk space is not one, and running the call again would not help.
    said = message.upper()
    race = isinstance(error, duckdb.TransactionException) and (
        "CONFLICT" in said or "PRIMARY KEY" in said
    )
    if race or (isinstance(error, duckdb.ConstraintException) and "PRIMARY KEY" in said):
        return LoomConflictError(
            f"another loomdb call changed the same catalog rows first: {message}",
            hint="nothing was written; run the call again",
        )
    return LoomDatabaseError(message)


@contextmanager
def translated(read_only: bool = False) -> Iterator[None]:
    try:
        yield
    except duckdb.Error as e:
        raise translate(e, read_only) from None


class DuckDatabase:
    dialect = "duckdb"
    concurrent_reads = True  # DuckDB runs a statement without Python's lock; _cursor serialises

    def __init__(self, cursor: Any, state: ConnectionState):
        self.cur = cursor
        self.state = state
        self.identity = state.identity
        self._depth = 0
        self._lock = threading.Lock()

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        """The cursor, for one statement at a time whatever thread asks (a reader queries
        its next page from a thread of its own: ``store.read_ahead``), errors translated."""
        with self._lock, translated(self.state.read_only):
            yield self.cur

    def close(self) -> None:
        """Close the cursor once no statement runs on it: a reader's next page may still be
        under way when the call that read it fails."""
        with self._lock:
            self.cur.close()

    def type(self, abstract: str) -> str:
        return TYPES[abstract]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._cursor() as cur:
            return cur.execute(sql, list(params) if params else None).fetchall()

    def query_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Through Arrow: BLOBs come back as views of the result's buffers, not as ``bytes``
        (DuckDB's ``fetchall`` copies each into a Python object)."""
        with self._cursor() as cur:
            table = cur.sql(sql, params=list(params) if params else None).to_arrow_table()
        return list(zip(*(_python_values(c) for c in table.columns)))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._cursor() as cur:  # fetched to the end: an unfinished result blocks cursors
            cur.execute(sql, list(params) if params else None).fetchall()

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        table = pa.table({c: _arrow_array([r[i] for r in rows]) for i, c in enumerate(columns)})
        name = "loom_insert_rows"
        with self._cursor() as cur:
            cur.register(name, table)
            try:
                cur.execute(f"INSERT INTO {relation} ({', '.join(columns)}) SELECT * FROM {name}")
            finally:
                cur.unregister(name)

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
                with contextlib.suppress(LoomError):
                    self.execute("ROLLBACK")
            raise
        self._depth -= 1
        if outer:
            self.execute("COMMIT")

    @contextmanager
    def staged(self, relation: str) -> Iterator[None]:
        # An uncommitted table's BLOBs stay in memory until COMMIT, whatever memory_limit says
        # (measured: 1.6 GB of payloads inserted in one transaction took 2.8 GB with a 1 GB
        # limit, 1.2 GB in autocommit), so outside a transaction each write commits at once.
        self._drop_abandoned()
        key = (self.identity, relation)
        _STAGING.add(key)
        try:
            yield
        except BaseException:
            if self._depth == 0:  # else the enclosing transaction's rollback removes it
                with contextlib.suppress(LoomError):
                    self.execute(f"DROP TABLE IF EXISTS {relation}")
            raise
        finally:
            _STAGING.discard(key)

    def _drop_abandoned(self) -> None:
        """Drop the staged tables of layouts whose process ended mid-way: one process at a time
        writes a DuckDB file, so a staged table this process is not filling is abandoned."""
        for (name,) in self.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'loom_data' "
            "AND table_catalog = current_database() AND starts_with(table_name, 'staged$')"
        ):
            relation = f"loom_data.{quote_ident(name)}"
            if STAGED_NAME.match(name) and (self.identity, relation) not in _STAGING:
                self.execute(f"DROP TABLE IF EXISTS {relation}")

    def cache_default_mb(self) -> int:
        (limit,) = self.query("SELECT current_setting('memory_limit')")[0]
        return memory.cache_default_mb(limit)

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
        return [(name, column_kind(typ)) for name, typ, *_ in rows]

    def define_function(
        self, name: str, params: Sequence[tuple[str, str]], expression: str, returns: str = "double"
    ) -> None:  # a macro's result is untyped too
        names = ", ".join(p for p, _ in params)  # a macro's parameters are untyped
        self.execute(f"CREATE OR REPLACE MACRO {name}({names}) AS {expression}")

    def drop_function(self, schema: str, function: str, arity: int) -> None:
        # DROP MACRO drops the name at any arity: a macro of another arity is not the one
        # loomdb deployed (the user dropped that and made their own), so it stays
        if self.function_exists(schema, function, arity):
            self.execute(f"DROP MACRO IF EXISTS {quote_ident(schema)}.{quote_ident(function)}")

    def function_exists(self, schema: str, function: str, arity: int) -> bool:
        rows = self.query(
            "SELECT count(*) FROM duckdb_functions() WHERE lower(schema_name) = lower($1) "
            "AND lower(function_name) = lower($2) AND len(parameters) = $3 "
            "AND database_name = current_database()",  # names in any case, as DuckDB's
            [schema, function, arity],
        )
        return bool(rows[0][0])

    def functions_named(self, schema: str, function: str) -> list[tuple[str, str, int]]:
        # an unqualified call finds a TEMP macro first and a user's macro before a built-in;
        # CREATE OR REPLACE MACRO replaces a macro of any arity and of the name in any case
        rows = self.query(
            "SELECT CASE WHEN database_name = current_database() THEN schema_name "
            "ELSE database_name || '.' || schema_name END, function_name, len(parameters) "
            "FROM duckdb_functions() WHERE lower(function_name) = lower($2) "
            "AND (database_name IN ('system', 'temp') OR (database_name = current_database() "
            "AND lower(schema_name) = lower($1))) ORDER BY ALL",
            [schema, function],
        )
        return [(str(s), str(f), int(n)) for s, f, n in rows]

    def fold_name(self, name: str) -> str:
        return name.lower()

    def signature(
        self, relation: str, columns: Sequence[str], where: str | None, like: str | None = None
    ) -> str:
        filtered = f" WHERE {where}" if where else ""
        n, total = self.query(
            f"SELECT count(*), sum(hash({', '.join(columns)})) FROM {relation}{filtered}"
        )[0]
        return f"{n}:{total}"

    def signature_and_versions(
        self, relation: str, columns: Sequence[str], where: str | None, table: str
    ) -> tuple[str, str | None]:
        return self.signature(relation, columns, where), None

    def row_versions(self, table: str) -> str | None:
        return None  # DuckDB names no row version: the fingerprint is the check

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
        rows: int | None = None,
    ) -> Iterator[np.ndarray]:
        values = ", ".join(f"{c} AS c{i}" for i, c in enumerate(columns))
        for rb in self._batches(_shuffled(relation, values, where, shuffle_seed), chunk):
            yield _row_major([c.to_numpy(zero_copy_only=False) for c in rb.columns])

    def read_rows(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[list[tuple]]:
        values = ", ".join(f"{c} AS c{i}" for i, c in enumerate(columns))
        for rb in self._batches(_shuffled(relation, values, where, shuffle_seed), chunk):
            yield list(zip(*(c.to_pylist() for c in rb.columns)))

    def read_sparse(
        self,
        relation: str,
        label: str,
        indices: str,
        values: str,
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
        width: int,
        rows: int | None = None,
    ) -> Iterator[tuple[np.ndarray, CsrRows]]:
        listed = (
            f"CAST({label} AS DOUBLE) AS c0, CAST({indices} AS BIGINT[]) AS c1, "
            f"CAST({values} AS DOUBLE[]) AS c2"
        )
        for rb in self._batches(_shuffled(relation, listed, where, shuffle_seed), chunk):
            y = rb.column(0).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            yield y, _csr(rb.column(1), rb.column(2), width)

    def _batches(self, sql: str, chunk: int) -> Iterator[Any]:
        # The source is read through a connection of its own (it is not written by loomdb), so
        # the caller can write batches on this one while the rows stream in.
        with self._cursor() as own:
            cur = own.cursor()
        try:
            with translated():
                self.state.follow(cur)  # the source's names resolve as on the caller's
                for rb in cur.sql(sql).to_arrow_reader(chunk):
                    if rb.num_rows:
                        yield rb
        finally:
            cur.close()


def _shuffled(relation: str, listed: str, where: str | None, seed: int | None) -> str:
    """``SELECT listed`` from ``relation`` in its stored order or a seeded shuffle of it.

    The rows are sorted before ``listed`` is computed: a sort moves every value it is given, and
    an encoded source's features outnumber its columns (one text column one-hot encoded to 64
    features, 2M rows: 1.8 s to read with the features sorted, 0.7 s with the columns sorted
    and the features computed after).  DuckDB keeps a subquery's order through a SELECT from it
    alone (its "order preservation" rules)."""
    filtered = f" WHERE {where}" if where else ""
    order = f"hash(loom_rn, {int(seed)}), loom_rn" if seed is not None else "loom_rn"
    numbered = f"SELECT *, row_number() OVER () AS loom_rn FROM {relation}{filtered}"
    return f"SELECT {listed} FROM (SELECT * FROM ({numbered}) loom_a ORDER BY {order}) loom_s"


ROW_BLOCK = 2048  # rows copied at a time by ``_row_major``


def _row_major(columns: list[np.ndarray]) -> np.ndarray:
    """The columns as one row-major float64 matrix, filled a block of rows at a time, so the
    rows being written stay in cache (``np.column_stack`` writes each column down the whole
    chunk: 6.3 against 2.7 ms for 65,536 rows × 21 columns here)."""
    n = len(columns[0]) if columns else 0
    out = np.empty((n, len(columns)))
    for start in range(0, n, ROW_BLOCK):
        block = slice(start, start + ROW_BLOCK)
        for j, column in enumerate(columns):
            out[block, j] = column[block]
    return out


def _csr(indices: Any, values: Any, width: int) -> CsrRows:
    """Two arrow list columns (one row each) as CSR rows; NULL lists or elements refused."""
    import pyarrow.compute as pc

    if indices.null_count or values.null_count:
        raise LoomDataError("a sparse row has a NULL indices or values array")
    lengths = pc.list_value_length(indices).to_numpy(zero_copy_only=False)
    if not np.array_equal(lengths, pc.list_value_length(values).to_numpy(zero_copy_only=False)):
        raise LoomDataError(
            "a row's indices and values arrays have different lengths",
            hint="each index needs exactly one value",
        )
    flat_i, flat_v = pc.list_flatten(indices), pc.list_flatten(values)
    if flat_i.null_count or flat_v.null_count:
        raise LoomDataError("a sparse row holds a NULL index or value")
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return CsrRows(
        indptr,
        flat_i.to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
        flat_v.to_numpy(zero_copy_only=False).astype(np.float64, copy=False),
        width,
    )


def _python_values(column: pa.ChunkedArray) -> list[Any]:
    """A column's values; binary ones as memoryviews of the column's own buffer."""
    if not pa.types.is_binary(column.type) and not pa.types.is_large_binary(column.type):
        return column.to_pylist()
    width = np.int32 if pa.types.is_binary(column.type) else np.int64
    out: list[Any] = []
    for chunk in column.chunks:
        _, offsets, data = chunk.buffers()
        ends = np.frombuffer(offsets, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        view = memoryview(data) if data is not None else memoryview(b"")
        bounds = ends.tolist()
        out.extend(view[a:b] for a, b in zip(bounds, bounds[1:]))
        if chunk.null_count:
            for i in np.flatnonzero(chunk.is_null().to_numpy(zero_copy_only=False)).tolist():
                out[len(out) - len(chunk) + i] = None
    return out


def _arrow_array(values: list[Any]) -> Any:
    """One column of rows to insert.  BLOBs are joined into one buffer with their offsets:
    ``pa.array`` over Python bytes took 0.8 s for 160 MB of payloads (a join takes 0.07 s)."""
    sample = values[0] if values else None
    if isinstance(sample, (bytes, bytearray, memoryview)):
        if any(v is None for v in values):
            return pa.array(values, type=pa.binary())
        data = b"".join(values)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum([memoryview(v).nbytes for v in values], out=offsets[1:])
        large = offsets[-1] >= 1 << 31  # binary's offsets are int32
        kind, width = (pa.large_binary(), np.int64) if large else (pa.binary(), np.int32)
        buffers = [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, len(values), buffers)
    return pa.array(values, type=pa.int64() if isinstance(sample, int) else None)
