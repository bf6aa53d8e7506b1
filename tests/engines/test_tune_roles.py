"""PostgreSQL: a role's trials are its own — another role neither reads nor overwrites them,
even for a model the owner granted it.  Roles are made where the test run may make them
(``LOOMDB_TEST_ALLOW_ROLES``, or a server this run made) and dropped afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from support.roles import names, two_roles

pytestmark = pytest.mark.postgres

OWNER, OTHER, SCHEMA = names("tuner")
TUNE = (
    "SELECT loom_tune('tuned', 'pts', 'y', "
    '\'{"lr": [0.05, 0.5], "batch_size": 20, "epochs": 3, "replace": true}\')'
)


def scalar(conn: psycopg.Connection, sql: str):
    return conn.execute(sql).fetchone()[0]  # type: ignore[arg-type,index]


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with two_roles(pg_dsn, OWNER, OTHER, SCHEMA, ("trials", "models", "grants")) as pair:
        yield pair


def test_another_role_cannot_read_or_overwrite_the_trials(roles):
    owner, other = roles
    owner.execute(TUNE)
    owner.execute(f"SELECT loom_grant('tuned', '{OTHER}')")  # type: ignore[arg-type]
    assert scalar(owner, "SELECT count(*) FROM loom_trials('tuned')") == 2
    assert scalar(other, "SELECT count(*) FROM loom.trials") == 0
    assert other.execute("SELECT * FROM loom_trials('tuned')").fetchall() == []
    other.execute("DELETE FROM loom.trials")
    other.execute("UPDATE loom.trials SET score = 0")
    with pytest.raises(psycopg.Error, match="only its owner may retune it"):
        other.execute(TUNE)
    with pytest.raises(psycopg.Error, match="row-level security"):
        other.execute(
            "INSERT INTO loom.trials (model, owner, trial, status) "
            f"VALUES ('tuned', '{OWNER}', 9, 'ok')"  # type: ignore[arg-type]
        )
    scores = owner.execute("SELECT score FROM loom_trials('tuned') ORDER BY trial").fetchall()
    assert len(scores) == 2 and all(s[0] > 0 for s in scores)
