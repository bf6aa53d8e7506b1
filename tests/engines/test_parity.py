"""Accuracy parity with scikit-learn on real data, trained through SQL on both engines.

Comparable settings: features standardised (z-score), L2 = 1e-4 (SGDClassifier's alpha),
a 70/30 split with the same seed; loomdb keeps its defaults otherwise.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LinearRegression, SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from loomdb.datasets import load_a9a

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _split(X, y):
    return train_test_split(X, y, test_size=0.3, random_state=0)


def _sklearn_accuracy(kind, Xtr, ytr, Xte, yte):
    scaler = StandardScaler().fit(Xtr)
    loss = "log_loss" if kind == "logistic" else "hinge"
    clf = SGDClassifier(loss=loss, alpha=1e-4, random_state=0).fit(scaler.transform(Xtr), ytr)
    return clf.score(scaler.transform(Xte), yte)


def _loomdb_metrics(engine, name, kind, Xtr, ytr, Xte, yte, options=None):
    engine.load(f"{name}_train", Xtr, ytr)
    engine.load(f"{name}_test", Xte, yte)
    opts = json.dumps({"model": kind, **(options or {})})
    engine.scalar(f"SELECT loom_train('{name}', '{name}_train', 'y', '{opts}')")
    return json.loads(engine.scalar(f"SELECT loom_evaluate('{name}', '{name}_test')"))


def _real(name, datasets=None):
    if name == "breast_cancer":
        d = load_breast_cancer()
        return d.data, d.target.astype(float)
    if name == "digits":
        d = load_digits()
        return d.data, d.target.astype(float)
    return load_a9a(datasets)


@pytest.mark.parametrize("data", ["breast_cancer", "digits", "a9a"])
@pytest.mark.parametrize("kind", ["logistic", "svm"])
def test_classifier_accuracy_within_one_point_of_sklearn(engine, request, data, kind):
    datasets = request.getfixturevalue("datasets") if data == "a9a" else None
    X, y = _real(data, datasets)
    Xtr, Xte, ytr, yte = _split(X, y)
    reference = _sklearn_accuracy(kind, Xtr, ytr, Xte, yte)
    ours = _loomdb_metrics(engine, "p", kind, Xtr, ytr, Xte, yte)["accuracy"]
    assert ours >= reference - 0.01, f"loomdb {ours:.4f} vs scikit-learn {reference:.4f}"


def test_linear_r2_within_001_of_least_squares(engine):
    d = load_diabetes()
    Xtr, Xte, ytr, yte = _split(d.data, d.target)
    reference = LinearRegression().fit(Xtr, ytr).score(Xte, yte)
    m = _loomdb_metrics(
        engine,
        "lin",
        "linear",
        Xtr,
        ytr,
        Xte,
        yte,
        {"epochs": 200, "lr": 0.02, "lr_schedule": "constant", "l2": 0.0, "batch_size": 16},
    )
    assert abs(m["r2"] - reference) <= 0.01, f"r2 {m['r2']:.4f} vs {reference:.4f}"


def _norm(engine, name):
    coef = json.loads(engine.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{name}'"))
    return float(np.linalg.norm(coef))


def test_larger_l2_gives_smaller_weights(engine):
    d = load_breast_cancer()
    engine.load("bc", d.data, d.target.astype(float))
    norms = []
    for i, l2 in enumerate([0.0, 0.01, 0.1]):
        engine.scalar(f"SELECT loom_train('l{i}', 'bc', 'y', '{{\"l2\": {l2}, \"epochs\": 10}}')")
        norms.append(_norm(engine, f"l{i}"))
    assert norms[0] > norms[1] > norms[2]


def test_balanced_class_weights_raise_minority_recall(engine):
    d = load_breast_cancer()
    X, y = d.data, d.target.astype(float)
    keep = np.flatnonzero(y == 1).tolist() + np.flatnonzero(y == 0)[:40].tolist()
    X, y = X[keep], y[keep]
    y = 1.0 - y  # the 40 malignant cases become the positive, minority class
    engine.load("imb", X, y)
    recalls = []
    for i, cw in enumerate(['"none"', '"balanced"']):
        engine.scalar(
            f"SELECT loom_train('cw{i}', 'imb', 'y', "
            f'\'{{"class_weight": {cw}, "epochs": 3, "lr": 0.01}}\')'
        )
        recalls.append(json.loads(engine.scalar(f"SELECT loom_evaluate('cw{i}', 'imb')"))["recall"])
    assert recalls[1] > recalls[0]
