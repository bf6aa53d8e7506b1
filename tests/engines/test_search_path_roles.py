"""PostgreSQL: no role's function or operator is chosen by the SQL loomdb runs for another role.

bob plants, in a schema on alice's search_path where he may create, overloads of the built-in
functions loomdb calls that would be exact matches where pg_catalog's need a cast or are
polymorphic (CVE-2018-1058's pattern): ``hashint8extended(bigint, integer)`` (the shuffled
read), ``hashfloat8extended(double precision, integer)`` (the source's fingerprint),
``array_send(double precision[])`` (the packed read), ``unnest`` of each array type loomdb
writes (its layouts), the aggregates of its profile over double precision where pg_catalog's
take another type, and ``to_jsonb(<alice's row type>)`` (the row forms of predict).  Each
records who ran it in bob's table.  alice trains and predicts with the row forms, then a
superuser does the same on alice's table: none of bob's functions may run, and the results
are those without them.  Later tests plant what other loomdb SQL would pick: lookalike
``loom_*`` functions before the extension's schema (``loomdb sql``'s rewrites, ``loomdb plot``)
and a ``loom_predict(text, integer[])`` in it (``infer_mlweaving``), a ``pg_has_role`` saying
yes (``loom_load``'s check) and a ``current_schema()`` ahead of pg_catalog (``loom_deploy``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from support.roles import connect, names, two_roles

pytestmark = pytest.mark.postgres

ALICE, BOB, SCHEMA = names("alicesp")

#: (name, arguments, return type, the body's value: pg_catalog's own answer)
TRAPS = [
    (
        "hashint8extended",
        "v bigint, seed integer",
        "bigint",
        "pg_catalog.hashint8extended(v, seed)",
    ),
    (
        "hashfloat8extended",
        "v double precision, seed integer",
        "bigint",
        "pg_catalog.hashfloat8extended(v, seed)",
    ),
    ("array_send", "a double precision[]", "bytea", "pg_catalog.array_send(a)"),
    ("to_jsonb", f"r {SCHEMA}.pts", "jsonb", "pg_catalog.to_jsonb(r)"),
]
#: set-returning traps: (name, argument, element type)
SET_TRAPS = [
    ("unnest", "double precision[]", "double precision"),
    ("unnest", "bigint[]", "bigint"),
    ("unnest", "integer[]", "integer"),
    ("unnest", "text[]", "text"),
    ("unnest", "bytea[]", "bytea"),
    ("unnest", "boolean[]", "boolean"),
]


def _recording(
    bob: psycopg.Connection, name: str, args: str, returns: str, value: str | None = "NULL"
) -> None:
    """bob's ``name(args)``, which anyone may run: it records who ran it in ``ran``, then
    returns ``value`` (nothing, for a table)."""
    done = "RETURN;" if value is None else f"RETURN {value};"
    bob.execute(
        f"CREATE FUNCTION {name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $$ BEGIN "  # type: ignore[arg-type]
        f"INSERT INTO {SCHEMA}.ran VALUES (current_user, '{name}'); {done} END $$"
    )
    bob.execute(f"GRANT EXECUTE ON FUNCTION {name}({args}) TO PUBLIC")  # type: ignore[arg-type]


def _plant(bob: psycopg.Connection) -> None:
    note = "INSERT INTO {s}.ran VALUES (current_user, '{f}');"
    for name, args, returns, value in TRAPS:
        _recording(bob, name, args, returns, value)
    for name, arg, element in SET_TRAPS:
        bob.execute(
            f"CREATE FUNCTION {name}(a {arg}) RETURNS SETOF {element} LANGUAGE plpgsql AS $$ "  # type: ignore[arg-type]
            f"BEGIN {note.format(s=SCHEMA, f=name)} "
            "RETURN QUERY SELECT pg_catalog.unnest(a); END $$"
        )


def ran(bob: psycopg.Connection) -> list[tuple]:
    """Who ran which of bob's functions (each once)."""
    return bob.execute("SELECT DISTINCT who, what FROM ran ORDER BY 1, 2").fetchall()


@pytest.fixture(scope="module")
def roles(pg_dsn) -> Iterator[tuple[psycopg.Connection, psycopg.Connection, psycopg.Connection]]:
    with two_roles(
        pg_dsn, ALICE, BOB, SCHEMA, ("models", "model_versions", "indexes", "deployments")
    ) as pair:
        pair[1].execute("CREATE TABLE ran (who text, what text)")
        pair[1].execute("GRANT INSERT ON ran TO PUBLIC")
        yield (*pair, connect(pg_dsn, "postgres", SCHEMA))


def _train_and_predict(conn: psycopg.Connection, model: str) -> list[tuple]:
    """Train ``model`` on pts (a shuffled read) and on an index of it (its storage written,
    the source's fingerprint checked), and predict with every form of predict."""
    options = {"model": "logistic", "epochs": 3, "replace": True}
    on_index = json.dumps({**options, "index": f"{model}_ix"})
    conn.execute(f"SELECT loom_train('{model}', 'pts', 'y', '{json.dumps(options)}')")  # type: ignore[arg-type]
    conn.execute(f"SELECT loom_create_index('{model}_ix', 'pts', 'y', '{{}}')")  # type: ignore[arg-type]
    conn.execute(f"SELECT loom_train('{model}_on_ix', NULL, 'y', '{on_index}')")  # type: ignore[arg-type]
    conn.execute(f"SELECT loom_drop_model('{model}_on_ix'), loom_drop_index('{model}_ix')")  # type: ignore[arg-type]
    return conn.execute(
        f"SELECT loom_predict('{model}', t), loom_predict_row('{model}', t), "  # type: ignore[arg-type]
        f"loom_predict_class('{model}', t), loom_predict_class_row('{model}', t), "
        f"loom_predict('{model}', ARRAY[x, z]), loom_predict_class('{model}', ARRAY[x, z]) "
        "FROM pts t ORDER BY x"
    ).fetchall()


def test_no_role_function_runs_for_the_caller(roles, pg_dsn):
    alice, bob, admin = roles
    clean = _train_and_predict(alice, "sp_a_clean")
    _plant(bob)
    # new sessions: none has a plan made before bob's functions existed
    alice.close()
    alice = connect(pg_dsn, ALICE, SCHEMA)
    admin.close()
    admin = connect(pg_dsn, "postgres", SCHEMA)
    try:
        for who, conn in (("alice", alice), ("su", admin)):
            rows = _train_and_predict(conn, f"sp_{who}_m")
            assert ran(bob) == [], f"bob's functions ran for {who}: {ran(bob)}"
            assert len(rows) == 200
            for by_row, by_row_form, cls, cls_row, by_array, cls_array in rows:
                assert by_row == by_row_form == by_array
                assert cls == cls_row == cls_array
        # the same training as before bob planted anything: the same shuffle, the same model
        assert _train_and_predict(alice, "sp_a_clean") == clean
        assert ran(bob) == []
    finally:
        alice.close()
        admin.execute("SELECT loom_drop_model('sp_su_m') FROM loom.models WHERE name = 'sp_su_m'")
        admin.close()
    # bob's functions do run where a query names them: the trap works
    bob.execute("SELECT hashint8extended(1::bigint, 42)")
    assert ran(bob) == [(BOB, "hashint8extended")]


#: operators whose pg_catalog version needs a cast of what loomdb gives them: (operator, left,
#: right, the function's body); and an aggregate over a column's own type
OPERATORS = [
    ("%", "bigint", "integer", "$1 OPERATOR(pg_catalog.%) $2::bigint"),  # the seeded split
    ("*", "numeric", "double precision", "$1::float8 OPERATOR(pg_catalog.*) $2"),  # deployed
    (">", "double precision", "integer", "$1 OPERATOR(pg_catalog.>) $2::float8"),  # deployed
]


def _plant_operators(bob: psycopg.Connection) -> None:
    for i, (op, left, right, body) in enumerate(OPERATORS):
        returns = "boolean" if op == ">" else left if op == "%" else "double precision"
        bob.execute(
            f"CREATE FUNCTION trap_op{i}({left}, {right}) RETURNS {returns} LANGUAGE plpgsql "  # type: ignore[arg-type]
            f"AS $$ BEGIN INSERT INTO {SCHEMA}.ran VALUES (current_user, 'operator {op}'); "
            f"RETURN {body}; END $$"
        )
        bob.execute(
            f"CREATE OPERATOR {op} (LEFTARG = {left}, RIGHTARG = {right}, "  # type: ignore[arg-type]
            f"FUNCTION = trap_op{i})"
        )
    bob.execute(
        "CREATE FUNCTION trap_count(bigint, double precision) RETURNS bigint LANGUAGE plpgsql "
        f"AS $$ BEGIN INSERT INTO {SCHEMA}.ran VALUES (current_user, 'count'); "  # type: ignore[arg-type]
        "RETURN $1 + CASE WHEN $2 IS NULL THEN 0 ELSE 1 END; END $$"
    )
    bob.execute(
        "CREATE AGGREGATE count(double precision) (SFUNC = trap_count, STYPE = bigint, "
        "INITCOND = '0')"
    )


def test_no_role_operator_or_aggregate_runs_for_the_caller(roles, pg_dsn):
    """A seeded test split, a preprocessed column and a deployed function called by a
    superuser, with bob's operators and aggregate on the search_path."""
    alice, bob, admin = roles
    bob.execute("DELETE FROM ran")
    _plant_operators(bob)
    alice, admin = connect(pg_dsn, ALICE, SCHEMA), connect(pg_dsn, "postgres", SCHEMA)
    options = json.dumps(
        {
            "model": "logistic",
            "epochs": 3,
            "test_fraction": 0.25,
            "preprocess": {"x": {"impute": "median"}},
            "replace": True,
        }
    )
    try:
        alice.execute(f"SELECT loom_train('sp_dep', 'pts', 'y', '{options}')")  # type: ignore[arg-type]
        alice.execute("""SELECT loom_deploy('sp_dep', '{"proba": true}')""")
        assert ran(bob) == [], f"bob's code ran for alice: {ran(bob)}"
        for conn in (alice, admin):
            rows = conn.execute(
                "SELECT predict_sp_dep(x, z), loom_predict('sp_dep', ARRAY[x, z]), "
                "predict_sp_dep_proba(x, z), loom_predict_proba('sp_dep', ARRAY[x, z]) FROM pts"
            ).fetchall()
            assert len(rows) == 200
            for deployed, udf, deployed_p, udf_p in rows:
                assert deployed == udf and abs(deployed_p - udf_p) < 1e-12
        assert ran(bob) == [], f"bob's code ran: {ran(bob)}"
    finally:
        alice.close()
        admin.close()
    bob.execute("SELECT 7::bigint % 2, count(1.5::float8)")  # the traps work where named
    assert ran(bob) == [(BOB, "count"), (BOB, "operator %")]


def test_no_role_operator_runs_in_the_row_versions_check(roles, pg_dsn):
    """An index of a plain table records its row versions and the columns' digest, and every
    train on it compares them: bob's ``=(oid, regclass)``, an exact match where pg_catalog's
    ``=(oid, oid)`` needs the regclass cast, must not be what the lookup of the table's
    columns runs, for alice or a superuser."""
    alice, bob, admin = roles
    bob.execute("DELETE FROM ran")
    bob.execute(
        "CREATE FUNCTION trap_oid_eq(oid, regclass) RETURNS boolean LANGUAGE plpgsql AS $$ "
        f"BEGIN INSERT INTO {SCHEMA}.ran VALUES (current_user, 'operator =(oid, regclass)'); "  # type: ignore[arg-type]
        "RETURN $1 OPERATOR(pg_catalog.=) $2::oid; END $$"
    )
    bob.execute("CREATE OPERATOR = (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = trap_oid_eq)")
    alice, admin = connect(pg_dsn, ALICE, SCHEMA), connect(pg_dsn, "postgres", SCHEMA)
    on_index = json.dumps({"model": "logistic", "epochs": 2, "index": "sp_rv_ix"})
    try:
        for conn in (alice, admin):
            conn.execute("SELECT loom_create_index('sp_rv_ix', 'pts', 'y', '{}')")
            for _ in range(2):  # the second train finds the recorded row versions unchanged
                conn.execute(f"SELECT loom_train('sp_rv_m', NULL, 'y', '{on_index}')")  # type: ignore[arg-type]
                conn.execute("SELECT loom_drop_model('sp_rv_m')")
            conn.execute("SELECT loom_drop_index('sp_rv_ix')")
            assert ran(bob) == [], f"bob's operator ran: {ran(bob)}"
        bob.execute("SELECT 1::oid = 'pg_class'::regclass")  # the trap works where named
        assert ran(bob) == [(BOB, "operator =(oid, regclass)")]
    finally:
        alice.close()
        admin.close()
        bob.execute("DROP OPERATOR = (oid, regclass)")


#: lookalikes of the loomdb functions ``loomdb sql``'s rewrites call: (name, arguments, returns)
LOOKALIKES = [
    ("loom_create_index", "text, text, text, text", "text"),
    ("loom_reindex", "text", "text"),
    ("loom_drop_index", "text", "text"),
    ("loom_train", "text, text, text, text", "text"),
    ("loom_predict", "text, double precision[]", "double precision"),
]
FRONTEND_SCRIPT = """
CREATE INDEX sp_fe_ix ON pts USING mlweaving (x, z) WITH (label = y);
REINDEX INDEX sp_fe_ix;
REINDEX TABLE pts;
CREATE INDEX sp_fe_m ON train_mlweaving('pts', 2);
SELECT min(prediction) FROM infer_mlweaving(sp_fe_m, 'pts');
DROP INDEX sp_fe_ix;
"""


def test_no_role_lookalike_runs_for_the_sql_front_end(roles, pg_dsn, capsys):
    """``loomdb sql`` rewrites loomdb's statements into calls of its functions: called by name
    alone, bob's functions of the same signatures in a schema before the extension's on alice's
    search_path were the ones run, as alice."""
    from loomdb.cli.run_sql import run_script

    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    alice = connect(pg_dsn, ALICE, SCHEMA)
    for name, args, returns in LOOKALIKES:
        _recording(bob, name, args, returns)
    dsn = f"{pg_dsn} user={ALICE} options='-csearch_path={SCHEMA},public'"
    try:
        done = run_script(FRONTEND_SCRIPT, duckdb_path=None, dsn=dsn, progress=False)
        assert ran(bob) == [], f"bob's functions ran for alice: {ran(bob)}"
        assert done == 0, capsys.readouterr().err
        assert alice.execute("SELECT name FROM loom.models WHERE name = 'sp_fe_m'").fetchall()
        alice.execute("SELECT loom_drop_index('sp_fe_ix')")  # bob's, called by name: the trap works
        assert ran(bob) == [(ALICE, "loom_drop_index")]
    finally:
        for name, args, _ in LOOKALIKES:
            bob.execute(f"DROP FUNCTION {name}({args})")  # type: ignore[arg-type]
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_fe_m'")
        alice.execute("SELECT loom_drop_index(name) FROM loom.indexes WHERE name = 'sp_fe_ix'")
        alice.close()


def test_no_role_function_grants_loom_load_the_server_files(roles, pg_dsn):
    """loom_load of a file checks that the caller holds pg_read_server_files: alice, who does
    not, makes a ``pg_has_role(name, text, text)`` saying yes in her schema, a better match for
    the check's literals than pg_catalog's ``(name, name, text)``: it must not be the one
    asked, and the server's files stay unread."""
    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    alice = connect(pg_dsn, ALICE, SCHEMA)
    folder = Path(tempfile.mkdtemp(prefix="loomdb-svm-"))
    folder.chmod(0o755)  # the server's process would read it, were the check passed
    path = folder / "points.svm"
    path.write_text("1 1:0.5 2:1.5\n0 1:1.0\n")
    path.chmod(0o644)
    alice.execute(
        "CREATE FUNCTION pg_has_role(name, text, text) RETURNS boolean LANGUAGE plpgsql AS $$ "
        f"BEGIN INSERT INTO {SCHEMA}.ran VALUES (current_user, 'pg_has_role'); "  # type: ignore[arg-type]
        "RETURN true; END $$"
    )
    try:
        with pytest.raises(psycopg.Error, match="needs the pg_read_server_files role"):
            alice.execute(f"SELECT loom_load('libsvm', '{path}', 'sp_loaded')")  # type: ignore[arg-type]
        assert alice.execute("SELECT pg_catalog.to_regclass('sp_loaded')").fetchone() == (None,)
        alice.execute("SELECT pg_has_role(current_user, 'pg_read_server_files', 'MEMBER')")
        assert ran(bob) == [(ALICE, "pg_has_role")]  # hers, where named: the trap works
    finally:
        alice.execute("DROP FUNCTION pg_has_role(name, text, text)")
        alice.execute("DROP TABLE IF EXISTS sp_loaded")
        alice.close()
        shutil.rmtree(folder)


def test_no_role_current_schema_chooses_where_a_model_is_deployed(roles, pg_dsn):
    """loom_deploy makes its function in the current schema: where pg_catalog comes after a
    schema bob creates in on alice's search_path (as a database's owner may set it), bob's
    ``current_schema()`` there must not be what loomdb asks."""
    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    bob.execute(
        "CREATE FUNCTION current_schema() RETURNS name LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {SCHEMA}.ran VALUES (current_user, 'current_schema'); "  # type: ignore[arg-type]
        "RETURN pg_catalog.current_schema(); END $$"
    )
    alice = connect(pg_dsn, ALICE, SCHEMA)
    alice.execute(f"SET search_path = {SCHEMA}, pg_catalog, public")  # type: ignore[arg-type]
    options = json.dumps({"model": "logistic", "epochs": 2, "replace": True})
    try:
        alice.execute(f"SELECT loom_train('sp_cs', 'pts', 'y', '{options}')")  # type: ignore[arg-type]
        made = json.loads(alice.execute("SELECT loom_deploy('sp_cs')").fetchone()[0])  # type: ignore[index]
        assert ran(bob) == [], f"bob's current_schema ran for alice: {ran(bob)}"
        assert made["functions"] == [f"{SCHEMA}.predict_sp_cs(x, z)"]
        alice.execute("SELECT current_schema()")
        assert ran(bob) == [(ALICE, "current_schema")]  # bob's, where named: the trap works
    finally:
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_cs'")
        alice.close()
        bob.execute(f"DROP FUNCTION {SCHEMA}.current_schema()")  # type: ignore[arg-type]


def test_no_role_overload_beside_loom_predict_runs_for_infer_mlweaving(roles, pg_dsn):
    """Where others may create in the extension's schema (public on PostgreSQL 14 and
    earlier), bob's ``loom_predict(text, integer[])`` there is a better match for
    ``ARRAY[integer columns]`` than the extension's ``(text, double precision[])``: the
    ``loom_predict`` that ``infer_mlweaving`` becomes must pass its array as the latter."""
    from loomdb.cli.run_sql import run_script
    from loomdb.engines.postgres.installed import EXTENSION_SCHEMA

    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    admin = connect(pg_dsn, "postgres", SCHEMA)
    alice = connect(pg_dsn, ALICE, SCHEMA)
    home = sql.Identifier(admin.execute(EXTENSION_SCHEMA).fetchone()[0])  # type: ignore[arg-type,index]
    lookalike = sql.SQL("{}.loom_predict(text, integer[])").format(home)
    admin.execute(sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(home, sql.Identifier(BOB)))
    bob.execute(
        sql.SQL(
            "CREATE FUNCTION {} RETURNS double precision LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO {}.ran VALUES (current_user, 'loom_predict'); RETURN 0; END $$"
        ).format(lookalike, sql.Identifier(SCHEMA))
    )
    bob.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO PUBLIC").format(lookalike))
    alice.execute(
        "CREATE TABLE ints AS SELECT g AS a, g % 7 AS b, g % 2 AS y "
        "FROM pg_catalog.generate_series(1, 100) AS g"
    )
    dsn = f"{pg_dsn} user={ALICE} options='-csearch_path={SCHEMA},public'"
    try:
        alice.execute("""SELECT loom_train('sp_int', 'ints', 'y', '{"epochs": 2}')""")
        script = "SELECT min(prediction) FROM infer_mlweaving(sp_int, 'ints')"
        assert run_script(script, duckdb_path=None, dsn=dsn, progress=False) == 0
        assert ran(bob) == [], f"bob's loom_predict ran for alice: {ran(bob)}"
        alice.execute("SELECT loom_predict('sp_int', ARRAY[a, b]) FROM ints")  # the trap works
        assert ran(bob) == [(ALICE, "loom_predict")]
    finally:
        bob.execute(sql.SQL("DROP FUNCTION {}").format(lookalike))
        admin.execute(
            sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(home, sql.Identifier(BOB))
        )
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_int'")
        alice.execute("DROP TABLE ints")
        for conn in (alice, admin):
            conn.close()


def test_no_role_lookalike_runs_for_loomdb_plot(roles, pg_dsn, tmp_path):
    """``loomdb plot --dsn`` reads a model's epochs with loom_training_info: called by name
    alone, bob's of the same signature in a schema before the extension's on alice's
    search_path was the one run, as alice."""
    from loomdb.cli.main import main

    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    alice = connect(pg_dsn, ALICE, SCHEMA)
    columns = (
        "epoch integer, loss double precision, validation_loss double precision, "
        '"precision" integer, rows bigint, bytes bigint, seconds double precision, '
        "lr double precision"
    )
    _recording(bob, "loom_training_info", "model text", f"TABLE ({columns})", None)
    dsn = f"{pg_dsn} user={ALICE} options='-csearch_path={SCHEMA},public'"
    try:
        alice.execute("""SELECT loom_train('sp_plot', 'pts', 'y', '{"epochs": 2}')""")
        assert main(["plot", "sp_plot", "--dsn", dsn, "-o", str(tmp_path / "p.png")]) == 0
        assert ran(bob) == [], f"bob's loom_training_info ran for alice: {ran(bob)}"
        assert (tmp_path / "p.png").stat().st_size > 0
        alice.execute("SELECT * FROM loom_training_info('sp_plot')")  # the trap works
        assert ran(bob) == [(ALICE, "loom_training_info")]
    finally:
        bob.execute(f"DROP FUNCTION {SCHEMA}.loom_training_info(text)")  # type: ignore[arg-type]
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_plot'")
        alice.close()


def test_no_role_pg_roles_names_a_role_loom_grant_takes(roles, pg_dsn):
    """loom_grant asked ``pg_roles``, unqualified, whether the grantee exists: where pg_catalog
    comes after a schema bob creates in on alice's search_path, bob's ``pg_roles`` view there
    answered, and alice's model was "granted" to a role that does not exist."""
    _, bob, _ = roles
    bob.execute(f"CREATE VIEW {SCHEMA}.pg_roles AS SELECT 'ghost_role'::name AS rolname")  # type: ignore[arg-type]
    bob.execute(f"GRANT SELECT ON {SCHEMA}.pg_roles TO PUBLIC")  # type: ignore[arg-type]
    alice = connect(pg_dsn, ALICE, SCHEMA)
    alice.execute(f"SET search_path = {SCHEMA}, pg_catalog, public")  # type: ignore[arg-type]
    options = json.dumps({"model": "logistic", "epochs": 2, "replace": True})
    try:
        alice.execute(f"SELECT loom_train('sp_gr', 'pts', 'y', '{options}')")  # type: ignore[arg-type]
        with pytest.raises(psycopg.Error, match="role 'ghost_role' does not exist"):
            alice.execute("SELECT loom_grant('sp_gr', 'ghost_role')")
        granted = json.loads(alice.execute(f"SELECT loom_grant('sp_gr', '{BOB}')").fetchone()[0])  # type: ignore[arg-type,index]
        assert granted == {"model": "sp_gr", "granted_to": BOB}
    finally:
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_gr'")
        alice.close()
        bob.execute(f"DROP VIEW {SCHEMA}.pg_roles")  # type: ignore[arg-type]


def test_no_role_function_runs_in_a_compiled_model_or_a_hashed_column(roles, pg_dsn):
    """A compiled probability calls ``exp(double precision)`` and a hashed text column
    ``md5(text)`` and ``substr(text, integer, integer)``: exact matches, unqualified, so where
    pg_catalog comes after a schema bob creates in on alice's search_path, bob's ran — in her
    train's layout, in ``loom_predict_proba_sql``'s expression and in her deployed function."""
    _, bob, _ = roles
    bob.execute("DELETE FROM ran")
    traps = [
        ("exp", "v double precision", "double precision", "pg_catalog.exp(v)"),
        ("md5", "v text", "text", "pg_catalog.md5(v)"),
        ("substr", "v text, f integer, n integer", "text", "pg_catalog.substr(v, f, n)"),
    ]
    for name, args, returns, value in traps:
        _recording(bob, f"{SCHEMA}.{name}", args, returns, value)
    alice = connect(pg_dsn, ALICE, SCHEMA)
    alice.execute("CREATE TABLE hp AS SELECT x, z, y, 'v' || (x::int % 5) AS t FROM pts")
    alice.execute(f"SET search_path = {SCHEMA}, pg_catalog, public")  # type: ignore[arg-type]
    options = {"epochs": 2, "features": ["x", "t"], "preprocess": {"t": {"encode": "hash"}}}
    try:
        alice.execute(f"SELECT loom_train('sp_hx', 'hp', 'y', '{json.dumps(options)}')")  # type: ignore[arg-type]
        proba = alice.execute("SELECT loom_predict_proba_sql('sp_hx')").fetchone()[0]  # type: ignore[index]
        alice.execute(f"SELECT {proba} FROM hp")  # type: ignore[arg-type]
        alice.execute("""SELECT loom_deploy('sp_hx', '{"proba": true}')""")
        alice.execute("SELECT predict_sp_hx(x, t), predict_sp_hx_proba(x, t) FROM hp")
        assert ran(bob) == [], f"bob's functions ran for alice: {ran(bob)}"
        alice.execute("SELECT exp(1.0::float8)")
        assert ran(bob) == [(ALICE, f"{SCHEMA}.exp")]  # bob's, where named: the trap works
    finally:
        alice.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'sp_hx'")
        alice.execute("DROP TABLE hp")
        alice.close()
        for name, args, _, _ in traps:
            bob.execute(f"DROP FUNCTION {SCHEMA}.{name}({args})")  # type: ignore[arg-type]
