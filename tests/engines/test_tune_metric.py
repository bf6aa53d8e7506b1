"""``loom_tune``'s ``metric``: trials scored by validation accuracy, AUC, RMSE or MAE instead of
the loss, the best by that metric kept, the metric named wherever the search is recorded, and a
metric the model kind has no use for refused before any trial."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

GRID = {"batch_size": 50, "epochs": 4, "lr": [0.001, 0.01, 0.1, 1.0], "l2": [0.0, 0.1]}


@pytest.fixture
def points(engine):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(600, 3))
    value = X[:, 0] - 2 * X[:, 1] + 0.5 * X[:, 2] + 0.8 * rng.normal(size=600)
    engine.load("mp", X, (value > 0).astype(float), columns=["a", "b", "c"])
    engine.load("mr", X, value, columns=["a", "b", "c"])
    engine.load("m3", X, np.digitize(value, [-1.0, 1.0]).astype(float), columns=["a", "b", "c"])
    return engine


def tune(engine, name: str, table: str, **options) -> dict:
    text = json.dumps({**GRID, **options})
    return json.loads(engine.scalar(f"SELECT loom_tune('{name}', '{table}', 'y', '{text}')"))


def scores(engine, name: str) -> list[tuple]:
    """(trial, score, metric) of every trial, in trial order, as loom.trials keeps them."""
    return engine.rows(
        f"SELECT trial, score, metric FROM loom.trials WHERE model = '{name}' ORDER BY trial"
    )


def _first_best(rows: list[tuple], higher: bool) -> tuple:
    best = rows[0]
    for r in rows[1:]:
        if (r[1] > best[1]) if higher else (r[1] < best[1]):
            best = r
    return best


@pytest.mark.parametrize(("model", "metric"), [("logistic", "accuracy"), ("svm", "auc")])
def test_a_classifier_keeps_the_trial_of_the_highest_metric(points, model, metric):
    summary = tune(points, "t_c", "mp", model=model, metric=metric)
    rows = scores(points, "t_c")
    assert len(rows) == 8 and {r[2] for r in rows} == {f"validation {metric}"}
    assert all(0.0 <= r[1] <= 1.0 for r in rows)
    best = _first_best(rows, higher=True)
    assert summary["best_trial"] == best[0] and summary["best_score"] == best[1]
    assert summary["metric"] == f"validation {metric}"
    info = json.loads(points.scalar("SELECT loom_model_info('t_c')"))
    assert info["options"]["tuned"] == {
        "search": "grid",
        "trial": best[0],
        "trials": 8,
        "metric": f"validation {metric}",
    }


# The layout's one-time shuffle (the default seed, 42), as each engine reads a source; the
# validation rows are the last batches of it: round(12 batches × 0.2) = 2 of 50 rows.
SHUFFLED = {
    "duckdb": "hash(loom_rn, 42), loom_rn",
    "postgres": "hashint8extended(loom_rn, 42), loom_rn",
}
VALIDATION_ROWS = 100


def _validation_accuracy(engine, model: str) -> float:
    right = engine.rows(
        f"SELECT loom_predict('{model}', ARRAY[a, b, c]) = y FROM (SELECT *, row_number() "
        f"OVER () AS loom_rn FROM mp) AS t ORDER BY {SHUFFLED[engine.name]}"
    )
    return float(np.mean([r[0] for r in right[-VALIDATION_ROWS:]]))


def test_accuracy_keeps_the_trial_most_accurate_on_the_validation_rows(points):
    summary = tune(points, "t_a", "mp", metric="accuracy")
    tried = points.rows("SELECT trial, score, options FROM loom_trials('t_a') ORDER BY trial")
    accuracies = []
    for trial, score, options in tried:  # each trial again, scored here on its held-out rows
        points.scalar(f"SELECT loom_train('again{trial}', 'mp', 'y', '{options}')")
        accuracies.append(_validation_accuracy(points, f"again{trial}"))
        assert score == pytest.approx(accuracies[-1], abs=1e-12)
    assert summary["best_trial"] == int(np.argmax(accuracies)) + 1
    assert len(set(accuracies)) > 1  # the trials differ: the choice means something


def test_rmse_and_mae_of_a_regression_agree_with_its_squared_loss(points):
    # plain SGD keeps its last iterate, the weights the epoch's validation loss was taken of
    # (nesterov keeps the epoch's mean iterate: its metric is of that, the model kept)
    linear = {"model": "linear", "optimizer": "sgd"}
    loss = scores(points, "t_r") if tune(points, "t_r", "mr", **linear) else []
    rmse = scores(points, "t_s") if tune(points, "t_s", "mr", **linear, metric="rmse") else []
    mae = scores(points, "t_m") if tune(points, "t_m", "mr", **linear, metric="mae") else []
    for (_, half_mse, _), (_, r, _), (_, m, _) in zip(loss, rmse, mae):
        assert r == pytest.approx(math.sqrt(2.0 * half_mse), rel=1e-9)  # the loss is ½(z − y)²
        assert m <= r + 1e-12
    info = json.loads(points.scalar("SELECT loom_model_info('t_m')"))
    assert info["options"]["tuned"]["trial"] == _first_best(mae, higher=False)[0]
    assert {r[2] for r in mae} == {"validation mae"}


@pytest.mark.parametrize(
    ("table", "options", "match"),
    [
        ("mr", {"model": "linear", "metric": "accuracy"}, "'accuracy' metric scores classifier"),
        ("mp", {"metric": "rmse"}, "model 'logistic' is a classifier model"),
        ("mp", {"metric": "f1"}, "'metric' option must be 'loss', 'accuracy', 'auc'"),
        ("m3", {"metric": "auc"}, "the label holds 3"),
    ],
)
def test_a_metric_that_does_not_fit_is_refused_and_nothing_stored(points, table, options, match):
    with pytest.raises(points.errors, match=match):
        tune(points, "t_bad", table, **options)
    assert points.scalar("SELECT count(*) FROM loom.trials WHERE model = 't_bad'") == 0
    assert points.scalar("SELECT count(*) FROM loom.models WHERE name = 't_bad'") == 0


def test_an_auc_of_validation_rows_of_one_class_is_said_so(engine):
    """Validation rows of one class have no AUC: the tune failed with "the validation auc is
    not finite" and the hint to give smaller lr candidates, which cannot help."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2))
    y = np.zeros(200)
    y[:3] = 1.0  # the held-out batch holds none of them
    engine.load("rare", X, y, columns=["a", "b"])
    options = {"batch_size": 20, "epochs": 2, "lr": [0.1, 0.2], "validation_fraction": 0.1}
    text = json.dumps({**options, "metric": "auc"})
    with pytest.raises(engine.errors) as info:
        engine.scalar(f"SELECT loom_tune('rare_auc', 'rare', 'y', '{text}')")
    e = info.value
    message = str(e)
    hint = getattr(e, "hint", None) or getattr(getattr(e, "diag", None), "message_hint", "")
    assert "validation auc is undefined: its rows hold one class" in message, message
    assert "'loss' or 'accuracy'" in hint and "lr" not in hint, hint
    text = json.dumps({**options, "metric": "accuracy"})
    assert json.loads(engine.scalar(f"SELECT loom_tune('rare_acc', 'rare', 'y', '{text}')"))
