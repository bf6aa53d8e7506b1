"""``loom_evaluate`` on a source and ``loom_evaluate_index`` on an index's stored form.

No paper section for the metrics (BigQuery ML's ML.EVALUATE set, ``learn/metrics.py``);
``loom_evaluate_index`` computes A·w on the stored form by a backend (TOC §4: on compressed
blobs; MLWeaving: on the woven planes at 32 bits) without decompressing.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.errors import LoomNotFoundError, LoomOptionError
from loomdb.functions import model_cache
from loomdb.learn import metrics
from loomdb.learn.model import LinearModel
from loomdb.learn.scaling import Scaling
from loomdb.learn.sparse_model import SparseLinearModel
from loomdb.store import catalog, layout
from loomdb.store.names import check_name, quote_ident
from loomdb.store.source import columns_of, complete_rows, number

EVAL_CHUNK = 65536


NO_ROWS = "no rows with finite, non-NULL features and label to evaluate on"


def _json(result: dict[str, Any]) -> str:
    """JSON text with an undefined metric (NaN: roc_auc of one class…) as null, never NaN."""
    clean = {
        k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in result.items()
    }
    return json.dumps(clean)


def _metrics(model: LinearModel, Z: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    pred = model.labels(Z)
    if not model.classifier:
        return metrics.regression(y, pred)
    binary = Z.shape[1] == 1
    score = Z[:, 0] if binary else None
    proba = model.probabilities(Z) if binary and model.kind == "logistic" else None
    return metrics.classification(y, pred, model.classes, score, proba)


def evaluate(db: Any, name: str, source: str) -> str:
    model = model_cache.load(db, name)
    label = catalog.get_model(db, name).label
    rel, kinds = columns_of(db, source)
    missing = [c for c in [*model.features, label] if c not in kinds]
    if missing:
        raise LoomNotFoundError(
            f"source {source!r} has no column {missing[0]!r} of model '{name}'",
            hint=f"the model reads {', '.join(model.features[:10])} and its label {label}",
        )
    cols = [*model.features, label]
    where = complete_rows(cols)
    if isinstance(model, SparseLinearModel):
        Z, y = _sparse_margins(
            db, model, rel, number(label, kinds[label], db.type("double")), where
        )
    else:
        values = [number(c, kinds[c], db.type("double")) for c in cols]
        chunks = list(db.read_matrix(rel, values, where, None, EVAL_CHUNK))
        data = np.concatenate(chunks) if chunks else np.empty((0, len(cols)))
        Z = model.margins(data[:, :-1]) if len(data) else np.empty((0, 1))
        y = data[:, -1]
    total = db.query(f"SELECT count(*) FROM {rel}")[0][0]
    result: dict[str, Any] = {"model": name, "rows": len(y), "skipped": int(total) - len(y)}
    ok = np.isfinite(Z).all(axis=1) & np.isfinite(y)
    result["skipped"] += int((~ok).sum())
    result["rows"] = int(ok.sum())
    if not ok.any():
        return _json(result | {"error": NO_ROWS})
    return _json(result | _metrics(model, Z[ok], y[ok]))


def _sparse_margins(
    db: Any, model: SparseLinearModel, rel: str, label: str, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """Margins and labels of a sparse source's complete rows, read as CSR chunks."""
    indices, values = (quote_ident(c) for c in model.features)
    scores, labels = [np.empty((0, len(model.b)))], [np.empty(0)]
    for y, rows in db.read_sparse(rel, label, indices, values, where, None, EVAL_CHUNK, 2**31):
        scores.append(model.margins(rows))
        labels.append(y)
    return np.concatenate(scores), np.concatenate(labels)


def evaluate_index(db: Any, name: str, index: str, backend: str | None) -> str:
    model = model_cache.load(db, name)
    laid = layout.open_index(db, check_name(index, "index"), allow_stale=True)
    if laid.info.columns != model.features:
        raise LoomOptionError(
            f"index '{index}' holds columns {laid.info.columns[:5]}…, not the model's features",
            hint="evaluate on an index built over the model's features",
        )
    engine = registry.get(backend or "cpu")
    W, b = model.folded()
    if isinstance(model, SparseLinearModel):  # over the index's observed columns
        W, b = model.folded_over(np.asarray(laid.info.stats["columns"]))
    if laid.fmt.value_map == "minmax":  # stored values u = (x − min)/spread: fold that map in
        unit = Scaling.over_minmax("none", laid.info.stats)
        W, b = W * unit.scale[:, None], b - unit.shift @ (W * unit.scale[:, None])
    scores, labels = [], []
    for batch in laid.batches(0, laid.info.batches, 32):
        scores.append(engine.margins(batch, W) + b)
        labels.append(batch.y)
    Z, y = np.concatenate(scores), np.concatenate(labels)
    result = {"model": name, "index": index, "rows": len(y), "backend": engine.name}
    return _json(result | _metrics(model, Z, y))
