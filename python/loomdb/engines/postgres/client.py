"""``Database`` over psycopg 3, from outside the server (the CLI, benchmarks, tests).
No paper section.

Training and prediction run inside the server through the SQL functions; the client side
only needs to read the catalog (for the SQL front-end) and run statements.  Placeholders
``$1…`` become psycopg's ``%s``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from loomdb.engines.postgres.dialect import column_kind, type_name
from loomdb.engines.postgres.installed import EXTENSION_SCHEMA
from loomdb.errors import LoomStateError
from loomdb.store.sql_catalog import DbCatalog

_PLACEHOLDER = re.compile(r"\$(\d+)")


def to_psycopg(sql: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    order = [int(n) - 1 for n in _PLACEHOLDER.findall(sql)]
    return _PLACEHOLDER.sub("%s", sql.replace("%", "%%")), [params[i] for i in order]


@contextmanager
def translated() -> Iterator[None]:
    """psycopg's errors as LoomErrors (what the server said, with its hint), as inside it."""
    import psycopg

    from loomdb.engines.postgres.plpy_database import ERROR_PREFIX, from_sqlstate

    try:
        yield
    except psycopg.Error as e:
        d = e.diag
        message = d.message_primary or (str(e).strip().splitlines() or [type(e).__name__])[0]
        message = message.removeprefix(ERROR_PREFIX)  # a loomdb function's, in the server
        raise from_sqlstate(e.sqlstate, message, d.message_hint, d.message_detail) from None


class PsycopgDatabase:
    """Enough of ``Database`` for loomdb's client side: the front-end's catalog questions and
    ``loomdb load`` (rows written with COPY, in one transaction)."""

    dialect = "postgres"
    identity = "postgres-client"
    concurrent_reads = False  # one connection, one statement at a time

    def __init__(self, conn: Any):
        self.conn = conn

    def type(self, abstract: str) -> str:
        return type_name(abstract)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        text, values = to_psycopg(sql, params)
        with translated(), self.conn.cursor() as cur:
            cur.execute(text, values or None)
            return cur.fetchall() if cur.description else []

    def query_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """``query``: psycopg hands each bytea over as ``bytes`` already."""
        return self.query(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.query(sql, params)

    def notice(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        with (
            translated(),
            self.conn.cursor() as cur,
            cur.copy(f"COPY {relation} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def atomic(self) -> AbstractContextManager[Any]:
        return self.conn.transaction()

    def check_interrupt(self) -> None:
        """A client process is interrupted by Ctrl-C itself."""

    def columns(self, relation: str) -> list[tuple[str, str]]:
        with translated(), self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {relation} LIMIT 0")
            return [(d.name, column_kind(d.type_code)) for d in cur.description]


def extension_schema(db: PsycopgDatabase) -> str:
    """The schema the loomdb extension's functions are in, for calls that name it: by name
    alone, a function of the same signature that another role made in a schema earlier on the
    caller's search_path (a "$user" schema, or public where the extension is elsewhere) would
    be the one run, as the caller.  LoomStateError where the extension is not created."""
    rows = db.query(EXTENSION_SCHEMA)
    if not rows:
        raise LoomStateError(
            "the loomdb extension is not installed in this database: loomdb's functions "
            "cannot be called",
            hint="a superuser runs loomdb pg install --dsn … on the server's machine "
            "(or CREATE EXTENSION loomdb where it is installed)",
        )
    return str(rows[0][0])


class PgCatalog(DbCatalog):
    """The SQL front-end's catalog on PostgreSQL (``loomdb sql``): a rewritten statement names
    loomdb's functions with the extension's schema (:func:`extension_schema`)."""

    db: PsycopgDatabase

    def functions_schema(self) -> str | None:
        return extension_schema(self.db)
