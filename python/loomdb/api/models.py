"""Prediction, evaluation and the model catalog functions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.api.train import model_from_row
from loomdb.errors import LoomOptionError
from loomdb.learn import compile_sql, metrics
from loomdb.learn.model import LinearModel
from loomdb.store import catalog
from loomdb.store.db import Database
from loomdb.store.names import check_name, quote_ident, relation

EVAL_CHUNK = 65536

# (database key, model name) → (validity key, model).  Where other sessions may change the
# catalog (PostgreSQL) the key is the model's uid, new at every train, checked with one indexed
# lookup per call; where only this process can (embedded DuckDB holds the database's write
# lock) it is the process's catalog write counter, which costs nothing to check.
_cache: dict[tuple[int, str], tuple[Any, LinearModel]] = {}


def load(db: Database, name: str) -> LinearModel:
    key = (id(getattr(db, "cache_key", db)), name)
    if getattr(db, "catalog_private", False):
        hit = _cache.get(key)
        if hit is not None and hit[0] == ("gen", catalog.generation()):
            return hit[1]
        check_name(name, "model")
        model = model_from_row(catalog.get_model(db, name))
        _cache[key] = (("gen", catalog.generation()), model)
        return model
    check_name(name, "model")
    rows = db.query(f"SELECT uid FROM {catalog.SCHEMA}.models WHERE name = $1", [name])
    if not rows:
        _cache.pop(key, None)
        catalog.get_model(db, name)  # raises the not-found error
    uid = rows[0][0]
    hit = _cache.get(key)
    if hit is not None and hit[0] == uid:
        return hit[1]
    model = model_from_row(catalog.get_model(db, name))
    _cache[key] = (uid, model)
    return model


def _by_model(db: Database, names: str | Sequence[str], X: np.ndarray, how: str) -> np.ndarray:
    """``names`` is one model name for every row, or one name per row."""
    groups = (
        [(names, slice(None))]
        if isinstance(names, str)
        else [(name, np.asarray([n == name for n in names])) for name in set(names)]
    )
    out = np.empty(len(X))
    for name, rows in groups:
        model = load(db, name)
        out[rows] = model.predict(X[rows]) if how == "predict" else model.predict_proba(X[rows])
    return out


def predict(db: Database, names: str | Sequence[str], X: np.ndarray) -> np.ndarray:
    """Vectorised ``loom_predict``: one model name and one feature row per output value."""
    return _by_model(db, names, X, "predict")


def predict_proba(db: Database, names: str | Sequence[str], X: np.ndarray) -> np.ndarray:
    return _by_model(db, names, X, "proba")


def predict_sql(db: Database, name: str) -> str:
    return compile_sql.predict_expression(load(db, name))


def predict_proba_sql(db: Database, name: str) -> str:
    return compile_sql.proba_expression(load(db, name))


def evaluate(db: Database, name: str, source: str) -> str:
    model = load(db, name)
    row = catalog.get_model(db, name)
    rel = relation(source, db.dialect)
    label = row["label"]
    cols = [quote_ident(c) for c in [*model.features, label]]
    where = " AND ".join(f"{c} IS NOT NULL" for c in cols)
    chunks = list(db.read_matrix(rel, cols, where, None, EVAL_CHUNK))
    data = np.concatenate(chunks) if chunks else np.empty((0, len(cols)))
    X, y = data[:, :-1], data[:, -1]
    total = db.query(f"SELECT count(*) FROM {rel}")[0][0]
    result: dict[str, Any] = {"model": name, "rows": len(y), "skipped": int(total) - len(y)}
    if len(y) == 0:
        return json.dumps(result | {"error": "no rows without NULLs to evaluate on"})
    pred = model.predict(X)
    if model.classifier:
        score = model.margins(X)[:, 0] if model.W.shape[1] == 1 else None
        proba = model.predict_proba(X) if model.kind == "logistic" and score is not None else None
        result.update(metrics.classification(y, pred, model.classes, score, proba))
    else:
        result.update(metrics.regression(y, pred))
    return json.dumps(result)


def evaluate_index(db: Database, name: str, index: str, backend: str | None) -> str:
    """Metrics of a model over an index's stored batches, computed by a backend on the stored
    form (A·w on TOC blobs, on woven planes at 32 bits, on dense rows): no decompression."""
    from loomdb.accel import registry
    from loomdb.api.index import read_batches
    from loomdb.store import formats

    model = load(db, name)
    info = catalog.get_index(db, check_name(index, "index"))
    if info["columns"] != model.features:
        raise LoomOptionError(
            f"index '{index}' holds columns {info['columns'][:5]}…, not the model's features",
            hint="evaluate on an index built over the model's features",
        )
    engine = registry.get(backend or "cpu")
    prescaled = getattr(formats.get(info["format"]), "prescaled", None)
    # a prescaled index holds normalised values: the weights of that space apply directly
    W, b = (model.W, model.b) if prescaled else model.folded()
    scores, labels = [], []
    for batch in read_batches(db, info, train_options={"precision": 32}):
        scores.append(engine.margins(batch, W) + b)
        labels.append(batch.y)
    Z, y = np.concatenate(scores), np.concatenate(labels)
    result: dict[str, Any] = {"model": name, "index": index, "rows": len(y), "backend": engine.name}
    if not model.classifier:
        return json.dumps(result | metrics.regression(y, Z[:, 0]))
    classes = np.asarray(model.classes, dtype=np.float64)
    if Z.shape[1] == 1:
        pred = np.where(Z[:, 0] > 0, classes[1], classes[0])
        proba = 1 / (1 + np.exp(-Z[:, 0])) if model.kind == "logistic" else None
        result.update(metrics.classification(y, pred, model.classes, Z[:, 0], proba))
    else:
        result.update(metrics.classification(y, classes[np.argmax(Z, axis=1)], model.classes))
    return json.dumps(result)


def model_info(db: Database, name: str) -> str:
    check_name(name, "model")
    row = catalog.get_model(db, name)
    row["created_at"] = str(row["created_at"])
    return json.dumps(row, default=str)


def drop_model(db: Database, name: str) -> str:
    check_name(name, "model")
    with db.atomic():
        catalog.drop_model(db, name)
    return json.dumps({"dropped": name})


def version(db: Database) -> str:
    import loomdb

    return loomdb.__version__


def backends(db: Database) -> str:
    from loomdb.accel import registry

    return json.dumps(registry.describe())
