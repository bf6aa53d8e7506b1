"""PostgreSQL's C loom_predict (index_am/loomdb_predict.c): the Python path's answers, a cache
that hears of every change to a model, and loom.finite in compiled and deployed models.

Skipped where the server has no C module (``loomdb pg install`` without PostgreSQL's server
headers): there loom_predict is the Python function these tests compare against.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

pytestmark = pytest.mark.postgres

FEATURES = ["a", "b", "c", "d"]
LABELS = ["yb", "yk", "yr"]
ARRAY = "ARRAY[a, b, c, d]"
UNANSWERED = 5  # the NULL and the NaN and ±inf rows


def _native(conn: psycopg.Connection) -> bool:
    return bool(
        conn.execute(
            "SELECT l.lanname = 'c' FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.proname = 'loom_predict' AND to_regprocedure('loom.finite(float8)') "
            "IS NOT NULL"
        ).fetchone()
    )


@pytest.fixture
def pg(pg_dsn) -> Iterator:
    from conftest import need
    from support.engines import PgEngine

    engine = PgEngine(pg_dsn)
    if not _native(engine.conn):
        engine.close()
        need("loomdb's C module in the server (loomdb pg install with the server headers)")
    yield engine
    engine.close()


def _load(engine, seed: int, rows: int = 400) -> None:
    """Features of mixed scales and shifts, a NULL, and unlabelled NaN and ±inf rows; labels
    for binary (yb), three classes (yk) and regression (yr)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, len(FEATURES))) * rng.uniform(0.5, 20, size=len(FEATURES))
    X += rng.normal(size=len(FEATURES)) * 5
    z = X @ rng.normal(size=len(FEATURES))
    y = [z > np.median(z), np.digitize(z, np.quantile(z, [0.33, 0.66])), z * 3 + 1]
    X[3, 1] = np.nan  # loaded as NULL
    engine.load("d", np.column_stack([X, *y]).astype(float), None, [*FEATURES, *LABELS])
    engine.rows(
        "INSERT INTO d (a, b, c, d) VALUES ('NaN', 0, 0, 0), (0, 'Infinity', 0, 0), "
        "(0, 0, '-Infinity', 0), (1, 2, 3, 'NaN')"
    )


def _train(engine, name: str, label: str, options: dict) -> None:
    source = f"SELECT a, b, c, d, {label} FROM d WHERE {label} IS NOT NULL"
    options = {"epochs": 3, "nulls": "skip", "replace": True, "progress": False, **options}
    engine.scalar(f"SELECT loom_train('{name}', '{source}', '{label}', '{json.dumps(options)}')")


def _gap(engine, name: str, proba: bool = False) -> tuple:
    """Largest difference between the C and the Python answers, rows compared, NULLs apart."""
    c, py = (
        ("loom_predict_proba", "loom._predict_proba_python")
        if proba
        else (
            "loom_predict",
            "loom._predict_python",
        )
    )
    return engine.rows(
        f"SELECT max(abs({c}('{name}', {ARRAY}) - {py}('{name}', {ARRAY}))), "
        f"count(*) FILTER (WHERE ({c}('{name}', {ARRAY}) IS NULL) "
        f"<> ({py}('{name}', {ARRAY}) IS NULL)), "
        f"count({c}('{name}', {ARRAY})), count(*) FROM d"
    )[0]


MODELS = [
    ("bin_logistic", "yb", {"model": "logistic"}),
    ("bin_svm", "yb", {"model": "svm"}),
    ("multi_logistic", "yk", {"model": "logistic"}),
    ("multi_svm", "yk", {"model": "svm"}),
    ("regression", "yr", {"model": "linear"}),
]


def test_the_c_path_answers_what_the_python_path_answers(pg):
    for seed in (1, 2):
        _load(pg, seed)
        for name, label, options in MODELS:
            _train(pg, name, label, options)
            scale = pg.scalar(f"SELECT max(abs(loom._predict_python('{name}', {ARRAY}))) FROM d")
            gap, nulls_differ, answered, rows = _gap(pg, name)
            assert nulls_differ == 0 and answered == rows - UNANSWERED, name
            assert gap <= 1e-12 * max(1.0, scale), (name, gap)
            if options["model"] == "logistic":
                gap, nulls_differ, answered, _ = _gap(pg, name, proba=True)
                assert gap <= 1e-12 and nulls_differ == 0 and answered == rows - UNANSWERED, name
    for name in ("multi_logistic", "multi_svm"):  # one-vs-rest chose among the three classes
        rows = pg.rows(f"SELECT DISTINCT loom_predict('{name}', {ARRAY}) FROM d")
        classes = {r[0] for r in rows} - {None}
        assert len(classes) >= 2 and classes <= {0.0, 1.0, 2.0}, name


def test_nulls_nan_infinity_unknown_models_and_bad_lengths(pg):
    _load(pg, 3)
    _train(pg, "m", "yb", {"model": "logistic"})
    assert (
        pg.rows(
            # typed: an untyped '{…}' or NULL could also be loom_predict's row form
            "SELECT loom_predict('m', '{1, NaN, 2, 3}'::float8[]), "
            "loom_predict('m', '{1, 2, Infinity, 3}'::float8[]), "
            "loom_predict('m', '{1, 2, 3, -Infinity}'::float8[]), "
            "loom_predict_proba('m', '{1, 2, 3, NaN}'), "
            "loom_predict('m', '{1, NULL, 2, 3}'::float8[]), "
            # a NULL element: NULL before any look-up
            "loom_predict('nope', '{1, NULL}'::float8[]), "
            "loom_predict('m', NULL::float8[])"
        )[0]
        == (None,) * 7
    )
    with pytest.raises(psycopg.Error, match="model 'nope' does not exist") as e:
        pg.rows("SELECT loom_predict('nope', ARRAY[1, 2])")
    assert e.value.diag.message_hint and "loom_train" in e.value.diag.message_hint
    for bad in ("ARRAY[1, 2, 3]", "ARRAY[1, 2, 3, 4, 5]", "'{}'::float8[]"):
        with pytest.raises(psycopg.Error, match=r"the model expects 4 features \(a, b, c, d\)"):
            pg.rows(f"SELECT loom_predict('m', {bad})")
    _train(pg, "lin", "yr", {"model": "linear"})
    with pytest.raises(psycopg.Error, match="a linear model has no probabilities"):
        pg.rows("SELECT loom_predict_proba('lin', ARRAY[1, 2, 3, 4])")


def _value(conn, name: str = "m") -> float:
    return float(
        conn.execute(f"SELECT loom_predict('{name}', ARRAY[0.5, 1, 1.5, 2])").fetchone()[0]
    )


def _python(conn, name: str = "m") -> float:
    row = conn.execute(f"SELECT loom._predict_python('{name}', ARRAY[0.5, 1, 1.5, 2])").fetchone()
    return float(row[0])


def _same(c: float, python: float) -> bool:
    """The C answer is the Python path's within the last bits: C adds the dot product in
    feature order, numpy's BLAS in an order of its own (a full run once saw them differ)."""
    return abs(c - python) <= 1e-12 * max(1.0, abs(python))


def test_a_change_in_this_session_is_seen_by_the_next_call(pg):
    _load(pg, 4)
    conn = pg.conn
    _train(pg, "m", "yr", {"model": "linear", "epochs": 1})
    first = _value(conn)
    _train(pg, "m", "yr", {"model": "linear", "epochs": 5})  # retrain: version 2
    second = _value(conn)
    assert second != first and _same(second, _python(conn))
    pg.scalar("""SELECT loom_deploy('m', '{"version": 1}')""")  # back to version 1
    assert _value(conn) == first
    pg.scalar("""SELECT loom_deploy('m', '{"version": "latest"}')""")
    assert _value(conn) == second
    with conn.transaction():  # a retrain rolled back: the cache forgets what it saw inside
        _train(pg, "m", "yr", {"model": "linear", "epochs": 2})
        inside = _value(conn)
        assert inside not in (first, second) and _same(inside, _python(conn))
        raise psycopg.Rollback()
    assert _value(conn) == second
    pg.scalar("SELECT loom_drop_model('m')")
    with pytest.raises(psycopg.Error, match="model 'm' does not exist"):
        _value(conn)


def test_a_change_committed_by_another_session_is_seen(pg, pg_dsn):
    _load(pg, 5)
    _train(pg, "m", "yr", {"model": "linear", "epochs": 1})
    with psycopg.connect(pg_dsn, autocommit=True) as reader:
        reader.execute("SET search_path = loomtest, public")
        first = _value(reader)
        _train(pg, "m", "yr", {"model": "linear", "epochs": 4})
        second = _value(reader)
        assert second != first and _same(second, _python(reader))
        with reader.transaction():  # READ COMMITTED: a later statement sees a later commit
            assert _value(reader) == second
            pg.scalar("""SELECT loom_deploy('m', '{"version": 1}')""")
            assert _value(reader) == first
        with reader.transaction():  # REPEATABLE READ: the transaction's snapshot, then current
            reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            assert _value(reader) == first
            pg.scalar("""SELECT loom_deploy('m', '{"version": 2}')""")
            assert _value(reader) == first
        assert _value(reader) == second
        pg.scalar("SELECT loom_drop_model('m')")
        with pytest.raises(psycopg.Error, match="model 'm' does not exist"):
            _value(reader)


def test_compiled_and_deployed_models_guard_with_loom_finite(pg):
    _load(pg, 6)
    for name, label, options in MODELS:
        _train(pg, name, label, options)
        compiled = pg.scalar(f"SELECT loom_predict_sql('{name}')")
        assert "loom.finite(" in compiled
        gap, nulls_differ, rows = pg.rows(
            f"SELECT max(abs(p - loom_predict('{name}', {ARRAY}))), "
            f"count(*) FILTER (WHERE (p IS NULL) <> (loom_predict('{name}', {ARRAY}) IS NULL)), "
            f"count(p) FROM (SELECT *, {compiled} AS p FROM d) AS q"
        )[0]
        assert nulls_differ == 0 and rows > 0, name
        assert gap <= 1e-9 * max(1.0, float(pg.scalar("SELECT max(abs(yr)) FROM d"))), name
        assert pg.scalar(f"SELECT count(*) FROM d WHERE ({compiled}) IS NULL") == UNANSWERED
    pg.scalar("SELECT loom_deploy('bin_logistic')")
    plan = "\n".join(
        r[0] for r in pg.rows("EXPLAIN VERBOSE SELECT predict_bin_logistic(a, b, c, d) FROM d")
    )
    assert "predict_bin_logistic" not in plan and "loom.finite(" in plan  # inlined


def test_a_revoked_grant_is_seen_by_the_grantee_at_once(pg, pg_dsn):
    from support import roles

    owner, other, schema = roles.names("cp")
    tables = ("model_versions", "models", "grants", "deployments")
    with roles.two_roles(pg_dsn, owner, other, schema, tables) as (as_owner, as_other):
        as_owner.execute("SELECT loom_train('gm', 'pts', 'y', '{\"progress\": false}')")
        with pytest.raises(psycopg.Error, match="model 'gm' does not exist"):
            as_other.execute("SELECT loom_predict('gm', ARRAY[1, 2])")
        as_owner.execute(f"SELECT loom_grant('gm', '{other}')")  # type: ignore[arg-type]
        granted = as_other.execute("SELECT loom_predict('gm', ARRAY[1, 2])").fetchone()
        assert granted == as_owner.execute("SELECT loom_predict('gm', ARRAY[1, 2])").fetchone()
        as_owner.execute(f"SELECT loom_revoke('gm', '{other}')")  # type: ignore[arg-type]
        with pytest.raises(psycopg.Error, match="model 'gm' does not exist"):
            as_other.execute("SELECT loom_predict('gm', ARRAY[1, 2])")
        assert as_owner.execute("SELECT loom_predict('gm', ARRAY[1, 2])").fetchone() == granted


def test_without_loom_finite_compiled_models_keep_the_portable_guard(pg):
    """Where loom.finite is absent (no C module) loom_predict_sql and loom_deploy ask the
    catalog and write the portable guard, which gives the same answers."""
    _load(pg, 7)
    for name, label, options in MODELS:
        _train(pg, name, label, options)
    native = {name: pg.scalar(f"SELECT loom_predict_sql('{name}')") for name, _, _ in MODELS}
    pg.rows("ALTER FUNCTION loom.finite(float8) RENAME TO finite_hidden")
    try:
        for name, _, _ in MODELS:
            portable = pg.scalar(f"SELECT loom_predict_sql('{name}')")
            assert "loom.finite" not in portable and "CAST(0.0 AS FLOAT8) * " in portable
            guarded = native[name].replace("loom.finite(", "loom.finite_hidden(")
            differ = pg.scalar(
                f"SELECT count(*) FROM d WHERE ({portable}) IS DISTINCT FROM ({guarded})"
            )
            assert differ == 0, name
        pg.scalar("SELECT loom_deploy('bin_svm')")
        body = pg.scalar("SELECT prosrc FROM pg_proc WHERE proname = 'predict_bin_svm'")
        assert "loom.finite" not in body
    finally:
        pg.rows("ALTER FUNCTION loom.finite_hidden(float8) RENAME TO finite")
