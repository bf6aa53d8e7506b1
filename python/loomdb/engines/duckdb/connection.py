"""``loomdb.connect()``: DuckDB with loomdb's functions, catalog and SQL front-end.

``Connection.execute``/``sql`` run loomdb's front-end first (``CREATE INDEX … USING
mlweaving``… become function calls) and return what DuckDB's own would.  ``.duckdb`` is the raw
connection; ``register(con)`` equips an existing one (e.g. from a dbt-duckdb plugin).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from loomdb.engines.duckdb.database import TYPES, DuckDatabase
from loomdb.engines.duckdb.functions import raised_in_udf, register_functions
from loomdb.store import catalog


@contextmanager
def loom_errors() -> Iterator[None]:
    """Re-raise a loomdb UDF's own error (LoomOptionError…) instead of DuckDB's wrapper."""
    raised_in_udf()
    try:
        yield
    except duckdb.Error as e:
        original = raised_in_udf()
        if original is not None:
            raise original from e
        raise


def register(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Create loomdb's catalog in ``con``'s database and register every loom_* function."""
    for statement in catalog.ddl(lambda t: TYPES[t]):
        con.execute(statement)
    register_functions(con)
    return con


class Connection:
    """A DuckDB connection whose statements pass through loomdb's SQL front-end."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.duckdb = register(con)

    def _run(self, sql: str, last: Any) -> Any:
        """Run every statement but the last, then ``last(statement)`` on the last one."""
        from loomdb.engines.duckdb.frontend_catalog import statements

        pending = None
        with loom_errors():
            for statement in statements(self, sql):
                if pending is not None:
                    self.duckdb.execute(pending).fetchall()  # results stream: finish each one
                pending = statement
            return last(pending) if pending is not None else None

    def execute(self, sql: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        result = self._run(sql, lambda s: self.duckdb.execute(s, parameters))
        return self.duckdb if result is None else result

    def sql(self, sql: str) -> Any:
        return self._run(sql, self.duckdb.sql)

    def database(self) -> DuckDatabase:
        return DuckDatabase(self.duckdb.cursor(), cache_key=self.duckdb)  # catalog reads only

    def close(self) -> None:
        self.duckdb.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.duckdb, name)


def connect(path: str | None = None, **config: Any) -> Connection:
    return Connection(duckdb.connect(path or ":memory:", config=config or {}))
