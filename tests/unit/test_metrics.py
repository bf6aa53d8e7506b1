"""The evaluation metrics against scikit-learn's, ties and unseen labels included."""

from __future__ import annotations

import numpy as np
from sklearn import metrics as sk

from loomdb.learn import metrics


def test_roc_curve_equals_scikit_learns_with_ties():
    rng = np.random.default_rng(3)
    score = rng.integers(0, 12, size=500) / 4.0  # many ties
    positive = rng.random(500) < 0.3 + 0.05 * score
    thresholds, tpr, fpr = metrics.roc_curve(positive, score)
    fpr_sk, tpr_sk, thresholds_sk = sk.roc_curve(positive, score, drop_intermediate=False)
    np.testing.assert_array_equal(thresholds, thresholds_sk)
    np.testing.assert_array_equal(tpr, tpr_sk)
    np.testing.assert_array_equal(fpr, fpr_sk)
    auc = metrics.roc_auc(positive, score)  # the rank statistic: the curve's area
    assert np.isclose(np.trapezoid(tpr, fpr), auc, rtol=1e-13, atol=0)
    assert np.isclose(sk.roc_auc_score(positive, score), auc, rtol=1e-13, atol=0)


def test_confusion_matrix_and_per_class_metrics_equal_scikit_learns():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, size=300).astype(float)  # class 3 is not the model's
    pred = np.where(rng.random(300) < 0.6, np.minimum(y, 2.0), rng.integers(0, 3, size=300))
    out = metrics.classification(y, pred.astype(float), [0.0, 1.0, 2.0])
    labels = [0.0, 1.0, 2.0, 3.0]
    assert out["confusion_matrix"] == {
        "labels": labels,
        "matrix": sk.confusion_matrix(y, pred, labels=labels).tolist(),
    }
    p, r, f, s = sk.precision_recall_fscore_support(
        y, pred, labels=[0.0, 1.0, 2.0], zero_division=0
    )
    got = out["per_class"]
    np.testing.assert_allclose([c["precision"] for c in got], p, rtol=1e-15)
    np.testing.assert_allclose([c["recall"] for c in got], r, rtol=1e-15)
    np.testing.assert_allclose([c["f1"] for c in got], f, rtol=1e-15)
    assert [c["support"] for c in got] == s.tolist()
    assert "per_class" not in metrics.classification(y, pred, [0.0, 1.0])
