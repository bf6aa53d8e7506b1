"""PostgreSQL: a role's trials are its own — another role neither reads nor overwrites them,
even for a model the owner granted it.  Roles are made where the test run may make them
(``LOOMDB_TEST_ALLOW_ROLES``, or a server this run made) and dropped afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

pytestmark = pytest.mark.postgres

SUFFIX = uuid.uuid4().hex[:6]
OWNER, OTHER = f"tuner_{SUFFIX}", f"other_{SUFFIX}"
SCHEMA = f"loomtune_{SUFFIX}"
TUNE = (
    "SELECT loom_tune('tuned', 'pts', 'y', "
    '\'{"lr": [0.05, 0.5], "batch_size": 20, "epochs": 3, "replace": true}\')'
)


def connect(dsn: str, user: str) -> psycopg.Connection:
    conn = psycopg.connect(f"{dsn} user={user}", autocommit=True)
    conn.execute(f"SET search_path = {SCHEMA}, public")  # type: ignore[arg-type]
    return conn


def scalar(conn: psycopg.Connection, sql: str):
    return conn.execute(sql).fetchone()[0]  # type: ignore[arg-type,index]


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: set LOOMDB_TEST_ALLOW_ROLES to add roles")
    admin = psycopg.connect(f"{pg_dsn} user=postgres", autocommit=True)
    admin.execute(f"CREATE SCHEMA {SCHEMA}")  # type: ignore[arg-type]
    for name in (OWNER, OTHER):
        admin.execute(f"CREATE ROLE {name} LOGIN")  # type: ignore[arg-type]
        admin.execute(f"GRANT loomdb_user TO {name}")  # type: ignore[arg-type]
        admin.execute(f"GRANT USAGE, CREATE ON SCHEMA {SCHEMA} TO {name}")  # type: ignore[arg-type]
    owner, other = connect(pg_dsn, OWNER), connect(pg_dsn, OTHER)
    owner.execute(
        "CREATE TABLE pts AS SELECT g::float8 AS x, (g % 7)::float8 AS z, "
        "(g % 2)::float8 AS y FROM generate_series(1, 200) AS g"
    )
    owner.execute(f"GRANT SELECT ON pts TO {OTHER}")  # type: ignore[arg-type]
    yield owner, other
    for conn in (owner, other):
        conn.close()
    for name in (OWNER, OTHER):
        for table in ("trials", "models", "grants"):
            admin.execute(f"DELETE FROM loom.{table} WHERE owner = %s", [name])  # type: ignore[arg-type]
        admin.execute(f"DROP OWNED BY {name} CASCADE")  # type: ignore[arg-type]
        admin.execute(f"DROP ROLE {name}")  # type: ignore[arg-type]
    admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")  # type: ignore[arg-type]
    admin.close()


def test_another_role_cannot_read_or_overwrite_the_trials(roles):
    owner, other = roles
    owner.execute(TUNE)
    owner.execute(f"SELECT loom_grant('tuned', '{OTHER}')")  # type: ignore[arg-type]
    assert scalar(owner, "SELECT count(*) FROM loom_trials('tuned')") == 2
    assert scalar(other, "SELECT count(*) FROM loom.trials") == 0
    assert other.execute("SELECT * FROM loom_trials('tuned')").fetchall() == []
    other.execute("DELETE FROM loom.trials")
    other.execute("UPDATE loom.trials SET score = 0")
    with pytest.raises(psycopg.Error, match="another role"):
        other.execute(TUNE)
    with pytest.raises(psycopg.Error, match="row-level security"):
        other.execute(
            "INSERT INTO loom.trials (model, owner, trial, status) "
            f"VALUES ('tuned', '{OWNER}', 9, 'ok')"  # type: ignore[arg-type]
        )
    scores = owner.execute("SELECT score FROM loom_trials('tuned') ORDER BY trial").fetchall()
    assert len(scores) == 2 and all(s[0] > 0 for s in scores)
