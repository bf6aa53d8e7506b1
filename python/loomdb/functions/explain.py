"""``loom_weights`` and ``loom_training_info``: a model's coefficients and its training history
as rows (BigQuery ML's ML.WEIGHTS and ML.TRAINING_INFO).  No paper section.

Weights come in two units.  ``weight_standardized`` is the coefficient as trained, on the
standardised features ``(x − shift)·scale``; ``weight`` folds the standardisation in, so
``Σ weight·x + intercept weight`` over a raw row is the margin loom_predict computes.  The
intercept is a row of its own, feature ``'(intercept)'``, with no rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.functions import model_cache
from loomdb.learn.model import LinearModel
from loomdb.learn.sparse_model import SparseLinearModel
from loomdb.store import catalog, formats
from loomdb.store.names import check_name

INTERCEPT = "(intercept)"

WeightRow = tuple[str, float | None, float, float, int | None, float | None, str | None]


def _classes(model: LinearModel) -> list[float | None]:
    """The class each column of W scores: binary → the positive class; regression → NULL."""
    if not model.classifier:
        return [None]
    return [model.classes[1]] if len(model.classes) == 2 else list(model.classes)


def _ranks(w: np.ndarray) -> np.ndarray:
    """1 = largest |w|; ties share the lowest rank, as SQL's RANK() does."""
    key = -np.abs(w)
    return np.searchsorted(np.sort(key), key, side="left") + 1


def _features(model: LinearModel) -> list[str]:
    """The name of each coefficient row: a feature column, or for a model of a sparse source
    the 0-based column (as text) of each stored coefficient (its ``feature_names`` are the
    source's indices and values columns, not its features)."""
    if isinstance(model, SparseLinearModel):
        return [str(int(i)) for i in model.index]
    return list(model.features)


def weights(db: Any, name: str) -> list[WeightRow]:
    """(feature, class, weight, weight_standardized, rank, odds_ratio, class_name) rows, class
    by class; class_name is the class as ``loom_predict_class`` names it (NULL: regression)."""
    model = model_cache.load(db, name)
    W, b = model.folded()
    logistic = model.kind == "logistic"
    rows: list[WeightRow] = []
    with np.errstate(over="ignore"):  # an odds ratio beyond a double is +inf
        odds = np.exp(W) if logistic else None
        odds_b = np.exp(b) if logistic else None
    for k, cls in enumerate(_classes(model)):
        ranks = _ranks(model.W[:, k])
        named = None if cls is None else model.names_of(np.asarray([cls]))[0]
        for j, feature in enumerate(_features(model)):
            ratio = float(odds[j, k]) if odds is not None else None
            w, ws = float(W[j, k]), float(model.W[j, k])
            rows.append((feature, cls, w, ws, int(ranks[j]), ratio, named))
        ratio = float(odds_b[k]) if odds_b is not None else None
        rows.append((INTERCEPT, cls, float(b[k]), float(model.b[k]), None, ratio, named))
    return rows


def _reads_at_precision(storage_format: str) -> bool:
    try:
        return bool(formats.get(storage_format).any_precision)
    except Exception:  # noqa: BLE001 - a format not installed here: say nothing of precision
        return False


def training_info(db: Any, name: str) -> list[tuple[Any, ...]]:
    """(epoch, loss, validation_loss, precision, rows, bytes, seconds, lr) per epoch of the
    model's last train, from its stored history (restart markers left out: loom_model_info)."""
    record = catalog.get_model(db, check_name(name, "model"))
    at_precision = _reads_at_precision(record.storage_format)
    out = []
    for h in record.history:
        if "epoch" not in h:  # the guard's restart markers come first
            continue
        out.append(
            (
                int(h["epoch"]),
                h.get("loss"),
                h.get("val_loss"),
                h.get("precision") if at_precision else None,
                h.get("rows"),
                h.get("bytes_read"),
                h.get("seconds"),
                h.get("lr"),
            )
        )
    return out
