"""PostgreSQL: ``loom_grant`` and ``loom_revoke`` are the owner's — a role a model was granted
to predicts with it, but neither grants it on nor revokes grants.  Roles are made where the
test run may make them (``LOOMDB_TEST_ALLOW_ROLES``, or a server this run made) and dropped
afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from support.roles import names, two_roles

pytestmark = pytest.mark.postgres

OWNER, OTHER, SCHEMA = names("granter")
PREDICT = "SELECT loom_predict('gm', ARRAY[3.0, 1.0])"


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with two_roles(pg_dsn, OWNER, OTHER, SCHEMA, ("models", "grants")) as pair:
        yield pair


def test_a_grantee_cannot_revoke_and_is_not_told_it_did(roles, pg_dsn):
    """bob, granted alice's model, ran ``loom_revoke('gm', 'bob')`` and was answered
    ``"grants_removed": 1`` (he may read the grant's row) while row-level security had kept
    the row: he still predicted.  Revoking is the owner's (or a superuser's), as granting is."""
    owner, other = roles
    owner.execute("""SELECT loom_train('gm', 'pts', 'y', '{"epochs": 2}')""")
    owner.execute(f"SELECT loom_grant('gm', '{OTHER}')")  # type: ignore[arg-type]
    owner.execute("SELECT loom_grant('gm', 'public')")
    for role in (OTHER, "public"):
        with pytest.raises(psycopg.Error, match=f"only the owner of model 'gm' \\({OWNER}\\)"):
            other.execute(f"SELECT loom_revoke('gm', '{role}')")  # type: ignore[arg-type]
    assert other.execute(PREDICT).fetchone()[0] in (0.0, 1.0)  # type: ignore[index]
    granted = "SELECT grantee FROM loom.grants ORDER BY grantee"
    assert owner.execute(granted).fetchall() == [(OTHER,), ("public",)]
    with psycopg.connect(pg_dsn, autocommit=True) as admin:  # a superuser may, as for grants
        done = admin.execute("SELECT loom_revoke('gm', 'public')").fetchone()[0]  # type: ignore[index]
    assert json.loads(done)["grants_removed"] == 1
    done = owner.execute(f"SELECT loom_revoke('gm', '{OTHER}')").fetchone()[0]  # type: ignore
    assert json.loads(done) == {"model": "gm", "revoked_from": OTHER, "grants_removed": 1}
    with pytest.raises(psycopg.Error, match="does not exist"):
        other.execute(PREDICT)
