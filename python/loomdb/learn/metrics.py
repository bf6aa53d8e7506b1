"""Evaluation metrics (BigQuery ML's ML.EVALUATE set), in numpy.  No paper section."""

from __future__ import annotations

import numpy as np


def regression(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    err = pred - y
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return {
        "mse": float((err**2).mean()),
        "mae": float(np.abs(err).mean()),
        "r2": 1.0 - float((err**2).sum()) / ss_tot if ss_tot > 0 else 0.0,
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


def classification(
    y: np.ndarray,
    pred: np.ndarray,
    classes: list[float],
    score: np.ndarray | None = None,
    proba: np.ndarray | None = None,
) -> dict[str, float]:
    """Accuracy and macro precision/recall/f1 (binary: of the positive class), log loss, AUC."""
    out = {"accuracy": float((pred == y).mean())}
    targets = classes[1:] if len(classes) == 2 else classes
    p, r, f = [], [], []
    for c in targets:
        tp = float(((pred == c) & (y == c)).sum())
        fp = float(((pred == c) & (y != c)).sum())
        fn = float(((pred != c) & (y == c)).sum())
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        p.append(prec)
        r.append(rec)
        f.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    out.update(precision=float(np.mean(p)), recall=float(np.mean(r)), f1=float(np.mean(f)))
    if len(classes) == 2 and score is not None:
        out["roc_auc"] = roc_auc(y == classes[1], score)
    if len(classes) == 2 and proba is not None:
        q = np.clip(proba, 1e-15, 1 - 1e-15)
        pos = y == classes[1]
        out["log_loss"] = float(-(np.log(q[pos]).sum() + np.log(1 - q[~pos]).sum()) / len(y))
    return out
