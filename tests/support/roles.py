"""Two throwaway PostgreSQL roles (an owner and another) sharing a schema with the owner's
table ``pts`` readable by both; made where the test run may make roles (``LOOMDB_TEST_ALLOW_ROLES``,
or a server this run made), and dropped afterwards with their catalog rows."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
import pytest


def names(owner: str) -> tuple[str, str, str]:
    """``(owner role, other role, schema)``, unique to this run."""
    suffix = uuid.uuid4().hex[:6]
    return f"{owner}_{suffix}", f"other_{suffix}", f"loom{owner}_{suffix}"


def connect(dsn: str, user: str, schema: str) -> psycopg.Connection:
    conn = psycopg.connect(f"{dsn} user={user}", autocommit=True)
    conn.execute(f"SET search_path = {schema}, public")  # type: ignore[arg-type]
    return conn


@contextmanager
def two_roles(
    dsn: str, owner: str, other: str, schema: str, tables: Sequence[str]
) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    """Connections as ``owner`` and ``other``; ``tables``: the catalog tables to clear of
    their rows afterwards."""
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: set LOOMDB_TEST_ALLOW_ROLES to add roles")
    admin = psycopg.connect(f"{dsn} user=postgres", autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    for name in (owner, other):
        admin.execute(f"CREATE ROLE {name} LOGIN")  # type: ignore[arg-type]
        admin.execute(f"GRANT loomdb_user TO {name}")  # type: ignore[arg-type]
        admin.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {name}")  # type: ignore[arg-type]
    as_owner, as_other = connect(dsn, owner, schema), connect(dsn, other, schema)
    as_owner.execute(
        "CREATE TABLE pts AS SELECT g::float8 AS x, (g % 7)::float8 AS z, "
        "(g % 2)::float8 AS y FROM generate_series(1, 200) AS g"
    )
    as_owner.execute(f"GRANT SELECT ON pts TO {other}")  # type: ignore[arg-type]
    try:
        yield as_owner, as_other
    finally:
        for conn in (as_owner, as_other):
            conn.close()
        for name in (owner, other):
            for table in tables:
                admin.execute(f"DELETE FROM loom.{table} WHERE owner = %s", [name])  # type: ignore[arg-type]
            admin.execute(f"DROP OWNED BY {name} CASCADE")  # type: ignore[arg-type]
            admin.execute(f"DROP ROLE {name}")  # type: ignore[arg-type]
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]
        admin.close()
