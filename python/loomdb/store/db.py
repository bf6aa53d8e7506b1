"""The tiny engine-neutral interface the store talks to a database through.

No paper section.  ``engines/duckdb`` and ``engines/postgres`` implement it; nothing below
``engines/`` knows which engine it runs in.  SQL uses ``$1, $2, …`` placeholders on both engines
and abstract type names (``TYPES``) resolved by :meth:`Database.type`.  Engine errors come out
as loomdb errors: a unique-key or write-write race as ``LoomConflictError``, anything else the
database refused as ``LoomDatabaseError`` carrying the engine's message (never loomdb's SQL).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from loomdb.csr import CsrRows

#: The one vocabulary of column and argument types; each engine spells every one of them.
TYPES = (
    "text",
    "bigint",
    "integer",
    "smallint",
    "double",
    "double[]",
    "integer[]",
    "bigint[]",
    "bytes",
    "timestamp",
    "boolean",
)


class Queryable(Protocol):
    """Enough to read and write the catalog (a psycopg client has just this)."""

    dialect: str

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def columns(self, relation: str) -> list[tuple[str, str]]:
        """``(name, kind)`` of a relation's columns; kind is numeric | boolean | bytes |
        text | integer[] | double[] (one-dimensional arrays of integers / of other numbers) |
        other."""
        ...


class Database(Queryable, Protocol):
    identity: str  # this database, for caches: never shared by two databases in one process
    #: whether a query may run in another thread while this one runs Python: the store's
    #: readers then query the next page of minibatches ahead (``store.read_ahead``)
    concurrent_reads: bool

    def type(self, abstract: str) -> str:
        """The engine's spelling of an abstract type from ``TYPES``."""
        ...

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Append ``rows`` to ``relation`` in one round trip (values bound, never pasted)."""
        ...

    def query_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """``query``'s rows, with each bytes value a buffer (``bytes`` or a ``memoryview``)
        copied no more than the engine must: DuckDB hands out slices of Arrow's buffers,
        PostgreSQL's server the ``bytes`` a cursor fetches.  For reading stored payloads."""
        ...

    def atomic(self) -> AbstractContextManager[None]:
        """A (sub)transaction: everything inside commits together or not at all."""
        ...

    def staged(self, relation: str) -> AbstractContextManager[None]:
        """A block that creates and fills the new table ``relation``; if it fails, the table is
        gone.  Outside :meth:`atomic`, DuckDB commits each write as it goes (it holds an
        uncommitted table's BLOBs in memory, beyond ``memory_limit``) and drops the table on
        failure; PostgreSQL runs the block in a subtransaction (its writes go to disk)."""
        ...

    def cache_default_mb(self) -> int:
        """``cache_mb``'s default here: what a train may keep in memory between epochs."""
        ...

    def notice(self, message: str) -> None:
        """Report progress (a NOTICE in PostgreSQL, a log line or stderr in DuckDB)."""
        ...

    def check_interrupt(self) -> None:
        """Raise ``LoomInterrupted`` if the caller cancelled; cheap enough to call per batch."""
        ...

    def role(self) -> str | None:
        """The role loomdb acts as (PostgreSQL's current_user); None without roles (DuckDB)."""
        ...

    def as_role(self, role: str | None) -> AbstractContextManager[None]:
        """Run the SQL inside as ``role`` (the owner of a catalog row whose SQL is run)."""
        ...

    def define_function(
        self, name: str, params: Sequence[tuple[str, str]], expression: str, returns: str = "double"
    ) -> None:
        """Create or replace the scalar SQL function ``name(params…)`` (``(quoted name, type)``
        each, type ``double``, ``text`` or ``boolean``; a ``returns`` out) computing
        ``expression`` over its parameters: a MACRO in DuckDB, an inlinable IMMUTABLE PARALLEL
        SAFE SQL function in PostgreSQL.  ``name`` quoted."""
        ...

    def drop_function(self, schema: str, function: str, arity: int) -> None:
        """Drop the function ``define_function`` made as ``schema.function`` (unquoted names)
        with ``arity`` parameters, if it exists."""
        ...

    def function_exists(self, schema: str, function: str, arity: int) -> bool:
        """Whether ``schema.function`` (unquoted names) takes ``arity`` arguments."""
        ...

    def functions_named(self, schema: str, function: str) -> list[tuple[str, str, int]]:
        """``(schema, name, arity)`` of every function or macro, of any arity, that defining
        ``schema.function`` (unquoted names) would replace or shadow: of that name as the engine
        compares names (:meth:`fold_name`), in that schema or built in (DuckDB's ``system``
        and ``temp`` catalogs, named so: ``system.main``; PostgreSQL's ``pg_catalog`` and the
        loomdb extension's own functions)."""
        ...

    def fold_name(self, name: str) -> str:
        """A schema, function or column name (quoted by loomdb) in the form the engine compares
        it: DuckDB's names are case-insensitive (lower case), PostgreSQL's quoted ones exact."""
        ...

    def signature(
        self, relation: str, columns: Sequence[str], where: str | None, like: str | None = None
    ) -> str:
        """A fingerprint of the rows (count and a hash sum) to tell a stale index, computed the
        way ``like`` (one recorded before, perhaps by an earlier version) was."""
        ...

    def signature_and_versions(
        self, relation: str, columns: Sequence[str], where: str | None, table: str
    ) -> tuple[str, str | None]:
        """A new :meth:`signature` and, seen in the same snapshot, :meth:`row_versions` of
        ``table`` (the table the relation reads)."""
        ...

    def row_versions(self, table: str) -> str | None:
        """A token that stays the same only while no row of ``table`` (a quoted table name)
        was inserted, changed or deleted and none of its columns renamed or retyped, read
        without reading a value: while it matches the one recorded with an index's
        fingerprint, so does the fingerprint.  None where the engine cannot tell so
        (DuckDB) or not for this relation."""
        ...

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
        rows: int | None = None,
    ) -> Iterator[np.ndarray]:
        """Rows of ``columns`` (SQL expressions yielding numbers) as float64 arrays of about
        ``chunk`` rows; with ``shuffle_seed`` in a seeded pseudo-random order (Bismarck: shuffle
        once), the same whatever ``chunk``.  ``rows``: how many the read returns, which a
        shuffled read must say (an engine may size its chunks by it).  Values travel
        packed, never one Python object per value."""
        ...

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
        """Rows of a sparse source as ``(labels, CsrRows)`` chunks of about ``chunk`` rows, in
        the order :meth:`read_matrix` would give (``rows`` as there): ``label`` an SQL
        expression yielding a number, ``indices`` and ``values`` (quoted) array columns, read
        whole per row and packed.
        Columns are returned as stored (not checked against ``width``, not sorted)."""
        ...

    def read_rows(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[list[tuple]]:
        """Rows of ``columns`` as Python values (bytes for a bytea/BLOB), ``chunk`` at a time,
        in ``read_matrix``'s order: for values that are not numbers (images)."""
        ...
