"""``ALTER EXTENSION loomdb UPDATE`` from each released version to this one.  From 0.1.0: models
kept, 0.1.0's indexes dropped with a warning, the multi-user rules and every function in place.
From 0.2.0: models, trials and the access methods (with the indexes made by them) kept, the
multi-user rules made again, trials gaining the metric they were scored by.  From 0.3.0 (and the
others): every row kept gains its owner by identity, and a grant its grantee's, where a role of
that name exists; a row whose role is gone is seen by superusers only.  From 0.4.0 and 0.5.0 as
released: the catalog and a CREATE INDEX … USING index kept, and what changed in its SQL since
brought (0.5.0's trials kept and listed, the trials gaining the model version of their search).
Each update leaves what a fresh install makes, compared kind by kind (``SCHEMA``)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import psycopg
import pytest

import loomdb

pytestmark = pytest.mark.postgres
REPO = Path(__file__).resolve().parents[2]
OLD = REPO / "tests" / "fixtures" / "extension" / "loomdb--0.1.0.sql"
CURRENT = loomdb.__version__


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
        there = old_script.read_text() if old_script.exists() else None
        old_script.write_text(old.read_text())
        admin.execute(f"CREATE DATABASE {database}")
    try:
        check(pg_dsn, database)
    finally:
        if there is None:
            old_script.unlink()
        else:  # an earlier install's script of that version: put back as it was
            old_script.write_text(there)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database}")


def test_a_0_1_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD, upgraded)


def test_a_0_2_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD.with_name("loomdb--0.2.0.sql"), upgraded_from_0_2_0)


def test_a_0_3_0_catalog_is_upgraded(pg_dsn):
    _from(pg_dsn, OLD.with_name("loomdb--0.3.0.sql"), upgraded_from_0_3_0)


@pytest.mark.parametrize("old", ["0.4.0", "0.5.0"])
def test_a_released_catalog_is_upgraded(pg_dsn, old):
    _from(pg_dsn, OLD.with_name(f"loomdb--{old}.sql"), lambda d, db: upgraded_from(d, db, old))


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
        _same_as_a_fresh_install(conn, pg_dsn)
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


# What an install makes, kind by kind, in words that do not depend on OIDs or on the order
# things were made in: what an update leaves must read the same as a fresh install.  A kind's
# rows are sorted; ACLs are sorted lists of their items.
MEMBER = """
WITH m AS (
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend AS d
    JOIN pg_catalog.pg_extension AS e ON d.refobjid = e.oid AND e.extname = 'loomdb'
    WHERE d.deptype = 'e'
)
"""
ACL = "(SELECT array_agg(a::text ORDER BY a::text) FROM unnest({}) AS a)"
LOOM_SCHEMAS = "n.nspname = 'loom'"  # loom_data holds indexes' storage: users' data
SCHEMA = {
    "members": MEMBER
    + "SELECT pg_catalog.pg_describe_object(m.classid, m.objid, 0) FROM m ORDER BY 1",
    # by schema: the extension's (what a call by name chooses among) and loom's
    "functions": MEMBER
    + f"""SELECT p.pronamespace = e.extnamespace, p.oid::regprocedure::text,
       CASE WHEN p.prokind = 'a' THEN (
           SELECT concat_ws(' ', a.aggtransfn::regprocedure, a.aggfinalfn, a.aggcombinefn,
                            a.aggserialfn, a.aggdeserialfn, a.aggtranstype::regtype)
           FROM pg_catalog.pg_aggregate AS a WHERE a.aggfnoid = p.oid)
       ELSE pg_catalog.pg_get_functiondef(p.oid) END,
       p.proparallel, {ACL.format("p.proacl")}, pg_catalog.obj_description(p.oid, 'pg_proc')
FROM m JOIN pg_catalog.pg_proc AS p
    ON m.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = m.objid
CROSS JOIN pg_catalog.pg_extension AS e WHERE e.extname = 'loomdb' ORDER BY 1, 2""",
    "schemas": f"""SELECT n.nspname, n.nspowner::regrole::text, {ACL.format("n.nspacl")},
       pg_catalog.obj_description(n.oid, 'pg_namespace')
FROM pg_catalog.pg_namespace AS n WHERE n.nspname IN ('loom', 'loom_data') ORDER BY 1""",
    "relations": f"""SELECT c.oid::regclass::text, c.relkind, c.relrowsecurity,
       c.relforcerowsecurity, {ACL.format("c.relacl")}
FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE {LOOM_SCHEMAS} ORDER BY 1""",
    "columns": f"""SELECT c.oid::regclass::text, a.attname,
       pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid)
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p', 'v', 'm')
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE {LOOM_SCHEMAS} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2""",
    "constraints": f"""SELECT k.conrelid::regclass::text, k.conname,
       pg_catalog.pg_get_constraintdef(k.oid)
FROM pg_catalog.pg_constraint AS k JOIN pg_catalog.pg_namespace AS n ON n.oid = k.connamespace
WHERE {LOOM_SCHEMAS} ORDER BY 1, 2""",
    "indexes": f"""SELECT i.indexrelid::regclass::text, pg_catalog.pg_get_indexdef(i.indexrelid)
FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.indrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace WHERE {LOOM_SCHEMAS} ORDER BY 1""",
    "policies": """SELECT schemaname, tablename, policyname, permissive, roles::text[], cmd, qual,
       with_check
FROM pg_catalog.pg_policies WHERE schemaname = 'loom' ORDER BY 1, 2, 3""",
    "triggers": f"""SELECT t.tgrelid::regclass::text, t.tgname, pg_catalog.pg_get_triggerdef(t.oid)
FROM pg_catalog.pg_trigger AS t JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE {LOOM_SCHEMAS} AND NOT t.tgisinternal ORDER BY 1, 2""",
    "event triggers": """SELECT evtname, evtevent, evttags, evtfoid::regprocedure::text, evtenabled,
       pg_catalog.obj_description(oid, 'pg_event_trigger')
FROM pg_catalog.pg_event_trigger WHERE evtfoid::regprocedure::text LIKE 'loom.%'
ORDER BY 1""",
    "access methods": """SELECT a.amname, a.amtype, a.amhandler::regproc::text,
       pg_catalog.obj_description(a.oid, 'pg_am'),
       (SELECT array_agg(concat_ws(' ', o.opcname, o.opcintype::regtype, o.opcdefault,
                                   o.opckeytype::regtype) ORDER BY o.opcname)
        FROM pg_catalog.pg_opclass AS o WHERE o.opcmethod = a.oid)
FROM pg_catalog.pg_am AS a WHERE a.amhandler::regproc::text LIKE 'loom.%' ORDER BY 1""",
    "dumped tables": """SELECT array_agg(c::regclass::text ORDER BY c::regclass::text)
FROM pg_catalog.pg_extension AS e, unnest(e.extconfig) AS c WHERE e.extname = 'loomdb'""",
    "settings": "SELECT key, value FROM loom.settings ORDER BY 1",
}


def _schema(conn) -> dict[str, list[tuple]]:
    return {kind: conn.execute(query).fetchall() for kind, query in SCHEMA.items()}


def _same_as_a_fresh_install(conn, pg_dsn: str) -> None:
    """What the update left reads, kind by kind, as what CREATE EXTENSION made in the database
    loomdb pg install ran in."""
    with psycopg.connect(pg_dsn) as fresh:
        expected = _schema(fresh)
    got = _schema(conn)
    for kind, rows in expected.items():
        assert got[kind] == rows, kind


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
        _same_as_a_fresh_install(conn, pg_dsn)
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
            _same_as_a_fresh_install(conn, pg_dsn)
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


def upgraded_from(pg_dsn: str, database: str, old: str) -> None:
    """The README's update of a released ``old`` (ALTER EXTENSION loomdb UPDATE) brings what
    changed in its SQL since: the catalog and its models are kept, an index made by CREATE
    INDEX … USING too, and an ALTER INDEX that leaves it unbuildable is refused now; a trial
    that version wrote (no model version) is kept and listed, and the trials gain the version
    column this one writes."""
    said: list[str] = []
    with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
        conn.add_notice_handler(lambda d: said.append(f"{d.message_primary} {d.message_hint}"))
        conn.execute("CREATE EXTENSION plpython3u")
        conn.execute(f"CREATE EXTENSION loomdb VERSION '{old}'")
        with psycopg.connect(pg_dsn) as main:  # where this server's loomdb environment is
            settings = main.execute("SELECT key, value FROM loom.settings").fetchall()
        for key, value in settings:
            conn.execute("UPDATE loom.settings SET value = %s WHERE key = %s", [value, key])
        conn.execute(
            "CREATE TABLE t AS SELECT g::float8 AS a, (g % 3)::float8 AS b, (g % 2)::float8 AS y "
            "FROM generate_series(1, 50) AS g"
        )
        conn.execute("SELECT loom_train('kept', 't', 'y', '{\"epochs\": 2}')")
        predict = "SELECT loom_predict_proba('kept', ARRAY[a, b]) FROM t ORDER BY a"
        before = conn.execute(predict).fetchall()
        behind = [w for w in said if f"loomdb SQL is version {old}" in w]
        assert len(behind) == 1 and "ALTER EXTENSION loomdb UPDATE" in behind[0], said
        conn.execute(  # a trial as that version wrote it
            "INSERT INTO loom.trials (model, trial, status, options, score, seconds, metric) "
            "VALUES ('kept', 1, 'ok', '{}', 0.5, 0.1, 'validation loss')"
        )
        methods = conn.execute("SELECT amname FROM pg_am WHERE amname = 'dense'").fetchall()
        if methods:
            conn.execute("CREATE INDEX t_dense ON t USING dense (a, b) WITH (label = y)")
        conn.execute("ALTER EXTENSION loomdb UPDATE")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'loomdb'")
        assert version.fetchone() == (CURRENT,)
        _same_as_a_fresh_install(conn, pg_dsn)
        assert conn.execute(predict).fetchall() == before
        listed = conn.execute("SELECT trial, score, metric FROM loom_trials('kept')").fetchall()
        assert listed == [(1, 0.5, "validation loss")]
        conn.execute("SELECT loom_train('dropped', 't', 'y', '{\"epochs\": 1}')")
        conn.execute("SELECT loom_drop_model('dropped')")  # the default is no longer NULL
        assert conn.execute("SELECT name FROM loom.models").fetchall() == [("kept",)]
        if methods:  # the index survived the update, trains, and is guarded by the new trigger
            conn.execute("SELECT loom_train('ix_m', NULL, NULL, '{\"index\": \"t_dense\"}')")
            with pytest.raises(psycopg.Error, match="names no label column"):
                conn.execute("ALTER INDEX t_dense RESET (label)")
    said.clear()
    with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
        conn.add_notice_handler(lambda d: said.append(f"{d.message_primary} {d.message_hint}"))
        assert conn.execute(predict).fetchall() == before
    assert not [w for w in said if "loomdb SQL is version" in w], said


def test_loomdb_pg_install_updates_a_0_4_0_database_and_names_the_others(pg_dsn, wheel_python):
    """The README's update, as it writes it: loomdb pg install --dsn "…" again (the command of
    the wheel's environment), into a database at 0.4.0, updates it in place keeping its model;
    another database of the server still at 0.4.0 (which now runs this version's Python under
    0.4.0's SQL) is named with the command that updates it."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    cli = wheel_python.parent / "loomdb"
    _from(
        pg_dsn,
        OLD.with_name("loomdb--0.4.0.sql"),
        lambda dsn, database: installed_over_0_4_0(dsn, database, cli),
    )


def installed_over_0_4_0(pg_dsn: str, database: str, cli: Path) -> None:
    from loomdb.engines.postgres import server_setup
    from support import pgserver

    other = f"{database}_other"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {other}")  # type: ignore[arg-type]
    try:
        for name in (database, other):
            with psycopg.connect(f"{pg_dsn} dbname={name}", autocommit=True) as conn:
                conn.execute("CREATE EXTENSION loomdb VERSION '0.4.0' CASCADE")
        with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
            conn.execute(
                "INSERT INTO loom.models (name, uid, kind, coefficients, intercept, "
                "feature_names, classes, standardization, options, history, version) VALUES "
                "('kept', 'u1', 'logistic', '[[1.5], [-2.0]]', '[0.25]', '[\"a\", \"b\"]', "
                '\'[0.0, 1.0]\', \'{"method": "none", "shift": [0.0, 0.0], '
                "\"scale\": [1.0, 1.0]}', '{}', '[]', 1)"
            )
        said = pgserver.readme_install(lambda: cli, f"{pg_dsn} dbname={database}")
        assert f"loomdb {CURRENT} updated in" in said, said
        there = server_setup.describe_dsn(f"{pg_dsn} dbname={other}")
        assert f"database {other} holds loomdb 0.4.0" in said, said
        assert f'loomdb pg install --dsn "{there}"' in said, said
        with psycopg.connect(f"{pg_dsn} dbname={database}", autocommit=True) as conn:
            _same_as_a_fresh_install(conn, pg_dsn)
            assert conn.execute("SELECT loom_predict('kept', ARRAY[1.0, 0.0])").fetchone() == (1.0,)
        with psycopg.connect(f"{pg_dsn} dbname={other}", autocommit=True) as conn:
            conn.execute("ALTER EXTENSION loomdb UPDATE")  # what the line says, in SQL
            _same_as_a_fresh_install(conn, pg_dsn)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")  # type: ignore[arg-type]


@pytest.mark.parametrize("elsewhere", [False, True], ids=["its database", "another database"])
def test_loomdb_pg_install_refuses_a_newer_database_before_writing(pg_dsn, tmp_path, elsewhere):
    """A database holding a loomdb newer than this one (no update leads back) is refused up
    front, whether the DSN names it or another database of the server holds it: the install
    used to replace the server's environment (which every database imports loomdb from) and
    extension files with this older loomdb first — then fail at ALTER EXTENSION, or, for
    another database, say nothing — leaving the newer SQL running the older code."""
    from support import pgserver

    if pgserver.cluster is None or pgserver.cluster["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    newer = tmp_path / "loomdb--99.0.0.sql"  # this version's script, as a newer one
    newer.write_text((REPO / "extension" / f"loomdb--{CURRENT}.sql").read_text())
    _from(
        pg_dsn,
        newer,
        lambda dsn, database: refused_over_a_newer_version(dsn, database, elsewhere),
    )


def refused_over_a_newer_version(pg_dsn: str, database: str, elsewhere: bool) -> None:
    from loomdb.engines.postgres import install
    from loomdb.errors import LoomStateError

    dsn = f"{pg_dsn} dbname={database}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION loomdb VERSION '99.0.0' CASCADE")
        share = conn.execute("SELECT setting FROM pg_config WHERE name = 'SHAREDIR'").fetchone()
    assert share is not None
    control = Path(share[0]) / "extension" / "loomdb.control"
    before = control.stat().st_mtime_ns
    lines: list[str] = []
    where = f"database {database} of this server" if elsewhere else "the database"
    with pytest.raises(LoomStateError, match=f"{where} holds loomdb 99.0.0") as refused:
        install.install(pg_dsn if elsewhere else dsn, log=lines.append)
    assert ("DROP EXTENSION" if elsewhere else "--reinstall") in refused.value.hint
    assert control.stat().st_mtime_ns == before
    assert not any("wrote" in line for line in lines), lines
