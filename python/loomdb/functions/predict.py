"""``loom_predict``, ``loom_predict_proba`` (vectorised) and their compiled SQL forms.

No paper section.  One call scores many rows (a DuckDB vector, or one PostgreSQL row) with one
model name for all rows or one per row; rows with a NULL, NaN or infinite feature give NULL.
The rows are dense (``loom_predict``: a features array) or sparse (``loom_predict_sparse``:
``CsrRows`` of indices and values); every model scores both.  A sparse source's model has no
compiled SQL form: its columns are array elements, not columns.

``loom_predict_row`` scores rows that carry their column names (``NamedRows``: a DuckDB STRUCT,
a PostgreSQL composite): the model's features are bound by name, so a wrong column order
cannot go unnoticed as it can in the array form; it serves dense models only.  A model with an
encoding (``store/encoding.py``) binds its source columns and encodes them as the layout did
(text one-hot, NULLs imputed); the array form takes the encoded features, in the order
``loom_model_info`` lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.functions import model_cache
from loomdb.functions import predict_sql as compile_sql
from loomdb.learn.model import LinearModel
from loomdb.learn.sparse_model import SparseLinearModel
from loomdb.named_rows import NamedRows
from loomdb.store import encoding as encodings


def _by_model(db: Any, names: str | Sequence[str], X: Any, how: str, statement: Any) -> np.ndarray:
    if isinstance(names, str):  # the usual case: one model for every row
        return _scores(db, names, X, how, statement)
    out = np.empty(len(X), dtype=object if how == "class" else np.float64)
    for name in set(names):
        rows = np.asarray([n == name for n in names])
        out[rows] = _scores(db, name, X[rows], how, statement)
    return out


def _scores(db: Any, name: str, X: Any, how: str, statement: Any) -> Any:
    """Model ``name``'s ``how`` (predict | class | proba) of rows ``X``."""
    model = model_cache.load(db, name, statement)
    if isinstance(X, NamedRows):
        X = named_matrix(by_name(model, name), X)
    if how == "predict":
        model.require_numbers(name)
    Z = model.margins(X)
    if how == "proba":
        return model.probabilities(Z)
    labels = model.labels(Z)
    return labels if how == "predict" else np.asarray(model.names_of(labels), dtype=object)


def predict(db: Any, names: str | Sequence[str], X: Any, statement: Any = None):
    return _by_model(db, names, X, "predict", statement)


def predict_class(db: Any, names: str | Sequence[str], X: Any, statement: Any = None):
    """The predicted class as text: a text label's class, or the number ``loom_predict`` gives."""
    return _by_model(db, names, X, "class", statement)


def predict_proba(db: Any, names: str | Sequence[str], X: Any, statement: Any = None):
    return _by_model(db, names, X, "proba", statement)


def named_matrix(model: LinearModel, rows: NamedRows) -> np.ndarray:
    """The model's features of named rows: its columns bound by name, encoded if it encodes."""
    encoding = encodings.load(model.encoding)
    if encoding is None:
        return rows.matrix(model.features)
    if not len(rows):
        return np.zeros((0, len(model.features)))
    return np.hstack([e.apply(rows.cells(e.column)) for e in encoding])


def by_name(model: LinearModel, name: str) -> LinearModel:
    """Model ``name``, refused when its features are not columns a row could name."""
    if isinstance(model, SparseLinearModel):
        raise LoomOptionError(
            f"model '{name}' was trained on a sparse source: its features are array elements, "
            "not columns of a row",
            hint=f"predict with loom_predict_sparse('{name}', indices, values)",
        )
    if model.inputs:
        raise LoomOptionError(
            f"model '{name}' learnt from images: its features are not columns of a row",
            hint="predict with loom_predict_image(model, image [, scans])",
        )
    return model


def compilable(db: Any, name: str) -> LinearModel:
    """Model ``name``, refused when it has no SQL expression (a sparse source's or images')."""
    return require_compilable(model_cache.load(db, name), name)


def require_compilable(model: LinearModel, name: str) -> LinearModel:
    if isinstance(model, SparseLinearModel):
        raise LoomOptionError(
            f"model '{name}' was trained on a sparse source: its features are array elements, "
            "not columns, so it has no SQL expression (nor a deployed function)",
            hint=f"predict with loom_predict_sparse('{name}', indices, values)",
        )
    if model.inputs:
        raise LoomOptionError(
            f"model '{name}' learnt from images: its features are not columns of a table, so "
            "it has no SQL expression (nor a deployed function)",
            hint="predict with loom_predict_image(model, image [, scans])",
        )
    return model


def predict_sql(db: Any, name: str) -> str:
    model = compilable(db, name)
    return compile_sql.predict_expression(model, db.dialect, compile_sql.native_finite(db))


def predict_proba_sql(db: Any, name: str) -> str:
    return compile_sql.proba_expression(compilable(db, name), db.dialect)


def native_model(db: Any, name: str) -> dict[str, Any]:
    """Model ``name`` as the C ``loom_predict`` keeps it (``engines/postgres/index_am/
    loomdb_predict.c``): folded weights margin by margin, intercepts, classes as numbers, so the
    C code computes exactly ``labels``/``probabilities`` of :meth:`LinearModel.margins`.
    ``served`` is false for what it leaves to this module: a sparse source's model (its rows are
    the source's width), a classifier whose classes do not match its margins, one whose classes
    are text (``loom_predict`` refuses it with a hint)."""
    model = model_cache.load(db, name)
    W, b = model.folded()
    k = W.shape[1]
    classes = [float(c) for c in np.asarray(model.classes, dtype=np.float64)]
    served = (
        not isinstance(model, SparseLinearModel)
        and not model.class_names
        and (not model.classifier or len(classes) == max(k, 2))
    )
    return {
        "served": served,
        "classifier": model.classifier,
        "logistic": model.kind == "logistic",
        "width": W.shape[0],
        "margins": k,
        "coef": np.ascontiguousarray(W.T).ravel().tolist(),
        "intercept": b.tolist(),
        "classes": classes if model.classifier else [],
    }
