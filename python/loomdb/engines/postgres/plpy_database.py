"""``Database`` over ``plpy``, inside the PostgreSQL server (plpython3u).  No paper section.

Values are bound through ``plpy.prepare`` with typed parameters (plans cached per statement
text and types); rows stream through ``plpy.cursor(...).fetch(n)``; minibatch rows travel from
SQL packed as one ``bytea`` per chunk (``array_send`` of a float8[] per row, concatenated by
``string_agg``; a sparse row's two arrays likewise), never as one Python object per value,
and are written back as arrays (``unnest``), one statement per page.  Errors PostgreSQL
raises come out as loomdb errors carrying its message; a cancel (``pg_cancel_backend``,
``statement_timeout``) as ``LoomInterrupted``, noticed within ``INTERRUPT_EVERY_S`` because
``check_interrupt`` runs a trivial statement (which is where PostgreSQL checks for a pending
cancel).
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from loomdb.csr import CsrRows
from loomdb.engines.postgres.dialect import (
    COLUMN_HASH,
    DETERMINISTIC,
    FIRST_USER_OID,
    VERSIONED_COLUMNS,
    VERSIONS,
    array_rows,
    column_kind,
    decode_packed_rows,
    decode_packed_sparse,
    hashing,
    packed_rows_query,
    packed_sparse_query,
    param_type,
    rows_from,
    rows_query,
    signature_query,
    type_name,
    versions_query,
)
from loomdb.errors import (
    LoomConflictError,
    LoomDatabaseError,
    LoomError,
    LoomInterrupted,
    LoomOptionError,
    LoomStateError,
)
from loomdb.store.budget import BACKEND_CACHE_MB
from loomdb.store.names import literal, quote_ident

# the argument types of the functions loom_deploy makes, by type oid
DEPLOYED_TYPES = {701: "double precision", 25: "text", 16: "boolean"}
INTERRUPT_EVERY_S = 0.1
BLOB_ROWS = 16  # rows a cursor fetches at a time in query_blobs
CONFLICTS = {"23505", "40001", "40P01"}  # unique key, serialization, deadlock
READ_ONLY = "25006"  # read_only_sql_transaction
#: what PL/Python writes before a loomdb error's message: the name of its class (raise_error)
ERROR_PREFIX = "loomdb: "
_plans: dict[tuple[str, tuple[str, ...]], Any] = {}


def message_of(error: Exception) -> str:
    """The message of an error PostgreSQL raised, without the prefix PL/Python gave it when
    it came from loomdb (a loomdb function that a statement of this one called)."""
    message = str(error.args[0]) if error.args else str(error)
    return message.removeprefix(ERROR_PREFIX)


def raise_error(plpy: Any, e: LoomError) -> None:
    """``e`` as PostgreSQL's error, its detail, hint and SQLSTATE: how every loomdb function,
    the parallel epoch's aggregate too, ends in an error.  PL/Python writes the class of the
    exception before its message, with its module unless that is ``builtins``: a
    ``plpy.Error`` reads ``plpy.Error: …``, this subclass of it ``loomdb: …``."""
    error = _error_class(plpy.Error)(e.message)
    error.sqlstate = e.sqlstate
    for key, value in (("detail", e.detail), ("hint", e.hint)):
        if value:
            setattr(error, key, value)
    raise error from None


@functools.cache
def _error_class(base: type) -> type:
    name = ERROR_PREFIX.removesuffix(": ")
    return type(name, (base,), {"__module__": "builtins"})


def translate(error: Exception) -> LoomError:
    return from_sqlstate(getattr(error, "sqlstate", None), message_of(error))


def from_sqlstate(
    state: str | None, message: str, hint: str | None = None, detail: str | None = None
) -> LoomError:
    """The LoomError for PostgreSQL's error of SQLSTATE ``state`` (inside the server or out)."""
    if state == "57014":
        return LoomInterrupted("interrupted: the statement was cancelled")
    if state in CONFLICTS:
        return LoomConflictError(
            f"another session changed the same rows first: {message}",
            hint="nothing was written; run the call again",
        )
    if state == READ_ONLY:  # a READ ONLY transaction, or a standby: the call writes
        return LoomStateError(
            f"{message}: this loomdb call writes its catalog or storage tables",
            hint="run it in a READ WRITE transaction (BEGIN READ WRITE; or SET "
            "default_transaction_read_only = off) on the primary server, not a standby",
        )
    return LoomDatabaseError(message, hint=hint, detail=detail)


class PlpyDatabase:
    dialect = "postgres"
    identity = "postgres-session"  # a session is bound to one database
    concurrent_reads = False  # SPI runs in the backend's own thread only

    def __init__(self, plpy: Any):
        self.plpy = plpy
        self._checked = time.monotonic()
        self._analyzed: set[str] = set()

    def type(self, abstract: str) -> str:
        return type_name(abstract)

    def _plan(self, sql: str, params: Sequence[Any]) -> Any:
        types = tuple(param_type(v) for v in params)
        key = (sql, types)
        plan = _plans.get(key)
        if plan is None:
            plan = _plans[key] = self.plpy.prepare(sql, list(types))
        return plan

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        try:
            if not params:
                return self.plpy.execute(sql)
            return self.plpy.execute(self._plan(sql, params), list(params))
        except self.plpy.SPIError as e:
            raise translate(e) from None

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        result = self._run(sql, params)
        try:
            cols = result.colnames()
        except Exception:  # plpy raises for statements that return no rows
            return []
        if len(set(cols)) != len(cols):  # rows are dicts: every column needs its own name
            raise ValueError(f"duplicate column names in a loomdb query: {cols}")
        return [tuple(row[c] for c in cols) for row in result]

    def query_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Through a cursor, ``BLOB_ROWS`` rows a fetch: PL/Python hands each bytea over as
        ``bytes`` (one copy out of the detoasted datum; there is no way to borrow it).  Measured
        on 8,000 stored rows: a cursor costs 0.6–0.7 of ``plpy.execute``'s CPU (which builds
        every row of the result first) and a third of ``string_agg`` into one bytea."""
        return list(self.stream(sql, params, size=BLOB_ROWS))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._run(sql, params)

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Rows as one ``INSERT … SELECT … FROM unnest(…)`` of arrays: a column of scalars as
        an array, a column of arrays as one flat array sliced per row (``array_rows``)."""
        if not rows:
            return
        try:
            if any(isinstance(v, (list, tuple)) for v in rows[0]):
                types = self._column_types(relation, len(columns))
                sql, kinds, params = array_rows(relation, columns, types, rows)
                self.plpy.execute(self.plpy.prepare(sql, kinds), params)
                return
            arrays = [[r[i] for r in rows] for i in range(len(columns))]
            kinds = self._scalar_kinds(relation, arrays)
            arrays_sql = [f"${i + 1}::{k}" for i, k in enumerate(kinds)]
            fields = [f"c{i}" for i in range(len(kinds))]
            sql = (
                f"INSERT INTO {relation} ({', '.join(columns)}) "
                f"SELECT * FROM {rows_from(arrays_sql, fields)}"
            )
            self.plpy.execute(self.plpy.prepare(sql, kinds), arrays)
        except self.plpy.SPIError as e:
            raise translate(e) from None

    def _scalar_kinds(self, relation: str, arrays: list[list[Any]]) -> list[str]:
        """Each column's array type: its values' (``param_type``), or, where every value is
        NULL (a private layout's checksums), the table's own column type."""
        samples = [next((v for v in a if v is not None), None) for a in arrays]
        unknown = any(s is None for s in samples)
        declared = self._column_types(relation, len(arrays)) if unknown else []
        return [(declared[i] if s is None else param_type(s)) + "[]" for i, s in enumerate(samples)]

    def _column_types(self, relation: str, count: int) -> list[str]:
        rows = self.query(
            "SELECT pg_catalog.format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
            "WHERE attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass::pg_catalog.oid "
            "AND attnum OPERATOR(pg_catalog.>) CAST(0 AS pg_catalog.int2) AND NOT attisdropped "
            "ORDER BY attnum",
            [relation],
        )
        return [r[0] for r in rows[:count]]

    def stream(self, sql: str, params: Sequence[Any] = (), size: int = 16) -> Iterator[tuple]:
        try:
            if params:
                cursor = self.plpy.cursor(self._plan(sql, params), list(params))
            else:
                cursor = self.plpy.cursor(sql)
            cols: list[str] | None = None
            while True:
                rows = cursor.fetch(size)
                if not rows:
                    break
                if cols is None:  # fetch() results carry no column list: rows are ordered dicts
                    cols = list(rows[0].keys())
                for row in rows:
                    yield tuple(row[c] for c in cols)
        except self.plpy.SPIError as e:
            raise translate(e) from None

    def atomic(self) -> AbstractContextManager[Any]:
        return self.plpy.subtransaction()

    def staged(self, relation: str) -> AbstractContextManager[Any]:
        return self.plpy.subtransaction()

    def cache_default_mb(self) -> int:
        return BACKEND_CACHE_MB

    def notice(self, message: str) -> None:
        self.plpy.notice(message)

    def check_interrupt(self) -> None:
        now = time.monotonic()
        if now - self._checked >= INTERRUPT_EVERY_S:
            self._checked = now
            self._run("SELECT 1", ())

    def role(self) -> str | None:
        return str(self.query("SELECT current_user")[0][0])

    def is_superuser(self) -> bool:
        rows = self.query("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user")
        return bool(rows and rows[0][0])

    @contextmanager
    def as_role(self, role: str | None) -> Iterator[None]:
        """Run the block as ``role`` (another role's index: its SQL may call its functions), in
        a security-restricted operation (``index_am/loomdb_owner.c``), as PostgreSQL's REINDEX
        runs an index owner's expressions: under ``SET ROLE`` the role's code could ``RESET
        ROLE`` and act as this session's user, a superuser.  The block's end checks that the
        role's code left ``search_path`` as it was (the setting that chooses the code later
        statements call): a change is put back and refused."""
        if role is None or role == self.role():
            yield
            return
        if not self.function_exists("loom", "_owner_begin", 1):
            raise LoomStateError(
                f"this runs SQL that role {role} owns (its index's source, its storage table), "
                "which loomdb runs only in a security-restricted operation, and loomdb's C module "
                "(loomdb_owner) is not installed here",
                hint=f"let {role} run it, or install the C module: loomdb pg install builds it "
                "where PostgreSQL's server headers (postgresql-server-dev) are installed",
            )
        path = self.query("SELECT pg_catalog.current_setting('search_path')")[0][0]
        key = self.query("SELECT loom._owner_begin(CAST($1 AS name))", [role])[0][0]
        try:
            yield
        finally:
            self.execute("SELECT loom._owner_end(CAST($1 AS bigint))", [key])
        now = self.query("SELECT pg_catalog.current_setting('search_path')")[0][0]
        if now != path:
            self.execute("SELECT pg_catalog.set_config('search_path', $1, false)", [path])
            raise LoomStateError(
                f"SQL of role {role} that loomdb ran changed search_path (to {now!r}); it was "
                "put back and the call refused",
                hint=f"ask {role} why its source or table policies set search_path",
            )

    def columns(self, relation: str) -> list[tuple[str, str]]:
        result = self._run(f"SELECT * FROM {relation} LIMIT 0", ())
        return [(n, column_kind(t)) for n, t in zip(result.colnames(), result.coltypes())]

    def define_function(
        self, name: str, params: Sequence[tuple[str, str]], expression: str, returns: str = "double"
    ) -> None:
        most = int(self.query("SELECT pg_catalog.current_setting('max_function_args')")[0][0])
        if len(params) > most:
            raise LoomOptionError(
                f"a PostgreSQL function takes at most {most} arguments, and {name} would take "
                f"{len(params)} (one per source column of the model)",
                hint="predict with loom_predict_sql(model)'s expression in a SELECT or a view, "
                "or with loom_predict(model, row); a deployed model retrained on that many "
                "columns needs its function dropped first: "
                """loom_deploy(model, '{"drop": true}')""",
            )
        typed = ", ".join(f"{p} {type_name(kind)}" for p, kind in params)
        body = literal(f"SELECT {expression}")  # read alike whatever the string settings
        self.execute(
            f"CREATE OR REPLACE FUNCTION {name}({typed}) RETURNS {type_name(returns)} "
            f"LANGUAGE sql IMMUTABLE PARALLEL SAFE AS {body}"
        )

    def _signatures(self, schema: str, function: str, arity: int) -> list[tuple]:
        """The argument type oids of each ``schema.function`` taking ``arity`` arguments."""
        return self.query(
            "SELECT p.proargtypes::oid[] AS types FROM pg_catalog.pg_proc p "
            "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = $1 AND p.proname = $2 AND p.pronargs = $3",
            [schema, function, arity],
        )

    def drop_function(self, schema: str, function: str, arity: int) -> None:
        """Drop ``schema.function`` taking ``arity`` doubles, texts or booleans (what loomdb
        deploys)."""
        name = f"{quote_ident(schema)}.{quote_ident(function)}"
        for (oids,) in self._signatures(schema, function, arity):
            types = [DEPLOYED_TYPES.get(int(o)) for o in oids]
            if all(types):
                self.execute(f"DROP FUNCTION IF EXISTS {name}({', '.join(map(str, types))})")

    def function_exists(self, schema: str, function: str, arity: int) -> bool:
        return bool(self._signatures(schema, function, arity))

    def functions_named(self, schema: str, function: str) -> list[tuple[str, str, int]]:
        # pg_catalog's functions come first on every search path: one of its names would
        # never be called unqualified; loomdb's own, in the extension's schema, are built-ins
        # too (DuckDB's are in its system catalog)
        rows = self.query(
            "SELECT n.nspname, p.proname, p.pronargs FROM pg_catalog.pg_proc p "
            "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.proname = $2 AND (n.nspname IN ($1, 'pg_catalog') OR EXISTS ("
            "SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e "
            "ON e.oid = d.refobjid WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass "
            "AND d.objid = p.oid AND d.deptype = 'e' AND e.extname = 'loomdb')) ORDER BY 1, 3",
            [schema, function],
        )
        return [(str(s), str(f), int(n)) for s, f, n in rows]

    def fold_name(self, name: str) -> str:
        return name

    def signature(
        self, relation: str, columns: Sequence[str], where: str | None, like: str | None = None
    ) -> str:
        how = hashing(like)
        n, total = self.query(self._signature_query(relation, columns, where, how))[0]
        return f"{how}{n}:{total}"

    def _signature_query(
        self, relation: str, columns: Sequence[str], where: str | None, how: str
    ) -> str:
        types: list[int] = []
        if how == COLUMN_HASH:  # the columns' types, from a statement that reads no row
            types = self._run(f"SELECT {', '.join(columns)} FROM {relation} LIMIT 0", ()).coltypes()
        return signature_query(relation, columns, where, how, types)

    def signature_and_versions(
        self, relation: str, columns: Sequence[str], where: str | None, table: str
    ) -> tuple[str, str | None]:
        """The fingerprint and the row versions of ``table``, in one statement: one snapshot."""
        shape = self._versioned_shape(table)
        if shape is None:
            return self.signature(relation, columns, where), None
        sql = self._signature_query(relation, columns, where, COLUMN_HASH)
        n, total, vn, vtotal = self.query(
            f"SELECT s.n, s.total, v.vn, v.vtotal FROM ({sql}) s, ({versions_query(table)}) v"
        )[0]
        return f"{COLUMN_HASH}{n}:{total}", f"{VERSIONS}{shape}:{vn}:{vtotal}"

    def row_versions(self, table: str) -> str | None:
        """A token of ``table``'s visible row versions and columns (``versions_query``), or
        None where it could not vouch for the values read: not a plain table (a view, a
        foreign, materialized or partitioned one, a table with children), a column of a type
        a role defines (an enum's label may be renamed, a cast replaced) or one under a
        collation where equal is not byte-equal."""
        shape = self._versioned_shape(table)
        if shape is None:
            return None
        vn, vtotal = self.query(versions_query(table))[0]
        return f"{VERSIONS}{shape}:{vn}:{vtotal}"

    def _versioned_shape(self, table: str) -> str | None:
        """A digest of ``table``'s columns (place, name, type, modifier, collation): a
        renamed, retyped or recollated column changes what is read without a new row version.
        None: see :meth:`row_versions`."""
        rows = self.query(VERSIONED_COLUMNS, [table])
        if not rows or rows[0][0] != "r" or rows[0][1]:  # a partition or child may be foreign
            return None
        if any(int(r[4]) >= FIRST_USER_OID or int(r[6]) not in DETERMINISTIC for r in rows):
            return None
        text = ";".join(f"{r[2]},{r[3]},{r[4]},{r[5]},{r[6]}" for r in rows)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def run_shards(
        self,
        relation: str,
        owner: str | None,
        shards: int,
        stop: int,
        parts: int,
        job: bytes,
        run: int,
    ) -> bytes | None:
        """A parallel epoch in PostgreSQL's parallel workers (``parallel_epochs``): the state
        of ``loom._epoch_agg`` over the minibatches ``[0, stop)`` of ``relation``, handed to
        it ``run`` minibatches of a shard at a time."""
        from loomdb.engines.postgres import parallel_epochs

        sql = parallel_epochs.query(relation, shards, stop, parts, job, run)
        with self.as_role(owner):
            if relation not in self._analyzed:  # once per call of a loomdb function
                parallel_epochs.analyze(self.plpy, relation)
                self._analyzed.add(relation)
            return parallel_epochs.run(
                self.plpy, sql, parallel_epochs.settings(shards, stop, parts)
            )

    def _scans_from_the_start(self) -> None:
        """Start this transaction's table scans at the first page.  A source read numbers the
        rows in the order a scan returns them (the shuffle follows those numbers), and
        PostgreSQL lets a scan of a large table join one already running on it
        (``synchronize_seqscans``), which would renumber the rows from run to run.  Local to
        the caller's transaction (a setting every role may change; it only costs concurrent
        scans of one table their shared reads)."""
        self.execute("SELECT pg_catalog.set_config('synchronize_seqscans', 'off', true)")

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
        rows: int | None = None,
    ) -> Iterator[np.ndarray]:
        sql = packed_rows_query(relation, columns, where, shuffle_seed, chunk, rows)
        self._scans_from_the_start()
        for (blob,) in self.stream(sql, (), size=1):
            yield decode_packed_rows(bytes(blob), len(columns))

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
        sql = packed_sparse_query(
            relation, label, indices, values, where, shuffle_seed, chunk, rows
        )
        self._scans_from_the_start()
        for heads, bodies in self.stream(sql, (), size=1):
            yield decode_packed_sparse(bytes(heads), bytes(bodies), width)

    def read_rows(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[list[tuple]]:
        rows: list[tuple] = []
        self._scans_from_the_start()
        for row in self.stream(rows_query(relation, columns, where, shuffle_seed), (), chunk):
            rows.append(row)
            if len(rows) >= chunk:
                yield rows
                rows = []
        if rows:
            yield rows
