"""PostgreSQL security: two ordinary roles, alice (owns a secret table) and bob (no rights on it).

Every attack of the security issue is a test that passes by failing: code execution through a
setting, a superuser takeover through a catalog row, reading, overwriting, dropping or orphaning
another role's models and indexes.  The legitimate flow — alice trains, grants, bob predicts —
works.  The roles are made on a server the test run made itself (or where
``LOOMDB_TEST_ALLOW_ROLES`` says roles may be created) and dropped afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.postgres

SUFFIX = uuid.uuid4().hex[:6]
ALICE, BOB = f"alice_{SUFFIX}", f"bob_{SUFFIX}"
INDEX_ROW = (
    "INSERT INTO loom.indexes (name, source, label, columns, format, format_version, options, "
    "stats, label_counts, rows, skipped, batches, bytes, source_signature, uid) VALUES "
)


class Role:
    def __init__(self, dsn: str, name: str):
        self.name = name
        self.conn = psycopg.connect(f"{dsn} user={name}", autocommit=True)
        self.conn.execute("SET search_path = loomsec, public")

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def scalar(self, sql: str, params: list | None = None):
        return self.rows(sql, params)[0][0]

    def error(self, sql: str, params: list | None = None) -> str:
        with pytest.raises(psycopg.Error) as info:
            self.rows(sql, params)
        return str(info.value)


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[Role, Role, Role]]:
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: set LOOMDB_TEST_ALLOW_ROLES to add roles")
    admin = Role(pg_dsn, "postgres")
    admin.rows("DROP SCHEMA IF EXISTS loomsec CASCADE")
    admin.rows("CREATE SCHEMA loomsec")
    for name in (ALICE, BOB):
        admin.rows(f"CREATE ROLE {name} LOGIN")
        admin.rows(f"GRANT loomdb_user TO {name}")
        admin.rows(f"GRANT USAGE, CREATE ON SCHEMA loomsec TO {name}")
    alice, bob = Role(pg_dsn, ALICE), Role(pg_dsn, BOB)
    alice.rows(
        "CREATE TABLE secret AS SELECT g::float8 AS x, (g % 7)::float8 AS z, "
        "(g % 2)::float8 AS y FROM generate_series(1, 400) AS g"
    )
    alice.rows("SELECT loom_train('m_alice', 'secret', 'y', '{\"epochs\": 2}')")
    alice.rows("SELECT loom_create_index('ix_alice', 'secret', 'y', '{}')")
    yield admin, alice, bob
    for r in (alice, bob):
        r.conn.close()
    for name in (ALICE, BOB):
        admin.rows(f"DELETE FROM loom.models WHERE owner = '{name}'")
        admin.rows(f"DELETE FROM loom.model_versions WHERE owner = '{name}'")
        admin.rows(f"DELETE FROM loom.indexes WHERE owner = '{name}'")
        admin.rows(f"DELETE FROM loom.grants WHERE owner = '{name}'")
        admin.rows(f"DELETE FROM loom.deployments WHERE owner = '{name}'")
        admin.rows(f"DROP OWNED BY {name} CASCADE")
        admin.rows(f"DROP ROLE {name}")
    admin.rows("DROP SCHEMA IF EXISTS loomsec CASCADE")
    admin.conn.close()


def superuser(admin: Role, name: str) -> bool:
    return bool(admin.scalar("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [name]))


def test_a_role_cannot_choose_the_servers_python_path(roles, tmp_path, pg_dsn):
    admin, _, bob = roles
    trap = tmp_path / "trap"
    (trap / "loomdb" / "engines" / "postgres").mkdir(parents=True)
    marker = tmp_path / "ran"
    for package in ("loomdb", "loomdb/engines", "loomdb/engines/postgres"):
        (trap / package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    for path in [tmp_path, trap, *trap.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    with psycopg.connect(
        f"{pg_dsn} user={BOB} options='-c loomdb.python_path={trap} "
        f"-c loomdb.numba_cache_dir={tmp_path}'",
        autocommit=True,
    ) as conn:
        conn.execute(f"SET loomdb.python_path = '{trap}'")
        version = conn.execute("SELECT loom_version()").fetchone()
    assert version is not None and version[0]
    assert not marker.exists(), "the server imported a module from a role's directory"


def test_where_the_server_imports_from_is_superuser_only(roles):
    _, alice, bob = roles
    for who in (alice, bob):
        assert "permission denied" in who.error("UPDATE loom.settings SET value = '/tmp'")
        assert "permission denied" in who.error(
            "INSERT INTO loom.settings (key, value) VALUES ('extra_path', '/tmp')"
        )


def test_the_numba_cache_belongs_to_the_server_alone(roles):
    admin, _, _ = roles
    cache = Path(admin.scalar("SELECT value FROM loom.settings WHERE key = 'numba_cache_dir'"))
    assert not str(cache).startswith(("/tmp", "/var/tmp"))
    if not cache.exists():
        pytest.skip("the server's files are not on this machine")
    info = cache.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700
    import pwd

    assert pwd.getpwuid(info.st_uid).pw_name == "postgres"


def test_no_takeover_through_a_hostile_catalog_row(roles):
    admin, _, bob = roles
    hostile = "loom.nothing_here; ALTER ROLE " + BOB + " SUPERUSER"
    assert (
        "check"
        in bob.error(
            INDEX_ROW
            + "(%s, 'secret', 'y', '[\"x\"]', 'dense', 1, '{}', '{}', '{}', 1, 0, 1, 1, 'x', 'a')",
            [hostile],
        ).lower()
    )
    bob.rows(
        "CREATE FUNCTION elevate() RETURNS float8 LANGUAGE plpgsql AS "
        f"$$BEGIN ALTER ROLE {BOB} SUPERUSER; RETURN 1; END$$"
    )
    bob.rows(
        INDEX_ROW + "('bob_ix', 'SELECT loomsec.elevate() AS x, 1.0 AS y', 'y', "
        "'[\"x\\\"; DROP TABLE loomsec.secret; --\"]', 'dense', 1, "
        '\'{"batch_size": 256, "seed": 1, "nulls": "error", "dtype": "float64"}\', '
        "'{}', '{}', 1, 0, 1, 1, 'x', '00')"
    )
    for sql in (
        "SELECT loom_reindex('bob_ix')",
        "SELECT loom_train('m_admin', NULL, 'y', '{\"index\": \"bob_ix\"}')",
        "SELECT loom_drop_index('bob_ix')",
    ):
        with contextlib.suppress(psycopg.Error):  # refused or failed: what matters is
            admin.rows(sql)  # what it did not do
        assert not superuser(admin, BOB), f"{sql} made {BOB} a superuser"
    assert admin.scalar("SELECT count(*) FROM loomsec.secret") == 400


def test_a_superuser_reads_a_roles_storage_with_that_roles_rights(roles):
    admin, _, bob = roles
    bob.rows(
        "CREATE TABLE mine AS SELECT g::float8 AS x, (g % 2)::float8 AS y "
        "FROM generate_series(1, 64) AS g"
    )
    bob.rows("SELECT loom_create_index('bob_real', 'mine', 'y', '{}')")
    bob.rows(
        "CREATE OR REPLACE FUNCTION elevate_too() RETURNS int LANGUAGE plpgsql AS "
        f"$$BEGIN ALTER ROLE {BOB} SUPERUSER; RETURN 0; END$$"
    )
    bob.rows("ALTER TABLE loom_data.bob_real RENAME TO bob_real_old")
    bob.rows(
        "CREATE VIEW loom_data.bob_real WITH (security_invoker = true) AS "
        "SELECT batch + elevate_too() AS batch, part, rows, version, payload, checksum "
        "FROM loom_data.bob_real_old"
    )
    with pytest.raises(psycopg.Error):
        admin.rows(
            "SELECT loom_train('m_admin2', NULL, 'y', '{\"index\": \"bob_real\", "
            '"allow_stale": true}\')'
        )
    assert not superuser(admin, BOB)


def test_a_roles_code_run_for_a_superuser_cannot_reset_role(roles):
    """A superuser reindexing, or training on, bob's index re-runs bob's SQL (his source view,
    a policy on his storage table) as bob; under SET ROLE bob's function could RESET ROLE and
    act as the superuser.  loomdb runs it in a security-restricted operation (loomdb_owner.c)
    where PostgreSQL refuses that, and puts back a search_path bob's code changed."""
    admin, _, bob = roles
    bob.rows(
        "CREATE TABLE small AS SELECT (g % 5)::float8 AS x, (g % 2)::float8 AS y "
        "FROM generate_series(1, 300) AS g"
    )
    bob.rows(
        "CREATE FUNCTION up(v float8) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN "
        "IF current_user <> session_user THEN RESET ROLE; "
        f"ALTER ROLE {BOB} SUPERUSER; SET ROLE {BOB}; END IF; RETURN v; END $$"
    )
    bob.rows("CREATE VIEW sv AS SELECT up(x) AS x, y FROM small")
    bob.rows("SELECT loom_create_index('bob_sv', 'sv', 'y', '{}')")
    for sql in (
        "SELECT loom_reindex('bob_sv')",
        "SELECT loom_train('m_admin_sv', NULL, 'y', '{\"index\": \"bob_sv\"}')",
    ):
        with pytest.raises(psycopg.Error, match="role"):
            admin.rows(sql)
        assert not superuser(admin, BOB), sql
    bob.rows(
        "CREATE OR REPLACE FUNCTION up(v float8) RETURNS float8 LANGUAGE plpgsql AS $$ BEGIN "
        "PERFORM set_config('search_path', 'public, loomsec', false); RETURN v; END $$"
    )
    before = admin.scalar("SELECT current_setting('search_path')")
    with pytest.raises(psycopg.Error, match="changed search_path"):
        admin.rows("SELECT loom_reindex('bob_sv')")
    assert admin.scalar("SELECT current_setting('search_path')") == before
    bob.rows("CREATE OR REPLACE FUNCTION up(v float8) RETURNS float8 LANGUAGE sql AS 'SELECT v'")
    assert json.loads(admin.scalar("SELECT loom_reindex('bob_sv')"))["rows"] == 300


def test_another_roles_models_and_indexes_are_invisible_and_untouchable(roles):
    admin, alice, bob = roles
    assert bob.scalar("SELECT count(*) FROM loom.models WHERE name = 'm_alice'") == 0
    assert bob.scalar("SELECT count(*) FROM loom.indexes WHERE name = 'ix_alice'") == 0
    assert "does not exist" in bob.error("SELECT loom_model_info('m_alice')")
    assert "does not exist" in bob.error("SELECT loom_predict('m_alice', ARRAY[1.0, 2.0])")
    assert "does not exist" in bob.error("SELECT loom_drop_model('m_alice')")
    assert "does not exist" in bob.error("SELECT loom_drop_index('ix_alice')")
    bob.rows(
        "CREATE TABLE mine2 AS SELECT g::float8 AS x, (g % 2)::float8 AS y "
        "FROM generate_series(1, 10) AS g"
    )
    taken = bob.error("SELECT loom_train('m_alice', 'mine2', 'y', '{\"replace\": true}')")
    assert "another role" in taken
    bob.rows("DELETE FROM loom.models")
    bob.rows("DELETE FROM loom.indexes")
    bob.rows("UPDATE loom.models SET owner = current_user")
    assert "permission denied" in bob.error("SELECT count(*) FROM loom_data.ix_alice")
    assert alice.scalar("SELECT count(*) FROM loom.models WHERE name = 'm_alice'") == 1
    assert alice.scalar("SELECT count(*) FROM loom.indexes WHERE name = 'ix_alice'") == 1
    alice.rows("SELECT loom_train('m_alice2', NULL, 'y', '{\"index\": \"ix_alice\"}')")
    assert admin.scalar("SELECT count(*) FROM loom.models WHERE owner = %s", [ALICE]) == 2


def test_training_on_a_table_the_role_cannot_read_is_refused(roles):
    _, _, bob = roles
    assert "permission denied" in bob.error("SELECT loom_train('b1', 'loomsec.secret', 'y')")
    assert "permission denied" in bob.error(
        "SELECT loom_train('b1', 'SELECT * FROM loomsec.secret', 'y')"
    )


def test_a_role_without_loomdb_user_cannot_call_loomdb(roles, pg_dsn):
    admin, _, _ = roles
    name = f"carol_{SUFFIX}"
    admin.rows(f"CREATE ROLE {name} LOGIN")
    try:
        with (
            psycopg.connect(f"{pg_dsn} user={name}", autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT loom_version()")
    finally:
        admin.rows(f"DROP ROLE {name}")


def test_alice_grants_bob_predicts_and_revokes(roles):
    admin, alice, bob = roles
    grant = json.loads(alice.scalar("SELECT loom_grant('m_alice', %s)", [BOB]))
    assert grant == {"model": "m_alice", "granted_to": BOB}
    assert bob.scalar("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])") in (0.0, 1.0)
    assert bob.scalar("SELECT count(*) FROM loom.models WHERE name = 'm_alice'") == 1
    assert "does not exist" not in bob.error("SELECT loom_drop_model('m_alice')")
    assert alice.scalar("SELECT count(*) FROM loom.models WHERE name = 'm_alice'") == 1
    assert "owner" in bob.error("SELECT loom_grant('m_alice', 'public')")
    alice.rows("SELECT loom_revoke('m_alice', %s)", [BOB])
    assert "does not exist" in bob.error("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])")


def test_a_forged_grant_exposes_nothing(roles):
    _, alice, bob = roles
    bob.rows(
        "INSERT INTO loom.grants (model, owner, grantee, granted_at) "
        "VALUES ('m_alice', current_user, current_user, now())"
    )
    assert bob.scalar("SELECT count(*) FROM loom.models WHERE name = 'm_alice'") == 0
    assert "row-level security" in bob.error(
        "INSERT INTO loom.grants (model, owner, grantee, granted_at) "
        f"VALUES ('m_alice', '{ALICE}', current_user, now())"
    )
    assert alice.scalar("SELECT count(*) FROM loom.grants WHERE grantee = %s", [BOB]) == 0


def test_deployed_functions_are_made_and_dropped_with_the_owners_rights(roles):
    admin, alice, bob = roles
    alice.rows("SELECT loom_deploy('m_alice')")
    owned = "SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE proname = %s"
    assert alice.scalar(owned, ["predict_m_alice"]) == ALICE
    alice.rows("SELECT loom_grant('m_alice', %s)", [BOB])
    assert "only its owner" in bob.error("SELECT loom_deploy('m_alice', '{\"name\": \"b_fn\"}')")
    alice.rows("SELECT loom_revoke('m_alice', %s)", [BOB])
    admin.rows("SELECT loom_train('m_admin', 'loomsec.secret', 'y', '{\"epochs\": 2}')")
    forged = (
        "INSERT INTO loom.deployments VALUES (%s, %s, current_user, 'm_admin', 'predict', 2, now())"
    )
    bob.rows(forged, ["pg_catalog", "float8pl"])  # the superuser's model, a system function
    bob.rows(forged, ["loomsec", "predict_m_alice"])  # alice's deployed function
    admin.rows("SELECT loom_deploy('m_admin')")
    retrain = (
        "SELECT loom_train('m_admin', 'loomsec.secret', 'y', '{\"epochs\": 2, \"replace\": true}')"
    )
    admin.rows(retrain)
    admin.rows("SELECT loom_drop_model('m_admin')")
    assert admin.scalar("SELECT 1.0::float8 + 2.0::float8") == 3.0
    assert admin.scalar("SELECT to_regprocedure('pg_catalog.float8pl(float8, float8)')::text")
    assert alice.scalar(owned, ["predict_m_alice"]) == ALICE
    assert admin.rows(owned, ["predict_m_admin"]) == []
    alice.rows("SELECT loom_train('m_alice', 'secret', 'y', '{\"epochs\": 3, \"replace\": true}')")
    assert alice.scalar(owned, ["predict_m_alice"]) == ALICE
    assert alice.scalar("SELECT predict_m_alice(3.0, 1.0)") == alice.scalar(
        "SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])"
    )
    alice.rows("SELECT loom_deploy('m_alice', '{\"drop\": true}')")
    assert alice.rows(owned, ["predict_m_alice"]) == []


def test_a_role_made_again_under_a_dropped_roles_name_inherits_nothing(roles, pg_dsn):
    """carol trains, builds an index, deploys, is granted alice's model; carol is dropped
    (DROP OWNED, DROP ROLE) and a new role takes her name: it sees none of it, and her model's
    name stays taken, as another role's model's is."""
    admin, alice, _ = roles
    carol = f"carol_{SUFFIX}"

    def make_carol() -> Role:
        admin.rows(f"CREATE ROLE {carol} LOGIN")
        admin.rows(f"GRANT loomdb_user TO {carol}")
        admin.rows(f"GRANT USAGE, CREATE ON SCHEMA loomsec TO {carol}")
        return Role(pg_dsn, carol)

    old = make_carol()
    try:
        old.rows(
            "CREATE TABLE carol_t AS SELECT g::float8 AS x, (g % 2)::float8 AS y "
            "FROM generate_series(1, 200) AS g"
        )
        old.rows("SELECT loom_train('m_carol', 'carol_t', 'y', '{\"epochs\": 2}')")
        old.rows(
            "SELECT loom_train('m_carol', 'carol_t', 'y', '{\"epochs\": 3, \"replace\": true}')"
        )  # a version kept
        old.rows("SELECT loom_create_index('ix_carol', 'carol_t', 'y', '{}')")
        old.rows("SELECT loom_deploy('m_carol')")
        alice.rows("SELECT loom_grant('m_alice', %s)", [carol])
        assert old.scalar("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])") in (0.0, 1.0)
        old.conn.close()
        admin.rows(f"DROP OWNED BY {carol} CASCADE")
        admin.rows(f"DROP ROLE {carol}")
        new = make_carol()
        for table, count in (
            ("models", 0),
            ("model_versions", 0),
            ("indexes", 0),
            ("deployments", 0),
            ("grants", 0),
        ):
            assert new.scalar(f"SELECT count(*) FROM loom.{table}") == count, table
        assert "does not exist" in new.error("SELECT loom_predict('m_carol', ARRAY[1.0])")
        assert "does not exist" in new.error("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])")
        assert "does not exist" in new.error("SELECT loom_drop_index('ix_carol')")
        new.rows(
            "CREATE TABLE carol_t AS SELECT g::float8 AS x, (g % 2)::float8 AS y "
            "FROM generate_series(1, 9) AS g"
        )
        taken = new.error("SELECT loom_train('m_carol', 'carol_t', 'y', '{\"replace\": true}')")
        assert "another role" in taken, taken
        orphans = (
            "SELECT count(*) FROM loom.{} AS t "
            "WHERE t.owner = %s AND NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = t.owner_role)"
        )
        assert admin.scalar(orphans.format("models"), [carol]) == 1  # kept for superusers
        assert admin.scalar(orphans.format("model_versions"), [carol]) == 1
        granted = admin.rows(
            "SELECT grantee_role IS NOT NULL, EXISTS (SELECT FROM pg_roles r "
            "WHERE r.oid = grantee_role) FROM loom.grants WHERE grantee = %s",
            [carol],
        )
        assert granted == [(True, False)]  # the grant names the dropped carol, not this one
        new.conn.close()
    finally:
        for table in ("models", "model_versions", "trials", "indexes", "deployments"):
            admin.rows(f"DELETE FROM loom.{table} WHERE owner = %s", [carol])
        admin.rows("DELETE FROM loom.grants WHERE grantee = %s OR owner = %s", [carol, carol])
        admin.rows("DROP TABLE IF EXISTS loom_data.ix_carol")
        if admin.rows("SELECT 1 FROM pg_roles WHERE rolname = %s", [carol]):
            admin.rows(f"DROP OWNED BY {carol} CASCADE")
            admin.rows(f"DROP ROLE {carol}")


def test_a_superuser_sees_everything(roles):
    admin, _, _ = roles
    owners = {r[0] for r in admin.rows("SELECT owner FROM loom.models")}
    assert ALICE in owners
    info = json.loads(admin.scalar("SELECT loom_model_info('m_alice')"))
    assert info["owner"] == ALICE


def test_files_on_the_server_need_pg_read_server_files_but_samples_do_not(roles):
    _, _, bob = roles
    assert "pg_read_server_files" in bob.error(
        "SELECT loom_load('libsvm', '/etc/passwd', 'loomsec.stolen')"
    )
    done = json.loads(bob.scalar("SELECT loom_load('sample', 'iris', 'loomsec.bob_iris')"))
    assert done["rows"] == 150


def test_public_in_any_case_grants_every_role(roles):
    """README's loom_grant takes a role or public: 'PUBLIC' was "role 'PUBLIC' does not
    exist", though GRANT … TO PUBLIC reads it in any case (no role may be named public)."""
    _, alice, bob = roles
    for spelling in ("PUBLIC", "Public"):
        grant = json.loads(alice.scalar("SELECT loom_grant('m_alice', %s)", [spelling]))
        assert grant == {"model": "m_alice", "granted_to": "public"}
        assert bob.scalar("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])") in (0.0, 1.0)
        revoked = json.loads(alice.scalar("SELECT loom_revoke('m_alice', %s)", [spelling]))
        assert revoked["grants_removed"] == 1
        assert "does not exist" in bob.error("SELECT loom_predict('m_alice', ARRAY[3.0, 1.0])")
    assert "does not exist" in alice.error("SELECT loom_grant('m_alice', 'PUBLICS')")


def test_index_am_check_by_hand_gets_an_error_with_a_hint(roles):
    """loom._index_am_check is executable by loomdb_user: ARRAY[NULL] was an AttributeError."""
    _, alice, _ = roles
    for options in ("ARRAY[NULL]::text[]", "ARRAY['label']", "ARRAY[['label=y']]"):
        with pytest.raises(psycopg.errors.SyntaxError) as info:
            alice.rows(f"SELECT loom._index_am_check('toc', {options})")
        assert "'name=value' texts" in str(info.value)
        assert info.value.diag.message_hint and "WITH (label" in info.value.diag.message_hint


def _epoch_call(n_features: int, features: int, W_rows: int, state=None):
    """loom._epoch_step's arguments for one forged dense row of ``features`` values, with the
    checksums its forger computed, and a job of ``n_features`` over a W of ``W_rows`` rows."""
    import numpy as np

    from loomdb.codecs import dense
    from loomdb.learn import shard_state
    from loomdb.store import storage

    uid = "00" * 16
    parts = [
        bytes(dense.encode(np.ones((1, 1)), "float64")),
        bytes(dense.encode(np.ones((1, features)), "float64")),
    ]
    crcs = [storage.checksum(uid, 0, p, 1, 1, b) for p, b in enumerate(parts)]
    read = {"format": "dense", "n_features": n_features, "precision": 32, "parts": 1,
            "uid": uid, "version": 1, "index": "x", "shards": 1}  # fmt: skip
    scalars = {"read": read, "state.tmax": 1, "state.t": 1, "kind": "logistic",
               "optimizer": "nesterov", "lr": 0.1, "l1": 0.0, "l2": 0.0,
               "fit_intercept": True, "widest": 1, "classes": [0.0, 1.0]}  # fmt: skip
    arrays = {"W": np.zeros((W_rows, 1)), "b": np.zeros(1), "shift": np.zeros(W_rows),
              "scale": np.ones(W_rows), "state.vW": np.zeros((W_rows, 1)),
              "state.vb": np.zeros(1)}  # fmt: skip
    job = shard_state.pack([(scalars, arrays)])
    sql = (
        "SELECT length(loom._epoch_step(%s, 0, '{0,0}', '{1,1}', '{0,1}', '{1,1}', "
        "%s::bytea[], %s::bigint[], %s))"
    )
    return sql, [state, parts, crcs, job]


def test_a_forged_parallel_epoch_job_is_refused_and_the_server_lives(roles):
    """loom._epoch_step is executable by loomdb_user (parallel workers run as the caller):
    one row of 2,000,000 features against a job's W of (1, 1), with its checksums computed,
    killed the backend with signal 11 and put the cluster through crash recovery; 8 features
    against a W of 2 wrote out of bounds silently."""
    admin, alice, _ = roles
    started = admin.scalar("SELECT pg_postmaster_start_time()")
    for n_features, features, W_rows in ((2_000_000, 2_000_000, 1), (8, 8, 2), (8, 2_000, 8)):
        with pytest.raises(psycopg.Error) as info:
            alice.rows(*_epoch_call(n_features, features, W_rows))
        assert "malformed parallel epoch job" in str(info.value) or "holds (1, " in str(info.value)
        assert info.value.diag.message_hint
    sql, args = _epoch_call(2, 2, 2)  # a well-formed job still trains
    assert alice.scalar(sql, args) > 0
    assert admin.scalar("SELECT pg_postmaster_start_time()") == started
