"""``loomdb.connect()``: DuckDB with loomdb's functions, catalog and SQL front-end.

No paper section.  ``Connection.execute``/``sql`` run loomdb's front-end first (``CREATE INDEX
… USING mlweaving``… become function calls), raise a loomdb function's own error, and return
what DuckDB's own would.  ``.duckdb`` is the raw connection; ``register(con)`` equips an
existing one (e.g. from a dbt-duckdb plugin's ``configure_connection``).

A read-only database works: the catalog is created only where the database is writable, and
writing functions say why they cannot run.  Explicit transactions opened through this
connection (``BEGIN``, ``con.begin()``) are tracked, and writing functions refuse to run inside
one (their writes commit on a connection of their own; a ROLLBACK could not undo them).
``interrupt()`` stops a running loomdb call within a batch.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from loomdb.engines.duckdb.database import DuckDatabase, translate
from loomdb.engines.duckdb.functions import equip, raised_in_udf, register_functions
from loomdb.engines.duckdb.state import ConnectionState, Instance
from loomdb.errors import LoomInterrupted
from loomdb.store import catalog

OPEN = {"BEGIN", "START"}
CLOSE = {"COMMIT", "END", "ROLLBACK", "ABORT"}


@contextmanager
def loom_errors() -> Iterator[None]:
    """Re-raise a loomdb UDF's own error (LoomOptionError…) instead of DuckDB's wrapper."""
    try:
        yield
    except duckdb.InterruptException as e:
        raise LoomInterrupted("interrupted: the statement was cancelled") from e
    except duckdb.Error as e:
        original = raised_in_udf(e)
        if original is not None:
            raise original.with_traceback(None) from None
        raise


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()  # fetch to the end: an unfinished result blocks the connection's cursors
    return bool(rows and rows[0][0])


_instances: weakref.WeakValueDictionary[str, Instance] = weakref.WeakValueDictionary()


def register(
    con: duckdb.DuckDBPyConnection, progress: bool = True
) -> tuple[ConnectionState, Instance]:
    """Create loomdb's catalog in ``con``'s database (if writable), register every function
    (once per database), and equip ``con`` with its macros."""
    read_only = _read_only(con)
    try:
        if not read_only:
            for statement in catalog.ddl("duckdb"):
                con.execute(statement)
    except duckdb.Error as e:
        raise translate(e) from None
    identity = _identity(con, read_only)
    instance = _instances.get(identity)
    if instance is None:
        instance = _instances[identity] = Instance(identity, read_only)
    state = ConnectionState(identity, read_only, progress)
    instance.add(con, state)
    register_functions(con, instance)
    equip(con, state)
    return state, instance


def _identity(con: duckdb.DuckDBPyConnection, read_only: bool) -> str:
    """The database's id in its catalog, and for a file its path: a copy of a database file
    holds the same id, and two copies open in one process must not share their functions'
    connections or their cached models."""
    found = catalog.database_id(DuckDatabase(con, ConnectionState("")), not read_only)
    try:
        ((path,),) = con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    return found if path is None else f"{found}@{os.path.realpath(path)}"


class Connection:
    """A DuckDB connection whose statements pass through loomdb's SQL front-end."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        progress: bool = True,
        parent: Connection | None = None,
    ):
        self.duckdb = con
        if parent is None:
            self.state, self.instance = register(con, progress)
        else:  # a cursor: the database's functions exist; it needs its own state and macros
            self.instance = parent.instance
            self.state = ConnectionState(parent.state.identity, parent.state.read_only, progress)
            self.instance.add(con, self.state)
            equip(con, self.state)

    def _track(self, statement: str) -> None:
        first = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if first in OPEN:
            self.state.in_transaction = True
        elif first in CLOSE:
            self.state.in_transaction = False

    def _run(self, sql: str, last: Any) -> Any:
        """Run every statement but the last, then ``last(statement)`` on the last one."""
        from loomdb.engines.duckdb.frontend_catalog import statements

        pending = None
        self.state.interrupted.clear()
        with loom_errors():
            for statement in statements(self, sql):
                if pending is not None:
                    self._track(pending)
                    self.duckdb.execute(pending).fetchall()  # results stream: finish each one
                pending = statement
            if pending is None:
                return None
            self._track(pending)
            return last(pending)

    def each(self, sql: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """Run a script statement by statement, yielding each one's result (fetch it before
        the next): what ``loomdb sql`` prints."""
        from loomdb.engines.duckdb.frontend_catalog import statements

        self.state.interrupted.clear()
        with loom_errors():
            for statement in statements(self, sql):
                self._track(statement)
                result = self.duckdb.execute(statement)
                yield result
                result.fetchall()  # whatever the caller left: a result must end before the next

    def execute(self, sql: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        result = self._run(sql, lambda s: self.duckdb.execute(s, parameters))
        return self.duckdb if result is None else result

    def sql(self, sql: str) -> Any:
        return self._run(sql, self.duckdb.sql)

    def begin(self) -> Connection:
        self.duckdb.begin()
        self.state.in_transaction = True
        return self

    def commit(self) -> Connection:
        self.state.in_transaction = False
        self.duckdb.commit()
        return self

    def rollback(self) -> Connection:
        self.state.in_transaction = False
        self.duckdb.rollback()
        return self

    def interrupt(self) -> None:
        """Stop the running statement, a loomdb call included (within one batch)."""
        self.state.interrupted.set()
        self.duckdb.interrupt()

    def cursor(self) -> Connection:
        """A new connection to the same database, with loomdb's functions and front-end."""
        return Connection(self.duckdb.cursor(), self.state.progress, parent=self)

    def database(self) -> DuckDatabase:
        return DuckDatabase(self.duckdb.cursor(), self.state)  # catalog reads only

    def close(self) -> None:
        self.duckdb.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.duckdb, name)


def connect(path: str | None = None, *, progress: bool = True, **config: Any) -> Connection:
    read_only = bool(config.pop("read_only", False))
    con = duckdb.connect(path or ":memory:", read_only=read_only, config=config or {})
    return Connection(con, progress)
