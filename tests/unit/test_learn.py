"""Losses, optimisers, the trainer and the option validator, without a database."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loomdb.accel.cpu import CpuBackend
from loomdb.errors import LoomDataError
from loomdb.learn import metrics
from loomdb.learn.losses import LOSSES
from loomdb.learn.model import class_text
from loomdb.learn.optimizers import soft_threshold
from loomdb.learn.schedules import Schedule
from loomdb.learn.trainer import TrainConfig, fit
from support.arrays import ArraySource, problem


@pytest.mark.parametrize("kind", ["linear", "logistic", "svm"])
@settings(max_examples=50, deadline=None)
@given(z=st.floats(-20, 20), t=st.sampled_from([0.0, 1.0]))
def test_loss_derivative_matches_finite_differences(kind, z, t):
    loss = LOSSES[kind]
    if kind == "svm" and abs(abs(z) - 1.0) < 1e-3:
        return  # the hinge is not differentiable at the margin
    Z, T = np.array([[z]]), np.array([[t]])
    h = 1e-6
    numeric = (loss.value(Z + h, T) - loss.value(Z - h, T)) / (2 * h)
    assert np.allclose(loss.derivative(Z, T), numeric, atol=1e-5)


def test_logistic_loss_is_stable_for_large_margins():
    loss = LOSSES["logistic"]
    Z = np.array([[800.0, -800.0]])
    assert np.isfinite(loss.value(Z, np.array([[0.0, 1.0]]))).all()


def test_schedules():
    assert Schedule("constant", 0.5, 0).get(10) == 0.5
    assert Schedule("inverse-t", 1.0, 1.0).get(3) == 0.25
    assert Schedule("exponential", 1.0, 0.5).get(2) == 0.25


def test_soft_threshold():
    W = np.array([[-2.0], [0.5], [3.0]])
    soft_threshold(W, 1.0)
    assert W.ravel().tolist() == [-1.0, 0.0, 2.0]


def _problem(X, classes, method="zscore", y=None):
    return problem(X, classes, method, y)


def test_standardisation_folded_into_products_equals_explicit_scaling():
    rng = np.random.default_rng(0)
    X = rng.normal(5, 3, size=(64, 4))
    y = (X @ [1, -2, 0.5, 0] > 0).astype(float)
    cfg = TrainConfig(kind="logistic", epochs=3)
    folded, _ = fit(ArraySource(X, y), _problem(X, [0.0, 1.0]), cfg, CpuBackend())
    Xs = folded.scaling.apply(X)
    explicit, _ = fit(ArraySource(Xs, y), _problem(Xs, [0.0, 1.0], "none"), cfg, CpuBackend())
    assert np.allclose(folded.W, explicit.W, atol=1e-12)
    assert np.allclose(folded.b, explicit.b, atol=1e-12)


def test_intercept_unregularised_and_l1_sparsifies():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 10))
    y = X[:, 0] * 3 + 7.0
    dense, _ = fit(
        ArraySource(X, y),
        _problem(X, []),
        TrainConfig(kind="linear", epochs=30, l2=0.0, lr=0.05),
        CpuBackend(),
    )
    sparse, _ = fit(
        ArraySource(X, y),
        _problem(X, []),
        TrainConfig(kind="linear", epochs=30, l1=0.5, l2=0.0, lr=0.05),
        CpuBackend(),
    )
    assert (np.abs(sparse.W[1:]) < 1e-12).sum() > (np.abs(dense.W[1:]) < 1e-12).sum()
    shrunk, _ = fit(
        ArraySource(X, y),
        _problem(X, []),
        TrainConfig(kind="linear", epochs=50, l2=50.0, lr=0.015, lr_schedule="constant"),
        CpuBackend(),
    )
    assert np.abs(shrunk.W).max() < 0.05  # a huge L2 shrinks the weights …
    assert abs(shrunk.b[0] - y.mean()) < 0.05  # … but not the intercept


def test_tol_stops_early_and_adam_converges():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(float)
    cfg = TrainConfig(
        kind="logistic", epochs=200, tol=1e-3, optimizer="adam", lr=0.05, lr_decay=1.0
    )
    model, history = fit(ArraySource(X, y), _problem(X, [0.0, 1.0]), cfg, CpuBackend())
    assert len(history) < 200
    assert (model.predict(X) == y).mean() > 0.95


def test_metrics_known_values():
    y = np.array([0.0, 0.0, 1.0, 1.0])
    score = np.array([0.1, 0.4, 0.35, 0.8])
    assert metrics.roc_auc(y == 1, score) == pytest.approx(0.75)
    m = metrics.classification(y, np.array([0.0, 1.0, 1.0, 1.0]), [0.0, 1.0])
    assert m["accuracy"] == 0.75 and m["precision"] == pytest.approx(2 / 3) and m["recall"] == 1
    r = metrics.regression(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))
    assert r["mse"] == pytest.approx(1 / 3) and r["mae"] == pytest.approx(1 / 3)


def test_divergence_backs_off_and_records_it():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(256, 5))
    y = X @ np.arange(1.0, 6.0)
    cfg = TrainConfig(kind="linear", epochs=5, lr=1e6, safe_lr=0.05, lr_schedule="constant")
    model, history = fit(ArraySource(X, y), _problem(X, [], y=y), cfg, CpuBackend())
    restarts = [h for h in history if "restart" in h]
    assert restarts and restarts[0]["lr"] == 1e6 and restarts[0]["next_lr"] == 0.05
    assert np.isfinite(model.W).all()
    epochs = [h for h in history if "epoch" in h]
    assert len(epochs) == 5 and epochs[-1]["loss"] < 0.5 * np.mean(y**2)


def test_a_train_that_cannot_converge_is_an_error_with_a_hint():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(64, 3))
    y = X[:, 0] * 1e3
    cfg = TrainConfig(kind="linear", epochs=3, lr=1e300, lr_schedule="constant")
    with pytest.raises(LoomDataError, match="diverged") as e:
        fit(ArraySource(X, y), _problem(X, [], y=y), cfg, CpuBackend())
    assert "lr" in (e.value.hint or "")


def test_margins_null_exactly_the_rows_with_a_non_finite_feature():
    from loomdb.learn.model import LinearModel
    from loomdb.learn.scaling import Scaling

    W = np.array([[2.0, 0.0], [0.0, 2.0], [0.0, 0.0]])  # the last feature weighs nothing
    model = LinearModel(
        "svm",
        ["a", "b", "c"],
        W,
        np.zeros(2),
        Scaling("none", np.zeros(3), np.ones(3)),
        classes=[0.0, 1.0],
    )
    X = np.array(
        [
            [1.0, 2.0, 3.0],
            [np.nan, 1.0, 1.0],
            [1.0, np.inf, 1.0],
            [1.0, 1.0, -np.inf],  # under a zero weight only
            [1e308, 1.0, 0.0],  # finite features whose margin overflows: kept
        ]
    )
    Z = model.margins(X)
    assert np.isnan(Z[1:4]).all()
    assert np.isfinite(Z[0]).all() and Z[4, 0] == np.inf
    assert np.isnan(model.labels(Z)[1:4]).all() and not np.isnan(model.labels(Z)[[0, 4]]).any()


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_numeric_class_as_text_reads_back_as_the_same_double(x):
    text = class_text(x)
    assert float(text) == x and not text.endswith(".0")
    assert class_text(1.0) == "1" and class_text(2.5) == "2.5" and class_text(-0.0) == "0"
