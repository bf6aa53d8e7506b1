"""Preprocessing stored with the model: one-hot text, imputed numbers, replayed at predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import OneHotEncoder

from loomdb.store import encoding as encodings

pytestmark = pytest.mark.postgres

N = 240
RNG = np.random.default_rng(11)
COLORS = np.array(["red", "green", "blue", "it's"])  # a quote inside a value
COLOR = COLORS[RNG.integers(0, 4, N)].astype(object)
COLOR[RNG.random(N) < 0.1] = None
SIZE = np.array([f"s{k}" for k in RNG.choice(8, N, p=[0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05])])
X = RNG.normal(2.0, 1.5, N)
X_NULL = RNG.random(N) < 0.15
EFFECT = {"red": 2.0, "green": -1.5, "blue": 0.5, "it's": -0.5, None: 0.0}
Y = (np.array([EFFECT[c] for c in COLOR]) + 0.8 * X - 1.6 + 0.3 * RNG.normal(size=N) > 0) * 1.0


def _text(v) -> str:
    return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'"


@pytest.fixture
def source(engine):
    engine.rows("CREATE TABLE pp (color TEXT, size TEXT, x DOUBLE PRECISION, y DOUBLE PRECISION)")
    values = ", ".join(
        f"({_text(c)}, {_text(s)}, {'NULL' if m else repr(float(x))}, {y})"
        for c, s, x, m, y in zip(COLOR, SIZE, X, X_NULL, Y)
    )
    engine.rows(f"INSERT INTO pp VALUES {values}")
    return engine


def _train(engine, name: str, **options) -> dict:
    given = {"model": "logistic", "epochs": 40, **options}
    engine.scalar(f"SELECT loom_train('{name}', 'pp', 'y', '{json.dumps(given)}')")
    return json.loads(engine.scalar(f"SELECT loom_model_info('{name}')"))


def _encoding(info: dict) -> list[encodings.Encoded]:
    loaded = encodings.load(info["options"]["encoding"])
    assert loaded is not None
    return loaded


def _error(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as caught:
        engine.rows(sql)
    return str(caught.value)


MEAN_X = {"features": ["color", "x"], "preprocess": {"x": {"impute": "mean"}}}


def test_one_hot_equals_scikit_learn_in_sql_and_in_python(source):
    info = _train(source, "pp_m", **MEAN_X)
    color = _encoding(info)[0]
    known = COLOR[COLOR != None].reshape(-1, 1)  # noqa: E711 (elementwise)
    sk = OneHotEncoder(handle_unknown="ignore").fit(known)
    assert list(color.categories) == list(sk.categories_[0])
    assert info["feature_names"][:4] == [f"color={v}" for v in sk.categories_[0]]
    filled = np.where(COLOR == None, "__none__", COLOR).reshape(-1, 1)  # noqa: E711
    expected = sk.transform(filled).toarray()  # NULL: unknown to sklearn, all zeros
    exprs = ", ".join(color.sql("DOUBLE PRECISION", source.name))
    in_sql = np.array(source.rows(f"SELECT {exprs} FROM pp"), dtype=float)
    order = np.array(source.rows("SELECT color FROM pp"), dtype=object)[:, 0]
    in_sql_expected = sk.transform(np.where(order == None, "__none__", order).reshape(-1, 1))  # noqa: E711
    assert np.array_equal(in_sql, in_sql_expected.toarray())
    assert np.array_equal(color.apply(list(COLOR)), expected)


def test_accuracy_comparable_to_scikit_learn_on_the_same_encoding(source):
    info = _train(source, "pp_m", **MEAN_X)
    result = json.loads(source.scalar("SELECT loom_evaluate('pp_m', 'pp')"))
    color, x = _encoding(info)
    design = np.hstack(
        [color.apply(list(COLOR)), x.apply([None if m else v for v, m in zip(X, X_NULL)])]
    )
    reference = LogisticRegression(max_iter=1000).fit(design, Y).score(design, Y)
    assert result["rows"] == N and result["skipped"] == 0  # NULL x imputed, NULL color kept
    assert result["accuracy"] >= reference - 0.03


@pytest.mark.parametrize("strategy", ["mean", "median"])
def test_impute_equals_simple_imputer(source, strategy):
    info = _train(source, "pp_m", features=["x"], preprocess={"x": {"impute": strategy}})
    column = np.where(X_NULL, np.nan, X).reshape(-1, 1)
    expected = SimpleImputer(strategy=strategy).fit(column).statistics_[0]
    impute = _encoding(info)[0].impute
    if strategy == "median":
        assert impute == pytest.approx(expected, rel=1e-12)
        return
    # the mean is settled as the column's statistics are: a multiple of the power of two below
    # std · 2^-24, next to the mean, so that sums in another order fill the same value
    grid = 2.0 ** (np.frexp(np.nanstd(column))[1] - 25)
    assert abs(impute - expected) < grid and impute != expected
    assert impute / grid == round(impute / grid)


def test_a_constant_impute_and_null_rows_still_refused_without_it(source):
    info = _train(source, "pp_c", features=["x"], preprocess={"x": {"impute": -3}})
    assert _encoding(info)[0].impute == -3.0
    message = _error(source, "SELECT loom_train('pp_n', 'pp', 'y', '{\"features\": [\"x\"]}')")
    assert "NULL" in message


def test_compiled_deployed_and_by_name_predictions_agree(source):
    _train(source, "pp_m", **MEAN_X)
    sql = source.scalar("SELECT loom_predict_sql('pp_m')")
    assert "'it''s'" in sql  # a value is a quoted literal
    source.scalar("SELECT loom_deploy('pp_m')")
    rows = source.rows(
        f"SELECT {sql}, predict_pp_m(color, x), loom_predict_row('pp_m', pp), y FROM pp"
    )
    assert all(a == b == c for a, b, c, _ in rows)
    assert {r[0] for r in rows} == {0.0, 1.0}
    accuracy = np.mean([r[0] == r[3] for r in rows])
    assert accuracy > 0.8


def test_a_linear_one_hot_models_values_agree_everywhere(source):
    """Values, not classes: a text column with ``<other>`` compiles to one CASE a row
    (``Encoded.weighted_sql``) whose margin is the model's, NULLs and the rest included."""
    preprocess = {**MEAN_X["preprocess"], "size": {"top_k": 3}}
    info = _train(
        source, "pp_l", features=["size", "color", "x"], preprocess=preprocess, model="linear"
    )
    assert [e.other for e in _encoding(info)[:2]] == [True, False]
    compiled = source.scalar("SELECT loom_predict_sql('pp_l')")
    assert "THEN 1.0 ELSE 0.0" not in compiled  # no indicator terms: one CASE a column
    source.scalar("SELECT loom_deploy('pp_l')")
    got = np.array(
        source.rows(
            f"SELECT {compiled}, predict_pp_l(size, color, x), loom_predict_row('pp_l', pp) FROM pp"
        ),
        dtype=float,
    )
    assert np.allclose(got[:, :2], got[:, 2:], rtol=1e-12, atol=1e-12)
    assert len(np.unique(got[:, 2].round(9))) > 20  # the columns move the value


def test_unseen_category_and_null_are_all_zeros_without_other(source):
    info = _train(source, "pp_m", **MEAN_X)
    color = _encoding(info)[0]
    assert not color.other
    assert not color.apply(["purple", None]).any()
    sql = source.scalar("SELECT loom_predict_sql('pp_m')")
    source.scalar("SELECT loom_deploy('pp_m')")
    probe = "(SELECT CAST('purple' AS TEXT) AS color, CAST(1.5 AS DOUBLE PRECISION) AS x) AS q"
    unseen = source.rows(
        f"SELECT {sql}, predict_pp_m(color, x), loom_predict_row('pp_m', q) FROM {probe}"
    )
    nulled = "(SELECT CAST(NULL AS TEXT) AS color, CAST(1.5 AS DOUBLE PRECISION) AS x) AS q"
    missing = source.rows(f"SELECT {sql}, loom_predict_row('pp_m', q) FROM {nulled}")
    assert len(set(unseen[0])) == 1 and unseen[0][0] == missing[0][0] == missing[0][1]


def test_top_k_keeps_the_most_frequent_and_folds_the_rest_into_other(source):
    info = _train(source, "pp_k", features=["size"], preprocess={"size": {"top_k": 3}})
    size = _encoding(info)[0]
    values, counts = np.unique(SIZE, return_counts=True)
    ranked = sorted(zip(values, counts), key=lambda r: (-r[1], r[0]))
    assert list(size.categories) == sorted(v for v, _ in ranked[:3])
    assert size.other and info["feature_names"][-1] == "size=<other>"
    encoded = size.apply(list(SIZE) + ["never-seen"])
    assert encoded.sum(axis=1).tolist() == [1.0] * (N + 1)
    assert encoded[-1, -1] == 1.0  # an unseen value is <other>
    exprs = ", ".join(size.sql("DOUBLE PRECISION", source.name))
    in_sql = np.array(source.rows(f"SELECT {exprs} FROM pp"), dtype=float)
    order = [r[0] for r in source.rows("SELECT size FROM pp")]
    assert np.array_equal(in_sql, size.apply(order))


def test_an_empty_source_with_text_features_is_called_empty(source):
    """A source of no rows has no values in any column: 'hold only NULLs' sent the user to
    the columns; the source is empty, as a train without preprocessing says."""
    source.rows("CREATE TABLE pp_none AS SELECT color, x, y FROM pp WHERE y IS NULL")
    for options in (
        {"features": ["color", "x"]},
        {"features": ["x"], "preprocess": {"x": {"impute": "mean"}}},
    ):
        sql = f"SELECT loom_train('pp_e', 'pp_none', 'y', '{json.dumps(options)}')"
        message = _error(source, sql)
        assert "pp_none is empty" in message and "only NULLs" not in message
    sql = "SELECT loom_create_index('pp_ei', 'pp_none', 'y', '{\"features\": [\"color\"]}')"
    assert "pp_none is empty" in _error(source, sql)


def test_an_all_null_column_is_refused_at_train(source):
    source.rows(
        "CREATE TABLE pp_null AS SELECT color, CAST(NULL AS DOUBLE PRECISION) AS z, y FROM pp"
    )
    options = json.dumps({"features": ["color", "z"], "preprocess": {"z": {"impute": "mean"}}})
    message = _error(source, f"SELECT loom_train('pp_z', 'pp_null', 'y', '{options}')")
    assert "z" in message and "only NULLs" in message


@pytest.mark.parametrize(
    ("preprocess", "expected"),
    [
        ({"color": {"impute": "mean"}}, "'impute' applies to numeric columns"),
        ({"x": {"top_k": 2}}, "'top_k' applies to text columns"),
        ({"nope": {"impute": "mean"}}, "'preprocess' names nope"),
        ({"x": {"impute": "mode"}}, "preprocess"),
    ],
)
def test_bad_preprocess_options_are_named(source, preprocess, expected):
    options = json.dumps({"features": ["color", "x"], "nulls": "skip", "preprocess": preprocess})
    assert expected in _error(source, f"SELECT loom_train('pp_b', 'pp', 'y', '{options}')")


def test_an_index_replays_its_encoding_and_stays_fresh(source):
    options = json.dumps({**MEAN_X, "format": "dense"})
    source.scalar(f"SELECT loom_create_index('pp_i', 'pp', 'y', '{options}')")
    trained = json.dumps({"index": "pp_i", "model": "logistic", "epochs": 20})
    source.scalar(f"SELECT loom_train('pp_im', NULL, 'y', '{trained}')")
    with_features = json.dumps({"index": "pp_i", "features": ["color", "x"], "replace": True})
    source.scalar(f"SELECT loom_train('pp_im', NULL, 'y', '{with_features}')")
    source.scalar("SELECT loom_reindex('pp_i')")
    sql = source.scalar("SELECT loom_predict_sql('pp_im')")
    rows = source.rows(f"SELECT {sql}, loom_predict_row('pp_im', pp) FROM pp")
    assert all(a == b for a, b in rows)


def test_values_with_backslashes_are_read_alike_whatever_the_string_setting(engine):
    """A category or a text class holding a backslash was written into loomdb's SQL as
    ``'x\\'``: with PostgreSQL's ``standard_conforming_strings`` off (a session's setting) that
    backslash escaped the closing quote, so training, evaluating and deploying failed with a
    syntax error (and a value could have written SQL of its own).  Such a value is written as
    an escape string literal, read the same with the setting on or off and on DuckDB."""
    values = ["C:\\dir", "x\\", "\\'", "it's", "plain"]
    rng = np.random.default_rng(5)
    t = rng.integers(0, len(values), 200)
    x = rng.normal(size=200)
    y = np.where(x + (t % 2) - 0.5 > 0, "ok\\", "no")
    engine.rows("CREATE TABLE bs (t TEXT, x DOUBLE PRECISION, y TEXT)")
    rows = ", ".join(f"({_text(values[i])}, {float(v)!r}, {_text(c)})" for i, v, c in zip(t, x, y))
    engine.rows(f"INSERT INTO bs VALUES {rows}")
    if engine.name == "postgres":
        engine.rows("SET standard_conforming_strings = off")
    options = {"model": "logistic", "epochs": 30, "features": ["t", "x"]}
    for name, more in (("bs_all", {}), ("bs_top", {"preprocess": {"t": {"top_k": 2}}})):
        engine.scalar(
            f"SELECT loom_train('{name}', 'bs', 'y', '{json.dumps({**options, **more})}')"
        )
        info = json.loads(engine.scalar(f"SELECT loom_model_info('{name}')"))
        assert info["class_names"] == ["no", "ok\\"]
        assert set(_encoding(info)[0].categories) <= set(values)
        engine.scalar(f"SELECT loom_deploy('{name}')")
        compiled = engine.scalar(f"SELECT loom_predict_sql('{name}')")
        got = engine.rows(
            f"SELECT predict_{name}(t, x), {compiled}, loom_predict_class('{name}', b) FROM bs b"
        )
        assert all(a == b == c for a, b, c in got) and {c for _, _, c in got} == {"no", "ok\\"}
        evaluated = json.loads(engine.scalar(f"SELECT loom_evaluate('{name}', 'bs')"))
        right = sum(c == label for (_, _, c), label in zip(got, y))
        assert evaluated["rows"] == 200 and evaluated["accuracy"] == right / 200
