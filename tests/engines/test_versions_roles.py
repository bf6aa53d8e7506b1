"""PostgreSQL: a model's versions are its owner's — another role neither lists, chooses, rolls
back nor drops them, even with the model granted to it (it sees the current version only).
Roles are made where the test run may make them (``LOOMDB_TEST_ALLOW_ROLES``, or a server this
run made) and dropped afterwards."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

pytestmark = pytest.mark.postgres

SUFFIX = uuid.uuid4().hex[:6]
OWNER, OTHER = f"versioner_{SUFFIX}", f"other_{SUFFIX}"
SCHEMA = f"loomversions_{SUFFIX}"
TRAIN = "SELECT loom_train('vm', 'pts', 'y', '{\"epochs\": %d, \"replace\": true}')"


def connect(dsn: str, user: str) -> psycopg.Connection:
    conn = psycopg.connect(f"{dsn} user={user}", autocommit=True)
    conn.execute(f"SET search_path = {SCHEMA}, public")  # type: ignore[arg-type]
    return conn


def listed(conn: psycopg.Connection) -> list[tuple[int, bool]]:
    rows = conn.execute("SELECT version, current FROM loom_model_versions('vm')").fetchall()
    return [(int(v), bool(c)) for v, c in rows]


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
        for table in ("model_versions", "models", "grants", "deployments"):
            admin.execute(f"DELETE FROM loom.{table} WHERE owner = %s", [name])  # type: ignore[arg-type]
        admin.execute(f"DROP OWNED BY {name} CASCADE")  # type: ignore[arg-type]
        admin.execute(f"DROP ROLE {name}")  # type: ignore[arg-type]
    admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")  # type: ignore[arg-type]
    admin.close()


def _refused(other: psycopg.Connection, match: str) -> None:
    for sql in (
        "SELECT loom_rollback('vm')",
        "SELECT loom_drop_model('vm', 1)",
        "SELECT loom_deploy('vm', '{\"version\": 1}')",
    ):
        with pytest.raises(psycopg.Error, match=match):
            other.execute(sql)  # type: ignore[arg-type]


def test_another_role_cannot_see_or_change_the_versions(roles):
    owner, other = roles
    for epochs in (1, 2, 3):
        owner.execute(TRAIN % epochs)  # type: ignore[arg-type]
    assert listed(owner) == [(1, False), (2, False), (3, True)]
    assert other.execute("SELECT count(*) FROM loom.model_versions").fetchone() == (0,)
    with pytest.raises(psycopg.Error, match="does not exist"):
        other.execute("SELECT * FROM loom_model_versions('vm')")
    _refused(other, "does not exist")
    owner.execute(f"SELECT loom_grant('vm', '{OTHER}')")  # type: ignore[arg-type]
    assert listed(other) == [(3, True)]  # the granted model, not its history
    _refused(other, "only its owner")
    other.execute("DELETE FROM loom.model_versions")
    other.execute("UPDATE loom.model_versions SET version = 9")
    with pytest.raises(psycopg.Error, match="another role"):
        other.execute(TRAIN % 1)  # type: ignore[arg-type]
    assert listed(owner) == [(1, False), (2, False), (3, True)]
    rolled = json.loads(owner.execute("SELECT loom_rollback('vm')").fetchone()[0])  # type: ignore[index]
    assert rolled["version"] == 2 and listed(other) == [(2, True)]
