"""``ALTER EXTENSION loomdb UPDATE`` from each released version to this one.  From 0.1.0: models
kept, 0.1.0's indexes dropped with a warning, the multi-user rules and every function in place.
From 0.2.0: models, trials and the access methods (with the indexes made by them) kept, the
multi-user rules made again, trials gaining the metric they were scored by.  From 0.3.0 (and the
others): every row kept gains its owner by identity, and a grant its grantee's, where a role of
that name exists; a row whose role is gone is seen by superusers only."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.postgres
OLD = Path(__file__).resolve().parents[1] / "fixtures" / "extension" / "loomdb--0.1.0.sql"
CURRENT = "0.4.0"


def _from(pg_dsn: str, old: Path, check) -> None:
    """``check(pg_dsn, database)`` in a fresh database, with ``old``'s install script where
    CREATE EXTENSION … VERSION finds it."""
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: it writes the extension directory")
    database = f"loom_upgrade_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        share = admin.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'").fetchone()
        assert share is not None
        old_script = Path(share[0]) / "extension" / old.name
        old_script.write_text(old.read_text())
        admin.execute(f"CREATE DATABASE {database}")
    try:
        check(pg_dsn, database)
    finally:
        old_script.unlink()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database}")


def test_a_0_1_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD, upgraded)


def test_a_0_2_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD.with_name("loomdb--0.2.0.sql"), upgraded_from_0_2_0)


def test_a_0_3_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD.with_name("loomdb--0.3.0.sql"), upgraded_from_0_3_0)


def upgraded(pg_dsn: str, database: str) -> None:
    notices: list[str] = []
    model = {
        "coefficients": "[[1.5], [-2.0]]",
        "intercept": "[0.25]",
        "feature_names": '["a", "b"]',
        "classes": "[0.0, 1.0]",
        "standardization": '{"method": "none", "shift": [0.0, 0.0], "scale": [1.0, 1.0]}',
    }
    with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("CREATE EXTENSION plpython3u")
        conn.execute("CREATE EXTENSION loomdb VERSION '0.1.0'")
        conn.execute(
            "INSERT INTO loom.models (name, uid, kind, coefficients, intercept, feature_names, "
            "classes, standardization, options, history) VALUES ('old_m', 'u1', 'logistic', "
            "%(coefficients)s, %(intercept)s, %(feature_names)s, %(classes)s, "
            "%(standardization)s, '{}', '[]')",
            model,
        )
        conn.execute('CREATE TABLE loom."ix_old_ix" (batch integer)')
        conn.execute(
            "INSERT INTO loom.indexes (name, storage_table) "
            "VALUES ('old_ix', 'loom.\"ix_old_ix\"; DROP TABLE loom.models')"
        )
        conn.execute(
            "CREATE TABLE t AS SELECT g::float8 AS a, (g % 3)::float8 AS b, (g % 2)::float8 AS y "
            "FROM generate_series(1, 50) AS g"
        )
        _call_the_0_1_0_functions(conn)
        conn.execute(f"ALTER EXTENSION loomdb UPDATE TO '{CURRENT}'")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'loomdb'")
        assert version.fetchone() == (CURRENT,)
        assert _signatures(conn) == _fresh_signatures(pg_dsn)
        assert any("index old_ix is dropped" in n for n in notices), notices
        assert conn.execute("SELECT count(*) FROM loom.indexes").fetchone() == (0,)
        gone = conn.execute("SELECT to_regclass('loom.ix_old_ix')").fetchone()
        assert gone == (None,)
        owners = conn.execute("SELECT owner, owner_role::text FROM loom.models").fetchall()
        assert owners == [("postgres", "postgres")]
        assert conn.execute("SELECT loom_predict('old_m', ARRAY[1.0, 0.0])").fetchone() == (1.0,)
        weights = conn.execute("SELECT feature, weight, rank FROM loom_weights('old_m')")
        assert weights.fetchall() == [("a", 1.5, 2), ("b", -2.0, 1), ("(intercept)", 0.25, None)]
        conn.execute("SELECT loom_train('new_m', 't', 'y', '{\"epochs\": 2}')")
        _the_0_1_0_calls_still_run(conn)
        info = json.loads(conn.execute("SELECT loom_model_info('new_m')").fetchone()[0])
        assert info["owner"] == "postgres"
        grantable = conn.execute(
            "SELECT has_function_privilege('loomdb_user', 'loom_grant(text, text)', 'EXECUTE')"
        )
        assert grantable.fetchone() == (True,)
        versions = "SELECT version, current FROM loom_model_versions('old_m')"
        assert conn.execute(versions).fetchall() == [(1, True)]  # a 0.1.0 model is version 1
        conn.execute("SELECT loom_train('old_m', 't', 'y', '{\"epochs\": 2, \"replace\": true}')")
        assert conn.execute(versions).fetchall() == [(1, False), (2, True)]
        conn.execute("SELECT loom_rollback('old_m')")
        assert conn.execute("SELECT loom_predict('old_m', ARRAY[1.0, 0.0])").fetchone() == (1.0,)


def _call_the_0_1_0_functions(conn) -> None:
    """A user's objects that hold 0.1.0's loom_evaluate(text, text) and loom_drop_model(text)
    by identity: a view, and a function whose body PostgreSQL parsed (BEGIN ATOMIC)."""
    conn.execute("CREATE VIEW scores AS SELECT loom_evaluate('new_m', 't') AS metrics")
    conn.execute(
        "CREATE FUNCTION forget(m text) RETURNS text BEGIN ATOMIC SELECT loom_drop_model(m); END"
    )


def _the_0_1_0_calls_still_run(conn) -> None:
    """By name, loom_evaluate(m, source) and loom_drop_model(m) find one function each, as on a
    fresh install; the user's objects holding 0.1.0's functions still run them."""
    by_name = json.loads(conn.execute("SELECT loom_evaluate('new_m', 't')").fetchone()[0])
    held = json.loads(conn.execute("SELECT metrics FROM scores").fetchone()[0])
    assert held == by_name and held["rows"] == 50
    for model in ("gone_a", "gone_b"):
        conn.execute(f"SELECT loom_train('{model}', 't', 'y', '{{\"epochs\": 1}}')")
    conn.execute("SELECT forget('gone_a')")
    conn.execute("SELECT loom_drop_model('gone_b')")
    left = "SELECT count(*) FROM loom.models WHERE name IN ('gone_a', 'gone_b')"
    assert conn.execute(left).fetchone() == (0,)


SIGNATURES = """
SELECT p.pronamespace = e.extnamespace, p.pronamespace::regnamespace::text, p.proname::text,
       pg_catalog.pg_get_function_identity_arguments(p.oid), p.pronargdefaults
FROM pg_catalog.pg_depend AS d
JOIN pg_catalog.pg_extension AS e ON d.refobjid = e.oid AND e.extname = 'loomdb'
JOIN pg_catalog.pg_proc AS p ON d.objid = p.oid
WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e' AND p.proname !~ '^_'
ORDER BY 1, 2, 3, 4
"""


def _signatures(conn) -> list[tuple]:
    """The extension's functions but its internal ones (``loom._…``), by schema (the
    extension's: what a call by name chooses among; loom: what a dumped view may name)."""
    return conn.execute(SIGNATURES).fetchall()  # type: ignore[arg-type]


def _fresh_signatures(pg_dsn: str) -> list[tuple]:
    with psycopg.connect(pg_dsn) as fresh:  # where loomdb pg install ran CREATE EXTENSION
        return _signatures(fresh)


def upgraded_from_0_2_0(pg_dsn: str, database: str) -> None:
    with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
        conn.execute("CREATE EXTENSION plpython3u")
        conn.execute("CREATE EXTENSION loomdb VERSION '0.2.0'")
        methods = "SELECT amname FROM pg_am WHERE amname IN ('dense', 'toc', 'mlweaving', 'pcr')"
        before = sorted(r[0] for r in conn.execute(methods))
        conn.execute(
            "INSERT INTO loom.models (name, uid, kind, coefficients, intercept, feature_names, "
            "classes, standardization, options, history, version) VALUES ('old_m', 'u1', "
            "'logistic', '[[1.5], [-2.0]]', '[0.25]', '[\"a\", \"b\"]', '[0.0, 1.0]', "
            '\'{"method": "none", "shift": [0.0, 0.0], "scale": [1.0, 1.0]}\', '
            "'{}', '[]', 1)"
        )
        conn.execute(
            "INSERT INTO loom.trials (model, trial, status, options, score, seconds) "
            "VALUES ('old_m', 1, 'ok', '{}', 0.5, 1.0)"
        )
        conn.execute(
            "CREATE TABLE t AS SELECT g::float8 AS a, (g % 3)::float8 AS b, "
            "CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END AS y, (g % 2)::float8 AS n "
            "FROM generate_series(1, 50) AS g"
        )
        if before:  # an index made by CREATE INDEX … USING, where this server has the methods
            with psycopg.connect(pg_dsn) as main:  # where this server's loomdb environment is
                settings = main.execute("SELECT key, value FROM loom.settings").fetchall()
            for key, value in settings:
                conn.execute("UPDATE loom.settings SET value = %s WHERE key = %s", [value, key])
            conn.execute("CREATE INDEX t_dense ON t USING dense (a, b) WITH (label = n)")
        conn.execute("ALTER EXTENSION loomdb UPDATE")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'loomdb'")
        assert version.fetchone() == (CURRENT,)
        assert _signatures(conn) == _fresh_signatures(pg_dsn)
        assert sorted(r[0] for r in conn.execute(methods)) == before  # never dropped
        assert conn.execute("SELECT loom_predict('old_m', ARRAY[1.0, 0.0])").fetchone() == (1.0,)
        trials = conn.execute("SELECT trial, score, metric FROM loom_trials('old_m')")
        assert trials.fetchall() == [(1, 0.5, "validation loss")]
        policies = "SELECT count(*) FROM pg_policy WHERE polrelid::regclass::text LIKE 'loom.%'"
        assert conn.execute(policies).fetchone() == (9,)
        dropped = "SELECT count(*) FROM pg_event_trigger WHERE evtname = 'loom_index_am_drop'"
        assert conn.execute(dropped).fetchone() == (1,)
        options = '{"epochs": 2, "features": ["a", "b"]}'
        conn.execute(f"SELECT loom_train('new_m', 't', 'y', '{options}')")
        predicted = conn.execute("SELECT DISTINCT loom_predict_class('new_m', t) FROM t")
        assert {r[0] for r in predicted} <= {"even", "odd"}
        if before:  # the index survived the update, and trains
            conn.execute("SELECT loom_train('ix_m', NULL, NULL, '{\"index\": \"t_dense\"}')")


def upgraded_from_0_3_0(pg_dsn: str, database: str) -> None:
    """Rows of a role that exists gain it, and keep working for it; rows of a name no role has
    (the role was dropped) gain none: a role made later under that name does not see them."""
    suffix = uuid.uuid4().hex[:6]
    kept, gone = f"kept_{suffix}", f"gone_{suffix}"
    model = (
        "INSERT INTO loom.models (name, owner, uid, kind, coefficients, intercept, "
        "feature_names, classes, standardization, options, history, version) VALUES (%s, %s, "
        "'u1', 'logistic', '[[1.5], [-2.0]]', '[0.25]', '[\"a\", \"b\"]', '[0.0, 1.0]', "
        '\'{"method": "none", "shift": [0.0, 0.0], "scale": [1.0, 1.0]}\', \'{}\', \'[]\', 1)'
    )
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {kept} LOGIN")  # type: ignore[arg-type]
    try:
        with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION plpython3u")
            conn.execute("CREATE EXTENSION loomdb VERSION '0.3.0'")
            conn.execute(f"GRANT loomdb_user TO {kept}")  # type: ignore[arg-type]
            conn.execute(model, [f"m_{kept}", kept])
            conn.execute(model, [f"m_{gone}", gone])
            conn.execute(
                "INSERT INTO loom.grants (model, owner, grantee, granted_at) "
                "VALUES (%s, %s, %s, now()), (%s, %s, %s, now())",
                [f"m_{kept}", kept, gone, f"m_{gone}", gone, kept],
            )
            conn.execute("ALTER EXTENSION loomdb UPDATE")
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'loomdb'")
            assert version.fetchone() == (CURRENT,)
            assert _signatures(conn) == _fresh_signatures(pg_dsn)
            roles = "SELECT name, owner_role::text FROM loom.models ORDER BY name"
            assert conn.execute(roles).fetchall() == [(f"m_{gone}", None), (f"m_{kept}", kept)]
            grants = "SELECT grantee, grantee_role::text FROM loom.grants ORDER BY grantee"
            assert conn.execute(grants).fetchall() == [(gone, None), (kept, kept)]
        with psycopg.connect(f"{pg_dsn} dbname={database} user={kept}", autocommit=True) as own:
            seen = own.execute("SELECT name FROM loom.models").fetchall()
            assert seen == [(f"m_{kept}",)]  # not m_gone, although it was granted to this name
            assert own.execute(f"SELECT loom_predict('m_{kept}', ARRAY[1.0, 0.0])").fetchone() == (
                1.0,
            )
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {gone} LOGIN")  # type: ignore[arg-type]
        with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
            conn.execute(f"GRANT loomdb_user TO {gone}")  # type: ignore[arg-type]
        with psycopg.connect(f"{pg_dsn} dbname={database} user={gone}", autocommit=True) as late:
            assert late.execute("SELECT name FROM loom.models").fetchall() == []
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            for role in (kept, gone):
                admin.execute(f"DROP ROLE IF EXISTS {role}")  # type: ignore[arg-type]
