"""The commands' connections, whose failures read as LoomErrors with a hint.  No paper section."""

from __future__ import annotations

import os
from typing import Any

from loomdb.errors import LoomDatabaseError, LoomNotFoundError


def postgres(dsn: str) -> Any:
    """A psycopg connection (autocommit) to ``dsn``; a LoomDatabaseError where none opens."""
    import psycopg

    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise LoomDatabaseError(
            f"could not connect to PostgreSQL: {first}",  # not the DSN: it may hold a password
            hint="check --dsn (host, port, dbname, user) and that the server is running",
        ) from None


def existing_duckdb(path: str) -> str:
    """``path``, a DuckDB file that must already exist (a command that only reads one must not
    leave an empty database behind)."""
    if path != ":memory:" and not os.path.isfile(path):
        raise LoomNotFoundError(
            f"there is no DuckDB database {path}",
            hint="give the path of the database file the models were trained in",
        )
    return path
