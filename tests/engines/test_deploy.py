"""loom_deploy: a model as a native SQL function of its columns, kept in step with the model."""

from __future__ import annotations

import json

import numpy as np
import pytest

TRAIN = """SELECT loom_train('m', 'd', 'y', '{"nulls": "skip"}')"""


def _load(engine, rows=300, columns=("a", "b", "c")):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(rows, len(columns)))
    X[5, 1] = np.nan  # a row with a NULL feature: NULL from both
    y = (X[:, 0] - X[:, 2] > 0).astype(float)
    engine.load("d", X, y, list(columns))


def _gap(engine, function, udf, columns="a, b, c"):
    features = engine.array(columns.split(", "))
    return engine.rows(
        f"SELECT max(abs({function}({columns}) - {udf}('m', {features}))), "
        f"count({function}({columns})), count({udf}('m', {features})) FROM d"
    )[0]


def test_deployed_function_computes_what_loom_predict_computes(engine):
    _load(engine)
    engine.scalar("""SELECT loom_train('m', 'd', 'y', '{"model": "logistic", "nulls": "skip"}')""")
    made = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"proba": true}')"""))
    schema = engine.scalar("SELECT current_schema()")
    assert made["functions"] == [
        f"{schema}.predict_m(a, b, c)",
        f"{schema}.predict_m_proba(a, b, c)",
    ]
    gap, deployed, udf = _gap(engine, "predict_m", "loom_predict")
    assert gap == 0.0 and deployed == udf == 299
    gap, deployed, udf = _gap(engine, "predict_m_proba", "loom_predict_proba")
    assert gap < 1e-12 and deployed == udf == 299


def test_retraining_redefines_and_dropping_removes(engine):
    _load(engine)
    engine.scalar(TRAIN)
    engine.scalar("""SELECT loom_deploy('m', '{"name": "score_m"}')""")
    options = '{"replace": true, "nulls": "skip"}'
    retrain = f"SELECT loom_train('m', 'SELECT a, c, y FROM d', 'y', '{options}')"
    engine.scalar(retrain)  # two features now: the function follows
    gap, deployed, _ = _gap(engine, "score_m", "loom_predict", "a, c")
    assert gap == 0.0 and deployed == 300
    with pytest.raises(engine.errors):
        engine.scalar("SELECT score_m(a, b, c) FROM d")
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('m')"))
    assert dropped["functions"] == [engine.scalar("SELECT current_schema()") + ".score_m"]
    with pytest.raises(engine.errors):
        engine.scalar("SELECT score_m(a, c) FROM d")
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_a_model_without_probabilities_is_refused_where_a_proba_function_is_deployed(engine):
    """A retrain into a linear model, or a rollback to one, of a model deployed with proba
    was refused with "a linear model has no probabilities" and the hint to train a logistic
    model: nothing named the deployed function that stood in the way."""
    _load(engine)
    engine.scalar("""SELECT loom_train('m', 'd', 'y', '{"model": "linear", "nulls": "skip"}')""")
    engine.scalar("""SELECT loom_train('m', 'd', 'y', '{"replace": true, "nulls": "skip"}')""")
    engine.scalar("""SELECT loom_deploy('m', '{"proba": true}')""")
    linear = '{"model": "linear", "replace": true, "nulls": "skip"}'
    for sql in (f"SELECT loom_train('m', 'd', 'y', '{linear}')", "SELECT loom_rollback('m')"):
        message, hint = _message_and_hint(engine, sql)
        assert "predict_m_proba" in message and "no probabilities" in message, message
        assert """loom_deploy('m', '{"drop": true}')""" in hint, hint
        assert engine.scalar("SELECT loom_model_info('m')").count('"logistic"') >= 1
    assert [r[1] for r in engine.rows("SELECT * FROM loom_model_versions('m')")] == [False, True]
    gap, deployed, _ = _gap(engine, "predict_m_proba", "loom_predict_proba")
    assert gap < 1e-12 and deployed == 299


def _message_and_hint(engine, sql):
    with pytest.raises(engine.errors) as info:
        engine.scalar(sql)
    e = info.value
    diag = getattr(e, "diag", None)
    hint = diag.message_hint if diag is not None else getattr(e, "hint", None)
    return str(e), hint or ""


def test_drop_option_removes_the_functions_and_keeps_the_model(engine):
    _load(engine)
    engine.scalar(TRAIN)
    engine.scalar("SELECT loom_deploy('m')")
    out = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"drop": true}')"""))
    assert len(out["dropped"]) == 1
    with pytest.raises(engine.errors):
        engine.scalar("SELECT predict_m(a, b, c) FROM d")
    assert engine.scalar("SELECT count(loom_predict('m', ARRAY[a, b, c])) FROM d") == 299


def test_a_function_loomdb_did_not_make_is_never_replaced(engine):
    _load(engine)
    engine.scalar(TRAIN)
    if engine.name == "duckdb":
        engine.rows("CREATE MACRO predict_m(a, b, c) AS 42")
    else:
        engine.rows(
            "CREATE FUNCTION predict_m(float8, float8, float8) RETURNS float8 "
            "LANGUAGE sql AS 'SELECT 42.0::float8'"
        )
    with pytest.raises(engine.errors, match="loomdb did not make it"):
        engine.scalar("SELECT loom_deploy('m')")
    assert engine.scalar("SELECT predict_m(1, 2, 3)") == 42
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def _refused(engine, sql, match="loomdb did not make it"):
    with pytest.raises(engine.errors, match=match):
        engine.scalar(sql)


def test_a_name_the_engine_takes_for_another_models_function_is_refused(engine):
    """Model names are case-sensitive; DuckDB's function names are not: deploying 'Churn'
    (predict_Churn) there would replace 'churn''s predict_churn.  PostgreSQL's quoted names
    are two functions."""
    rng = np.random.default_rng(5)
    engine.load("t", rng.normal(size=(300, 1)), (np.arange(300) % 2).astype(float), ["a"])
    engine.load("u", rng.normal(size=(300, 1)), (np.arange(300) % 3).astype(float), ["a"])
    engine.scalar("SELECT loom_train('churn', 't', 'y')")
    engine.scalar("SELECT loom_train('Churn', 'u', 'y')")
    engine.scalar("SELECT loom_deploy('churn')")
    expected = engine.scalar("SELECT sum(loom_predict('churn', ARRAY[a])) FROM u")
    if engine.name == "duckdb":
        _refused(engine, "SELECT loom_deploy('Churn')", "deployed from model 'churn'")
        assert engine.scalar("SELECT count(*) FROM loom.deployments") == 1
    else:
        engine.scalar("SELECT loom_deploy('Churn')")
        assert engine.scalar('SELECT count("predict_Churn"(a)) FROM u') == 300
    assert engine.scalar("SELECT sum(predict_churn(a)) FROM u") == expected
    engine.scalar("SELECT loom_drop_model('Churn')")
    assert engine.scalar("SELECT sum(predict_churn(a)) FROM u") == expected
    assert engine.rows("SELECT model, function FROM loom.deployments") == [
        ("churn", "predict_churn")
    ]
    upper = """SELECT loom_deploy('churn', '{"name": "PREDICT_CHURN"}')"""
    again = json.loads(engine.scalar(upper))
    assert len(again["functions"]) == 1  # DuckDB: the same function, recorded once
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 2 - (engine.name == "duckdb")


def test_a_user_function_of_any_arity_or_case_is_never_replaced(engine):
    _load(engine)
    engine.scalar(TRAIN)
    if engine.name == "duckdb":
        engine.rows("CREATE MACRO Predict_M(x) AS x * 100")
        engine.rows("CREATE MACRO myf(a, b) AS a + b")
    else:
        engine.rows(
            "CREATE FUNCTION predict_m(float8) RETURNS float8 LANGUAGE sql AS 'SELECT $1 * 100'"
        )
        engine.rows(
            "CREATE FUNCTION myf(float8, float8) RETURNS float8 LANGUAGE sql AS 'SELECT $1 + $2'"
        )
    _refused(engine, "SELECT loom_deploy('m')")
    _refused(engine, """SELECT loom_deploy('m', '{"name": "myf"}')""")
    assert engine.scalar("SELECT predict_m(2)") == 200
    assert engine.scalar("SELECT myf(2, 3)") == 5
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_a_built_in_function_is_never_shadowed(engine):
    _load(engine)
    engine.scalar(TRAIN)
    names = ["sqrt", "abs"] + (["ABS", "loom_predict"] if engine.name == "duckdb" else [])
    for name in names:
        _refused(engine, f"""SELECT loom_deploy('m', '{{"name": "{name}"}}')""")
    assert engine.rows("SELECT abs(-3), sqrt(4)") == [(3, 2.0)]
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_bad_names_are_refused(engine):
    _load(engine)
    engine.scalar(TRAIN)
    for options in ('{"name": "x; DROP TABLE d"}', '{"schema": "a.b"}', '{"colour": 1}'):
        with pytest.raises(engine.errors):
            engine.scalar(f"SELECT loom_deploy('m', '{options}')")
    with pytest.raises(engine.errors, match="does not exist"):
        engine.scalar("SELECT loom_deploy('nope')")


def test_a_schema_that_is_not_there_is_refused_with_a_hint(engine):
    """A schema the database does not have was the engine's raw error; on DuckDB the name of
    an attached database was taken as that database (its macro written there, the catalog's
    row here: a transaction error)."""
    _load(engine)
    engine.scalar(TRAIN)
    names = ["zz"] + (["other"] if engine.name == "duckdb" else [])
    if engine.name == "duckdb":
        engine.rows("ATTACH ':memory:' AS other")
    for schema in names:
        with pytest.raises(engine.errors) as info:
            engine.scalar(f"""SELECT loom_deploy('m', '{{"schema": "{schema}"}}')""")
        said = str(info.value) + (
            getattr(getattr(info.value, "diag", None), "message_hint", "") or ""
        )
        assert f"schema '{schema}' does not exist in this database" in said
        assert f"CREATE SCHEMA {schema} first" in said
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0
    engine.rows("CREATE SCHEMA zz")
    made = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"schema": "zz"}')"""))
    assert made["functions"] == ["zz.predict_m(a, b, c)"]


def test_loomdbs_catalog_schema_is_refused(engine):
    """A deployed function in loomdb's own schema would sit among its catalog's objects."""
    _load(engine)
    engine.scalar(TRAIN)
    with pytest.raises(engine.errors, match="loomdb's catalog schema"):
        engine.scalar("""SELECT loom_deploy('m', '{"schema": "loom"}')""")
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


@pytest.mark.postgres
def test_postgres_inlines_it_into_a_parallel_plan(request):
    from support.engines import PgEngine

    engine = PgEngine(request.getfixturevalue("pg_dsn"))
    try:
        _load(engine)
        engine.scalar(TRAIN)
        engine.scalar("SELECT loom_deploy('m')")
        volatility, parallel = engine.rows(
            "SELECT provolatile, proparallel FROM pg_proc WHERE proname = 'predict_m'"
        )[0]
        assert (volatility, parallel) == ("i", "s")
        plan = "\n".join(
            r[0] for r in engine.rows("EXPLAIN VERBOSE SELECT predict_m(a, b, c) FROM d")
        )
        # inlined: the expression itself, guarded by loom.finite where the C module is installed
        native = engine.scalar("SELECT to_regprocedure('loom.finite(float8)') IS NOT NULL")
        assert "predict_m" not in plan and ("loom.finite(" if native else "CASE WHEN") in plan
        engine.rows("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0")
        engine.rows("SET min_parallel_table_scan_size = 0")
        plan = "\n".join(
            r[0] for r in engine.rows("EXPLAIN ANALYZE SELECT sum(predict_m(a, b, c)) FROM d")
        )
        assert "Parallel Seq Scan" in plan and "Gather" in plan
        assert "Workers Launched: 0" not in plan
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_refuses_more_columns_than_a_function_takes_and_keeps_the_model(request):
    """A PostgreSQL function takes at most ``max_function_args`` (100) arguments: deploying a
    model of more columns is refused with what to do instead, and a retrain that would give
    its deployed function too many is refused whole (the model and function stay as they were)."""
    from support.engines import PgEngine

    engine = PgEngine(request.getfixturevalue("pg_dsn"))
    columns = [f"x{i}" for i in range(101)]
    try:
        _load(engine, columns=columns)
        engine.scalar(TRAIN)
        with pytest.raises(engine.errors, match="at most 100 arguments.* would take 101"):
            engine.scalar("SELECT loom_deploy('m')")
        assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0
        narrow = """SELECT loom_train('m', 'SELECT x0, x2, y FROM d', 'y', '{"replace": true}')"""
        engine.scalar(narrow)
        engine.scalar("SELECT loom_deploy('m')")
        before = engine.scalar("SELECT sum(predict_m(x0, x2)) FROM d")
        with pytest.raises(engine.errors, match="drop.*true"):
            engine.scalar(TRAIN.replace('"nulls"', '"replace": true, "nulls"'))
        info = json.loads(engine.scalar("SELECT loom_model_info('m')"))
        assert info["feature_names"] == ["x0", "x2"]
        assert engine.scalar("SELECT sum(predict_m(x0, x2)) FROM d") == before
    finally:
        engine.close()


def test_a_function_made_in_place_of_a_dropped_deployment_is_not_loomdbs(engine):
    """The user drops the deployed function by hand and makes one of their own of that name
    and another arity.  DuckDB's retrain replaced the user's macro with the model (a DROP
    MACRO of the name, any arity) and loom_drop_model dropped it; PostgreSQL, which drops
    only the recorded signature, refused the retrain and kept it.  Both now do as PostgreSQL."""
    _load(engine)
    engine.scalar(TRAIN)
    engine.scalar("SELECT loom_deploy('m')")
    if engine.name == "duckdb":
        engine.rows("DROP MACRO predict_m")
        engine.rows("CREATE MACRO predict_m(x) AS x * 100")
    else:
        engine.rows("DROP FUNCTION predict_m(float8, float8, float8)")
        engine.rows(
            "CREATE FUNCTION predict_m(x float8) RETURNS float8 LANGUAGE sql AS 'SELECT x * 100'"
        )
    retrain = """SELECT loom_train('m', 'd', 'y', '{"replace": true, "nulls": "skip"}')"""
    message, _ = _message_and_hint(engine, retrain)
    assert "predict_m with 1 argument exists and loomdb did not make it" in message, message
    assert [r[1] for r in engine.rows("SELECT * FROM loom_model_versions('m')")] == [True]
    assert engine.scalar("SELECT predict_m(2.0)") == 200
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('m')"))
    assert engine.scalar("SELECT predict_m(2.0)") == 200, dropped
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_a_boolean_feature_column_is_taken_as_it_was_trained_on(engine):
    """Training reads a boolean column as 0 and 1, but on PostgreSQL the compiled expression
    cast it straight to FLOAT8 ("cannot cast type boolean to double precision") and the
    deployed function took a double there, so neither could be called with the source's own
    columns (DuckDB's could).  The model records its boolean columns (an encoded one, its
    kind), and both take them."""
    engine.rows("CREATE TABLE tb (a DOUBLE PRECISION, b BOOLEAN, t TEXT, y DOUBLE PRECISION)")
    rng = np.random.default_rng(8)
    rows = [
        (float(a), bool(b), ["p", "q", None][int(t)], float(a + 2 * b - 1 > 0))
        for a, b, t in zip(rng.normal(size=200), rng.integers(0, 2, 200), rng.integers(0, 3, 200))
    ]
    values = ", ".join(
        f"({a!r}, {str(b).upper()}, {'NULL' if t is None else repr(t)}, {y!r})"
        for a, b, t, y in rows
    )
    engine.rows(f"INSERT INTO tb VALUES {values}")
    for name, features in (("mb", ["a", "b"]), ("mbt", ["a", "b", "t"])):
        options = json.dumps({"epochs": 20, "features": features})
        engine.scalar(f"SELECT loom_train('{name}', 'tb', 'y', '{options}')")
        compiled = engine.scalar(f"SELECT loom_predict_sql('{name}')")
        engine.scalar(f"""SELECT loom_deploy('{name}', '{{"proba": true}}')""")
        proba = engine.scalar(f"SELECT loom_predict_proba_sql('{name}')")
        args = ", ".join(features)
        got = engine.rows(
            f"SELECT {compiled}, predict_{name}({args}), loom_predict('{name}', r), "
            f"{proba}, predict_{name}_proba({args}) FROM tb r"
        )
        assert all(c == d == p and abs(q - dq) < 1e-12 for c, d, p, q, dq in got), got[:3]
        assert {p for _, _, p, _, _ in got} == {0.0, 1.0}


def test_a_probability_function_name_too_long_says_so_and_how_to_shorten_it(engine):
    """A model named with 60 characters deploys as predict_<its first 55>; with ``proba`` the
    second function's name passed 63 characters and the refusal read "invalid function name
    … (hint: function names are 1-63 ASCII letters …)", of a name the user never wrote."""
    _load(engine)
    name = "m" * 60
    engine.scalar(f"""SELECT loom_train('{name}', 'd', 'y', '{{"nulls": "skip"}}')""")
    message, hint = _message_and_hint(
        engine, f"""SELECT loom_deploy('{name}', '{{"proba": true}}')"""
    )
    assert "_proba" in message and "63" in message, message
    assert '"name"' in hint and "57" in hint, hint
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0
    made = json.loads(
        engine.scalar(f"""SELECT loom_deploy('{name}', '{{"proba": true, "name": "p"}}')""")
    )
    assert [f.split(".")[1] for f in made["functions"]] == ["p(a, b, c)", "p_proba(a, b, c)"]


def test_loomdbs_storage_schema_is_refused_as_its_catalog_schema_is(engine):
    """``loom_data`` holds loomdb's storage tables (on PostgreSQL every loomdb user may create
    there, and every one may use it): a deployed function was made there, among them."""
    _load(engine)
    engine.scalar(TRAIN)
    for spelling in ("loom_data", "LOOM_DATA") if engine.name == "duckdb" else ("loom_data",):
        message, hint = _message_and_hint(
            engine, f"""SELECT loom_deploy('m', '{{"schema": "{spelling}"}}')"""
        )
        assert "loomdb's storage schema" in message and '"schema"' in hint, message
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_a_name_of_loomdbs_own_functions_is_refused_on_both_engines(engine):
    """DuckDB refused ``{"name": "loom_predict"}`` (a function of its system catalog), but
    PostgreSQL, which looked in the target schema and pg_catalog only, made a
    ``loom_predict(a, b, c)`` there, in front of loomdb's own for every search path naming
    that schema before the extension's."""
    _load(engine)
    engine.scalar(TRAIN)
    for name in ("loom_predict", "loom_version"):
        message, hint = _message_and_hint(
            engine, f"""SELECT loom_deploy('m', '{{"name": "{name}"}}')"""
        )
        assert f".{name} with" in message and "would replace or shadow it" in message, message
        assert '"name"' in hint
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 0


def test_a_schema_needing_quotes_is_taken_by_the_schema_option(engine):
    """Schemas may be any identifier the engine takes: deploying into ``"My Schema"`` as the
    current schema worked, but ``{"schema": "My Schema"}`` was refused as an "invalid schema
    name" (letters, digits and underscores only, the rule of model names)."""
    _load(engine)
    engine.scalar(TRAIN)
    engine.rows('CREATE SCHEMA "My Schema"')
    try:
        _deploy_into_my_schema(engine)
    finally:  # not in loomtest, which PostgreSQL's tests drop
        engine.rows('DROP SCHEMA IF EXISTS "My Schema" CASCADE')


def _deploy_into_my_schema(engine):
    made = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"schema": "My Schema"}')"""))
    assert made["functions"] == ["My Schema.predict_m(a, b, c)"]
    gap, deployed, _ = _gap(engine, '"My Schema".predict_m', "loom_predict")
    assert gap == 0.0 and deployed == 299
    engine.scalar(
        """SELECT loom_train('m', 'd', 'y', '{"replace": true, "epochs": 3, "nulls": "skip"}')"""
    )
    gap, deployed, _ = _gap(engine, '"My Schema".predict_m', "loom_predict")
    assert gap == 0.0 and deployed == 299
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('m')"))
    assert dropped["functions"] == ["My Schema.predict_m"]
    with pytest.raises(engine.errors):
        engine.scalar('SELECT "My Schema".predict_m(1.0, 2.0, 3.0)')
