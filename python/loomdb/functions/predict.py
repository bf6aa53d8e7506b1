"""``loom_predict``, ``loom_predict_proba`` (vectorised) and their compiled SQL forms.

No paper section.  One call scores many rows (a DuckDB vector, or one PostgreSQL row) with one
model name for all rows or one per row; rows with a NULL, NaN or infinite feature give NULL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.functions import model_cache
from loomdb.functions import predict_sql as compile_sql
from loomdb.learn.model import LinearModel


def _by_model(
    db: Any, names: str | Sequence[str], X: np.ndarray, how: str, statement: Any
) -> np.ndarray:
    groups = (
        [(names, slice(None))]
        if isinstance(names, str)
        else [(name, np.asarray([n == name for n in names])) for name in set(names)]
    )
    out = np.empty(len(X))
    for name, rows in groups:
        model = model_cache.load(db, name, statement)
        Z = model.margins(X[rows])
        out[rows] = model.labels(Z) if how == "predict" else model.probabilities(Z)
    return out


def predict(db: Any, names: str | Sequence[str], X: np.ndarray, statement: Any = None):
    return _by_model(db, names, X, "predict", statement)


def predict_proba(db: Any, names: str | Sequence[str], X: np.ndarray, statement: Any = None):
    return _by_model(db, names, X, "proba", statement)


def _over_columns(db: Any, name: str) -> LinearModel:
    """A model whose features are columns: one trained on images has no SQL expression."""
    model = model_cache.load(db, name)
    if model.inputs:
        raise LoomOptionError(
            f"model '{name}' learnt from images: its features are not columns of a table",
            hint="predict with loom_predict_image(model, image [, scans])",
        )
    return model


def predict_sql(db: Any, name: str) -> str:
    return compile_sql.predict_expression(_over_columns(db, name))


def predict_proba_sql(db: Any, name: str) -> str:
    return compile_sql.proba_expression(_over_columns(db, name))
