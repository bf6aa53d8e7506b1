"""The commands' connections and input files, whose failures read as LoomErrors with a hint.
No paper section."""

from __future__ import annotations

import os
from typing import Any

from loomdb.errors import LoomDatabaseError, LoomNotFoundError, LoomOptionError


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


def duckdb(path: str, **options: Any) -> Any:
    """A loomdb connection to the DuckDB file ``path``; a LoomDatabaseError where none opens
    (a folder that does not exist, a file that is not a DuckDB database, a lock held), with
    the hint to check --duckdb."""
    import loomdb

    try:
        return loomdb.connect(_named(path), **options)
    except LoomDatabaseError as e:
        raise LoomDatabaseError(
            e.message,
            hint="check --duckdb: a DuckDB database file in a folder that exists (or :memory:), "
            "that no other process holds open",
        ) from e.__cause__


def _named(path: str) -> str:
    """``path``, refused where it is empty (an unset shell variable): DuckDB would open an
    in-memory database, and what the command wrote would be gone when it ends."""
    if not path.strip():
        raise LoomOptionError(
            "--duckdb is empty",
            hint="give the path of a DuckDB database file (or :memory: for one that ends with "
            "the command)",
        )
    return path


def kept_duckdb(path: str) -> str:
    """``path``, a database a command's writes outlive: not :memory:, whose tables are lost
    when the command ends."""
    if path == ":memory:":
        raise LoomOptionError(
            "a load into --duckdb :memory: would be lost when the command ends",
            hint="give the path of the DuckDB database file to load into",
        )
    return _named(path)


def existing_duckdb(path: str) -> str:
    """``path``, a DuckDB file that must already exist (a command that only reads one must not
    leave an empty database behind)."""
    if path != ":memory:" and not os.path.isfile(_named(path)):
        raise LoomNotFoundError(
            f"there is no DuckDB database {path}",
            hint="give the path of the database file the models were trained in",
        )
    return path


def read_text(path: str, what: str) -> str:
    """The text of the file ``path`` (``what``, e.g. "the SQL script", names it); a
    LoomNotFoundError where it is not there, is a folder, cannot be read or is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        problem = f"{what} {path} does not exist"
    except IsADirectoryError:
        problem = f"{what} {path} is a folder, not a file"
    except UnicodeDecodeError:
        problem = f"{what} {path} is not UTF-8 text"
    except OSError as e:
        problem = f"cannot read {what} {path}: {e.strerror}"
    raise LoomNotFoundError(
        problem, hint="give the path of a readable UTF-8 text file ('-' reads standard input)"
    )
