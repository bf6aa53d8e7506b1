"""The compiled SQL expression: quoted names, exact constants, NULL for non-finite features."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from loomdb.functions.predict_sql import predict_expression, proba_expression
from loomdb.learn.model import LinearModel
from loomdb.learn.scaling import Scaling


def _model() -> LinearModel:
    return LinearModel(
        "logistic",
        ['we"ird', "b", "unused"],
        np.array([[1.5], [-0.25], [0.0]]),
        np.array([0.1]),
        Scaling("zscore", np.array([1.0, 2.0, 0.0]), np.array([0.5, 4.0, 1.0])),
        [0.0, 1.0],
    )


def test_names_are_quoted_and_constants_exact():
    expr = predict_expression(_model())
    assert '"we""ird"' in expr and "CASE WHEN" in expr
    folded, b = _model().folded()
    assert f"{folded[0, 0]:.17e}" in expr and f"{b[0]:.17e}".lstrip("-") in expr


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_expression_equals_the_model_and_nulls_non_finite_rows(dialect):
    model = _model()
    rows = [(1.0, 2.0, 3.0), (2.5, -1.0, 0.0), (float("nan"), 1.0, 1.0), (1.0, 1.0, float("inf"))]
    con = duckdb.connect()
    con.execute('CREATE TABLE t ("we""ird" DOUBLE, b DOUBLE, unused DOUBLE)')
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    # PostgreSQL's spelling names pg_catalog's exp, which DuckDB, running it here, calls exp
    proba = proba_expression(model, dialect).replace("pg_catalog.exp(", "exp(")
    got = con.execute(f"SELECT {predict_expression(model, dialect)}, {proba} FROM t").fetchall()
    X = np.array(rows)
    want = list(zip(model.predict(X), model.predict_proba(X)))
    for (label, proba), (wl, wp) in zip(got, want):
        if np.isnan(wl):
            assert label is None and proba is None
        else:
            assert label == wl and abs(proba - wp) <= 1e-12


def _models() -> list[LinearModel]:
    """Binary (with a zero-weight feature), one-vs-rest and regression models."""
    scaling = Scaling("zscore", np.array([1.0, 2.0, 0.0]), np.array([0.5, 4.0, 1.0]))
    names = ['we"ird', "b", "unused"]
    W3 = np.array([[1.5, -0.5, 0.2], [-0.25, 0.75, 0.1], [0.0, 0.3, -0.4]])
    return [
        _model(),
        LinearModel("svm", names, W3, np.array([0.1, -0.2, 0.0]), scaling, [1.0, 2.0, 3.0]),
        LinearModel("linear", names, W3[:, :1], np.array([0.3]), scaling),
    ]


def test_the_loom_finite_form_equals_the_model_and_nulls_non_finite_rows():
    """PostgreSQL's form where loom.finite exists, run in DuckDB with loom.finite as a macro:
    a NaN or ±inf in any feature, the zero-weight one included, gives NULL."""
    rows = [
        (1.0, 2.0, 3.0),
        (2.5, -1.0, 0.0),
        (-3.0, 0.5, 7.0),
        (float("nan"), 1.0, 1.0),
        (1.0, 1.0, float("inf")),
        (1.0, float("-inf"), 1.0),
    ]
    con = duckdb.connect()
    con.execute("CREATE SCHEMA loom")
    con.execute("CREATE MACRO loom.finite(x) AS CASE WHEN isfinite(x) THEN x END")
    con.execute('CREATE TABLE t ("we""ird" DOUBLE, b DOUBLE, unused DOUBLE)')
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    for model in _models():
        expression = predict_expression(model, "postgres", finite=True)
        assert "loom.finite(" in expression and 'CAST("unused" AS FLOAT8)' in expression
        assert predict_expression(model, "postgres") == predict_expression(model, "postgres", False)
        got = [r[0] for r in con.execute(f"SELECT {expression} FROM t").fetchall()]
        want = model.predict(np.array(rows))
        for label, w in zip(got, want):
            assert (label is None) if np.isnan(w) else abs(label - w) <= 1e-12 * max(1, abs(w))


@pytest.mark.parametrize(
    "classes, arithmetic",
    [
        ((0.0, 1.0), True),
        ((1.0, 2.0), True),
        ((-1.0, 1.0), True),
        ((2.0, -3.5), True),
        ((1e16, 1.0), False),  # 1 − 1e16 rounds to −1e16: 1e16 + (1 − 1e16) is 0
        ((-0.0, 1.0), False),  # -0.0 + 1.0·0 is +0.0
    ],
)
def test_a_binary_class_is_exact_arithmetic_on_the_sign_or_a_case(classes, arithmetic):
    """Each form gives the model's classes bit for bit (±0 told apart), NULL for non-finite rows,
    on both dialects' text (PostgreSQL's run here with loom.finite as a macro)."""
    model = _model()
    model.classes = list(classes)
    rows = [(1.0, 2.0, 3.0), (2.5, -1.0, 0.0), (-3.0, 0.5, 7.0), (float("nan"), 1.0, 1.0)]
    con = duckdb.connect()
    con.execute("CREATE SCHEMA loom")
    con.execute("CREATE MACRO loom.finite(x) AS CASE WHEN isfinite(x) THEN x END")
    con.execute('CREATE TABLE t ("we""ird" DOUBLE, b DOUBLE, unused DOUBLE)')
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    want = model.predict(np.array(rows))
    assert len(set(want[:3])) == 2  # both classes are chosen
    forms = {
        "duckdb": predict_expression(model, "duckdb"),
        "postgres": predict_expression(model, "postgres"),
        "loom.finite": predict_expression(model, "postgres", finite=True),
    }
    for form, expression in forms.items():
        guards = {"duckdb": 1, "postgres": 1, "loom.finite": 0}[form]
        assert expression.count("CASE") == guards + (not arithmetic), (form, expression)
        got = [r[0] for r in con.execute(f"SELECT {expression} FROM t").fetchall()]
        assert got[3] is None, form
        for label, w in zip(got[:3], want[:3]):
            assert label == w and np.copysign(1.0, label) == np.copysign(1.0, w), (form, got)


def test_text_classes_stay_a_case():
    model = _model()
    model.class_names = ["no", "yes"]
    for expression in (
        predict_expression(model, "duckdb"),
        predict_expression(model, "postgres", finite=True),
    ):
        assert "THEN 'yes'" in expression and "'no' END" in expression
