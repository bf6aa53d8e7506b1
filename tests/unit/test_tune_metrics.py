"""loom_tune's validation metrics against scikit-learn's."""

from __future__ import annotations

import math

import numpy as np
from sklearn import metrics as sk

from loomdb.learn.metrics import tune_score


def test_classifier_metrics_equal_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300).astype(float) * 2 - 1  # classes -1 and 1
    Z = (y + rng.normal(0, 1.5, 300)).reshape(-1, 1)
    pred = np.where(Z[:, 0] > 0, 1.0, -1.0)
    assert tune_score("accuracy", y, pred, Z, [-1.0, 1.0]) == sk.accuracy_score(y, pred)
    auc = tune_score("auc", y, pred, Z, [-1.0, 1.0])
    assert math.isclose(auc, sk.roc_auc_score(y == 1.0, Z[:, 0]), rel_tol=1e-12)


def test_regression_metrics_equal_scikit_learn():
    rng = np.random.default_rng(1)
    y, pred = rng.normal(size=200), rng.normal(size=200)
    Z = pred.reshape(-1, 1)
    rmse = math.sqrt(sk.mean_squared_error(y, pred))
    assert math.isclose(tune_score("rmse", y, pred, Z, []), rmse, rel_tol=1e-12)
    mae = sk.mean_absolute_error(y, pred)
    assert math.isclose(tune_score("mae", y, pred, Z, []), mae, rel_tol=1e-12)
