"""PostgreSQL: a model's versions are its owner's — another role neither lists, chooses, rolls
back nor drops them, even with the model granted to it (it sees the current version only).
Roles are made where the test run may make them (``LOOMDB_TEST_ALLOW_ROLES``, or a server this
run made) and dropped afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from support.roles import names, two_roles

pytestmark = pytest.mark.postgres

OWNER, OTHER, SCHEMA = names("versioner")
TRAIN = "SELECT loom_train('vm', 'pts', 'y', '{\"epochs\": %d, \"replace\": true}')"


def listed(conn: psycopg.Connection) -> list[tuple[int, bool]]:
    rows = conn.execute("SELECT version, current FROM loom_model_versions('vm')").fetchall()
    return [(int(v), bool(c)) for v, c in rows]


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with two_roles(
        pg_dsn, OWNER, OTHER, SCHEMA, ("model_versions", "models", "grants", "deployments")
    ) as pair:
        yield pair


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
    with pytest.raises(psycopg.Error, match="only its owner may retrain it"):
        other.execute(TRAIN % 1)  # type: ignore[arg-type]
    assert listed(owner) == [(1, False), (2, False), (3, True)]
    rolled = json.loads(owner.execute("SELECT loom_rollback('vm')").fetchone()[0])  # type: ignore[index]
    assert rolled["version"] == 2 and listed(other) == [(2, True)]


def test_only_the_owner_retrains_a_model(roles, pg_dsn):
    """A role the model was granted to, retraining it (``replace``, ``warm_start``, a tune),
    trained it whole and was then refused with a serialization failure (SQLSTATE 40001, "retry
    if another train of it just finished": a client that retries such errors retried for
    ever); a superuser's ``replace`` took the model from its owner, who no longer saw it (nor
    did the roles it was granted to), and left the owner's deployed function on the old
    version.  Both are refused before anything is trained, naming the owner."""
    owner, other = roles
    owner.execute("SELECT loom_drop_model(name) FROM loom.models")
    owner.execute(TRAIN % 2)  # type: ignore[arg-type]
    owner.execute("SELECT loom_deploy('vm')")
    owner.execute(f"SELECT loom_grant('vm', '{OTHER}')")  # type: ignore[arg-type]
    before = owner.execute("SELECT loom_model_info('vm')").fetchone()
    tune = (
        "SELECT loom_tune('vm', 'pts', 'y', "
        """'{"lr": [0.1, 0.2], "batch_size": 20, "epochs": 2, "replace": true}')"""
    )
    warm = """SELECT loom_train('vm', 'pts', 'y', '{"epochs": 1, "warm_start": true}')"""
    for sql in (TRAIN % 1, warm, tune):
        with pytest.raises(psycopg.Error, match=f"belongs to {OWNER}: only its owner may ret") as e:
            other.execute(sql)  # type: ignore[arg-type]
        assert e.value.sqlstate != "40001"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"SET search_path = {SCHEMA}, public")  # type: ignore[arg-type]
        with pytest.raises(psycopg.Error, match=f"belongs to {OWNER}: only its owner"):
            admin.execute(TRAIN % 1)  # type: ignore[arg-type]
    assert owner.execute("SELECT loom_model_info('vm')").fetchone() == before
    assert listed(owner) == [(1, True)] and listed(other) == [(1, True)]
    owner.execute(TRAIN % 3)  # type: ignore[arg-type]  # the owner still may
    assert listed(owner) == [(1, False), (2, True)]
    assert owner.execute(
        "SELECT predict_vm(x, z) = loom_predict('vm', ARRAY[x, z]) FROM pts LIMIT 1"
    ).fetchone() == (True,)
