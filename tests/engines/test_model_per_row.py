"""A model name per row, models of different widths in one statement, on both engines: each
row's features are judged against its own model only, wherever DuckDB cuts its vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

RNG = np.random.default_rng(5)
N = 4096
X = RNG.normal(size=(N, 3))
Y = (X @ np.array([1.0, -1.0, 0.5]) > 0).astype(float)


@pytest.fixture
def two_widths(engine):
    rows = np.column_stack([np.arange(N, dtype=float), X])
    engine.load("widths", rows, Y, ["i", "a", "b", "c"])
    for name, features in (("w2", ["a", "b"]), ("w3", ["a", "b", "c"])):
        options = json.dumps({"model": "logistic", "epochs": 3, "features": features})
        engine.scalar(f"SELECT loom_train('{name}', 'widths', 'y', '{options}')")
    return engine


@pytest.mark.parametrize("cut", [1000, 2048, 3001])
def test_models_of_other_widths_in_one_statement_score_each_row_by_its_own(two_widths, cut):
    # DuckDB read a vector's LISTs before grouping its rows by model: lengths 2 and 3 in one
    # vector were refused ("feature arrays of different lengths"), unless the names changed
    # exactly where a vector ended (2048)
    name = f"CASE WHEN i < {cut} THEN 'w2' ELSE 'w3' END"
    features = f"CASE WHEN i < {cut} THEN ARRAY[a, b] ELSE ARRAY[a, b, c] END"
    own = (
        f"CASE WHEN i < {cut} THEN loom_predict_proba('w2', ARRAY[a, b]) "
        "ELSE loom_predict_proba('w3', ARRAY[a, b, c]) END"
    )
    rows = two_widths.rows(
        f"SELECT loom_predict_proba({name}, {features}), {own}, "
        f"loom_predict_class({name}, {features}), loom_predict({name}, {features}) "
        "FROM widths ORDER BY i"
    )
    assert len(rows) == N
    assert all(by_row == by_model for by_row, by_model, _, _ in rows)
    assert all(text == f"{number:g}" for _, _, text, number in rows)
    assert {number for *_, number in rows} == {0.0, 1.0}


def test_a_row_of_the_wrong_width_for_its_own_model_is_still_refused(two_widths):
    sql = "SELECT loom_predict(CASE WHEN i < 3000 THEN 'w2' ELSE 'w3' END, ARRAY[a, b]) FROM widths"
    with pytest.raises(two_widths.errors) as raised:
        two_widths.rows(sql)
    assert "expects 3 features" in str(raised.value)
