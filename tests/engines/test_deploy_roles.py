"""PostgreSQL: where a role may deploy — a schema it may not create in is refused with a hint
before anything is written.  Roles are made where the test run may make them
(``LOOMDB_TEST_ALLOW_ROLES``, or a server this run made) and dropped afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from support.roles import names, two_roles

pytestmark = pytest.mark.postgres

OWNER, OTHER, SCHEMA = names("deployer")
READ_ONLY = f"{SCHEMA}_ro"


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with (
        two_roles(pg_dsn, OWNER, OTHER, SCHEMA, ("models", "deployments")) as pair,
        psycopg.connect(pg_dsn, autocommit=True) as admin,
    ):
        admin.execute(f"CREATE SCHEMA {READ_ONLY}")  # type: ignore[arg-type]
        admin.execute(f"GRANT USAGE ON SCHEMA {READ_ONLY} TO {OWNER}")  # type: ignore[arg-type]
        try:
            yield pair
        finally:
            admin.execute(f"DROP SCHEMA {READ_ONLY} CASCADE")  # type: ignore[arg-type]


def test_a_schema_the_role_may_not_create_in_is_refused_with_a_hint(roles):
    """A deploy into a schema without the CREATE privilege (``public`` from PostgreSQL 15 on,
    the current schema of a role with the default search path) was PostgreSQL's "permission
    denied for schema …" as a loomdb system error (SQLSTATE 58000), no hint."""
    owner, _ = roles
    owner.execute("""SELECT loom_train('dm', 'pts', 'y', '{"epochs": 2}')""")
    calls = [
        f"""SELECT loom_deploy('dm', '{{"schema": "{READ_ONLY}"}}')""",
        f"SET search_path = {READ_ONLY}, {SCHEMA}, public",
        "SELECT loom_deploy('dm')",  # the current schema, the read-only one
    ]
    for sql in calls:
        if sql.startswith("SET"):
            owner.execute(sql)  # type: ignore[arg-type]
            continue
        with pytest.raises(psycopg.Error) as caught:
            owner.execute(sql)  # type: ignore[arg-type]
        error = caught.value
        assert f"no CREATE privilege on schema {READ_ONLY}" in str(error), str(error)
        assert error.sqlstate != "58000"  # a loomdb refusal, not a system error
        assert error.diag.message_hint and '{"schema"' in error.diag.message_hint
    assert owner.execute("SELECT count(*) FROM loom.deployments").fetchone() == (0,)
    owner.execute(f"SET search_path = {SCHEMA}, public")  # type: ignore[arg-type]
    owner.execute("SELECT loom_deploy('dm')")
    assert owner.execute("SELECT predict_dm(x, z) FROM pts LIMIT 1").fetchone()[0] in (0.0, 1.0)  # type: ignore[index]
