"""loom_predict_row: a whole row, features bound by column name, on both engines."""

from __future__ import annotations

import json

import numpy as np
import pytest

import loomdb

pytestmark = pytest.mark.postgres

RNG = np.random.default_rng(7)
X = RNG.normal(size=(120, 3))
Y = (X @ np.array([1.5, -2.0, 0.5]) + 0.3 * RNG.normal(size=120) > 0).astype(float)
COLUMNS = ["f1", "f2", "f3"]


@pytest.fixture
def trained(engine):
    engine.load("pr", X, Y, COLUMNS)
    options = json.dumps({"epochs": 30, "features": COLUMNS})
    engine.scalar(f"SELECT loom_train('pr_m', 'pr', 'y', '{options}')")
    return engine


def test_by_name_equals_the_array_form_on_every_row(trained):
    rows = trained.rows(
        "SELECT loom_predict_row('pr_m', pr), loom_predict('pr_m', ARRAY[f1, f2, f3]) FROM pr"
    )
    assert len(rows) == len(X)
    assert all(named == positional for named, positional in rows)
    assert {r[0] for r in rows} == {0.0, 1.0}  # both classes: a constant would pass too


def test_loom_predict_of_a_row_is_the_row_form(trained):
    # the row told apart from an array by its type: ARRAY[...] of integers still means features
    rows = trained.rows(
        "SELECT loom_predict('pr_m', pr), loom_predict_row('pr_m', pr), "
        "loom_predict('pr_m', ARRAY[1, 2, 3]), loom_predict_row('pr_m', "
        "(SELECT s FROM (SELECT 1 AS f1, 2 AS f2, 3 AS f3) s)) FROM pr"
    )
    assert all(by_overload == by_row for by_overload, by_row, _, _ in rows)
    assert {r[0] for r in rows} == {0.0, 1.0}
    assert rows[0][2] == rows[0][3]


def test_loom_predict_refuses_what_is_neither_features_nor_a_row(trained):
    message = _error(trained, "SELECT loom_predict('pr_m', 'not features')")
    assert "loom_predict" in message


def test_column_order_and_extra_columns_do_not_matter(trained):
    # text and label columns the model does not use, the features in another order
    shuffled = "(SELECT 'row ' || CAST(f1 AS TEXT) AS note, f3, y, f1, f2 FROM pr) AS s"
    named = trained.rows(f"SELECT loom_predict_row('pr_m', s) FROM {shuffled} ORDER BY f1")
    positional = trained.rows("SELECT loom_predict('pr_m', ARRAY[f1, f2, f3]) FROM pr ORDER BY f1")
    assert named == positional


def test_a_row_as_json_text_and_a_null_row(trained):
    f1, f2, f3 = (float(v) for v in X[0])
    text = json.dumps({"f3": f3, "f2": f2, "f1": f1})
    expected = trained.scalar(f"SELECT loom_predict('pr_m', ARRAY[{f1!r}, {f2!r}, {f3!r}])")
    assert trained.scalar(f"SELECT loom_predict_row('pr_m', '{text}')") == expected
    assert trained.scalar("SELECT loom_predict_row('pr_m', NULL)") is None


def test_a_number_beyond_a_double_is_infinite(trained):
    """A JSON integer (PostgreSQL writes a numeric that way) past a double's range was
    Python's OverflowError, and one of more than 4300 digits its ValueError: it is ±∞, so the
    prediction is NULL, as for 1e400 or an infinite double."""
    for digits in (400, 5000):
        big = "1" + "0" * digits
        for text in (f'{{"f1": {big}, "f2": 0, "f3": 0}}', f'{{"f1": -{big}, "f2": 0, "f3": 0}}'):
            assert trained.scalar(f"SELECT loom_predict_row('pr_m', '{text}')") is None
    text = '{"f1": 1e400, "f2": 0, "f3": 0}'
    assert trained.scalar(f"SELECT loom_predict_row('pr_m', '{text}')") is None
    if trained.name == "postgres":  # a numeric column, through to_jsonb
        row = "(SELECT CAST('1e400' AS NUMERIC) AS f1, 0.0 AS f2, 0.0 AS f3) AS s"
        assert trained.scalar(f"SELECT loom_predict_row('pr_m', s) FROM {row}") is None


def _error(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    return str(info.value)


def test_a_missing_feature_column_is_named(trained):
    message = _error(trained, "SELECT loom_predict_row('pr_m', s) FROM (SELECT f1, f2 FROM pr) s")
    assert "no column 'f3'" in message


def test_a_null_feature_is_named(trained):
    holes = "SELECT f1, f2, CASE WHEN f1 > 0 THEN f3 END AS f3 FROM pr"
    sql = f"SELECT loom_predict_row('pr_m', s) FROM ({holes}) s"
    assert "feature column 'f3' is NULL" in _error(trained, sql)


def test_a_text_feature_is_refused(trained):
    sql = "SELECT loom_predict_row('pr_m', s) FROM (SELECT f1, f2, 'x' AS f3 FROM pr) s"
    assert "'f3' is not a number" in _error(trained, sql)


def test_a_sparse_model_is_refused_with_a_hint(engine):
    engine.rows(
        "CREATE TABLE prs AS SELECT * FROM (VALUES "
        + ", ".join(f"({i % 2}, ARRAY[0, 2], ARRAY[{i}.0, 1.0])" for i in range(8))
        + ') AS v(y, indices, "values")'
    )
    options = json.dumps({"epochs": 2, "sparse": {"width": 3}})
    engine.scalar(f"SELECT loom_train('prs_m', 'prs', 'y', '{options}')")
    message = _error(engine, "SELECT loom_predict_row('prs_m', prs) FROM prs")
    assert "sparse source" in message and "loom_predict_sparse" in message


@pytest.mark.parametrize("text", ['{"f1": 1', "not json", ""])
def test_a_rows_text_that_is_not_json_is_a_data_error(trained, text):
    # json.loads' JSONDecodeError reached the caller raw
    with pytest.raises(trained.errors) as info:
        trained.rows(f"SELECT loom_predict_row('pr_m', '{text}'), loom_predict('pr_m', pr) FROM pr")
    assert "is not JSON" in str(info.value)
    if trained.name == "duckdb":
        assert isinstance(info.value, loomdb.LoomDataError) and info.value.hint
    else:  # the LoomDataError's SQLSTATE and hint
        assert info.value.sqlstate == loomdb.LoomDataError.sqlstate and info.value.diag.message_hint


def test_a_json_row_naming_a_column_twice_is_refused(trained):
    """'{"f1": 1, "f1": 5, …}' was scored with the last f1, a guess the row form never makes
    elsewhere (a missing or NULL feature is an error naming it)."""
    text = '{"f1": 1.0, "f2": 0.5, "f3": 0.0, "f1": 5.0}'
    message = _error(trained, f"SELECT loom_predict_row('pr_m', '{text}')")
    assert "names column 'f1' twice" in message, message
    unused = '{"f1": 1.0, "f2": 0.5, "f3": 0.0, "note": 1, "note": 2}'
    assert "'note' twice" in _error(trained, f"SELECT loom_predict_row('pr_m', '{unused}')")
