"""Evaluation metrics (BigQuery ML's ML.EVALUATE, ML.CONFUSION_MATRIX and ML.ROC_CURVE), in
numpy.  No paper section.  Each follows scikit-learn's definition (``sklearn.metrics``), which
the tests compare against: zero_division=0, the ROC curve of ``roc_curve(…,
drop_intermediate=False)``.  :data:`TUNE_METRICS`: what ``loom_tune`` may score a trial by."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


def regression(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """mse, mae and r2; r2's sums of squares are taken over values scaled by a power of two
    (exact), so a label of 1e-300s, whose squares underflow to 0, or of 1e300s, whose squares
    overflow, still gets its ratio (it was 0 for a model that fit 1e-300s to 1e-4)."""
    err = pred - y
    centered = y - y.mean()
    with np.errstate(invalid="ignore"):
        peak = float(np.max(np.abs(np.concatenate([centered, err])), initial=0.0))
    scale = np.ldexp(1.0, -max(int(np.frexp(peak)[1]), -1000)) if math.isfinite(peak) else 1.0
    ss_tot = float(((centered * scale) ** 2).sum())
    return {
        "mse": float((err**2).mean()),
        "mae": float(np.abs(err).mean()),
        "r2": 1.0 - float(((err * scale) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0,
    }


def roc_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve by the rank statistic (ties get average ranks)."""
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(len(s))
    boundaries = np.flatnonzero(np.diff(s)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(s)]])
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def roc_curve(positive: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, ...]:
    """(thresholds, tpr, fpr), one point per distinct score, highest first, after a first point
    at threshold +inf (nothing predicted positive): scikit-learn's ``roc_curve`` with
    ``drop_intermediate=False``.  A row counts as positive at a threshold its score reaches."""
    order = np.argsort(score, kind="mergesort")[::-1]
    s, hit = score[order], positive[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last row of each distinct score
    tps = np.cumsum(hit, dtype=np.int64)[last]
    fps = last + 1 - tps
    thresholds = np.r_[np.inf, s[last]]
    return thresholds, np.r_[0, tps] / tps[-1], np.r_[0, fps] / fps[-1]


def confusion(y: np.ndarray, pred: np.ndarray, classes: list[float]) -> dict[str, list]:
    """Counts of (true, predicted) labels: rows are true classes, columns predicted ones, over
    the model's classes and any other label the data holds (scikit-learn's confusion_matrix
    with labels = their union, sorted)."""
    labels = np.union1d(np.asarray(classes, dtype=np.float64), y)
    L = len(labels)
    cell = np.searchsorted(labels, y) * L + np.searchsorted(labels, pred)
    matrix = np.bincount(cell, minlength=L * L).reshape(L, L)
    return {"labels": labels.tolist(), "matrix": matrix.tolist()}


def _one_class(y: np.ndarray, pred: np.ndarray, c: float) -> dict[str, float]:
    tp = float(((pred == c) & (y == c)).sum())
    fp = float(((pred == c) & (y != c)).sum())
    fn = float(((pred != c) & (y == c)).sum())
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"class": c, "precision": prec, "recall": rec, "f1": f1, "support": int(tp + fn)}


def classification(
    y: np.ndarray,
    pred: np.ndarray,
    classes: list[float],
    score: np.ndarray | None = None,
    proba: np.ndarray | None = None,
) -> dict[str, Any]:
    """Accuracy and macro precision/recall/f1 (binary: of the positive class), log loss, AUC,
    the confusion matrix and, for > 2 classes, each class's precision/recall/f1/support.

    A binary model's AUC and log loss are over the rows labelled with one of its two classes:
    a row of another label is neither positive nor negative (``other_label_rows`` counts such
    rows; accuracy and the confusion matrix count them as mislabelled)."""
    out: dict[str, Any] = {"accuracy": float((pred == y).mean())}
    targets = classes[1:] if len(classes) == 2 else classes
    each = [_one_class(y, pred, c) for c in targets]
    for metric in ("precision", "recall", "f1"):
        out[metric] = float(np.mean([e[metric] for e in each]))
    if len(classes) == 2:
        out.update(_binary_scores(y, classes, score, proba))
    out["confusion_matrix"] = confusion(y, pred, classes)
    if len(classes) > 2:
        out["per_class"] = each
    return out


def _binary_scores(
    y: np.ndarray, classes: list[float], score: np.ndarray | None, proba: np.ndarray | None
) -> dict[str, Any]:
    """AUC and log loss over the rows of a binary model's two classes, and how many rows hold
    another label (only where some do)."""
    out: dict[str, Any] = {}
    known = np.isin(y, classes)
    pos = y[known] == classes[1]
    if score is not None:
        out["roc_auc"] = roc_auc(pos, score[known])
    if proba is not None:
        q = np.clip(proba[known], 1e-15, 1 - 1e-15)
        total = -(np.log(q[pos]).sum() + np.log(1 - q[~pos]).sum())
        out["log_loss"] = float(total / known.sum()) if known.any() else float("nan")
    if not known.all():
        out["other_label_rows"] = int((~known).sum())
    return out


@dataclass(frozen=True)
class TuneMetric:
    """What ``loom_tune`` may score a trial by, on its validation rows."""

    name: str
    higher: bool  # a higher value is better
    applies: str  # the model kinds it scores: "any", "classifier" or "regression"
    doc: str

    @property
    def label(self) -> str:
        """How trials, summaries and the kept model name it."""
        return f"validation {self.name}"


TUNE_METRICS = {
    m.name: m
    for m in (
        TuneMetric("loss", False, "any", "the loss without the L1/L2 penalty, lower is better"),
        TuneMetric("accuracy", True, "classifier", "the share of rows labelled right"),
        TuneMetric("auc", True, "classifier", "the ROC AUC of the margin (two classes)"),
        TuneMetric("rmse", False, "regression", "the root mean squared error"),
        TuneMetric("mae", False, "regression", "the mean absolute error"),
    )
}


def tune_score(metric: str, y: np.ndarray, pred: np.ndarray, Z: np.ndarray, classes: list) -> float:
    """A trial's ``metric`` (not "loss": the trainer keeps that) over validation rows: their
    labels ``y``, predicted labels ``pred`` and margins ``Z``."""
    if metric == "accuracy":
        return float((pred == y).mean())
    if metric == "auc":
        return roc_auc(y == classes[1], Z[:, 0])
    errors = regression(y, pred)
    return math.sqrt(errors["mse"]) if metric == "rmse" else errors["mae"]
