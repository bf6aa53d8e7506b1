"""Calling a catalogued UDF from an engine: argument shaping shared by both engines.
No paper section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.udfs import Udf


def feature_rows(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Feature arrays → ``(X (n, m) float64, ok (n,) bool)``; rows with NULLs are not ok."""
    n = len(values)
    ok = np.array([v is not None and all(x is not None for x in v) for v in values], dtype=bool)
    lengths = {len(v) for v, good in zip(values, ok) if good}
    if len(lengths) > 1:
        from loomdb.errors import LoomOptionError

        raise LoomOptionError(
            f"feature arrays of different lengths in one call: {sorted(lengths)}",
            hint="every row must pass the model's features in the same order",
        )
    m = lengths.pop() if lengths else 0
    X = np.zeros((n, m))
    if ok.any():
        X[ok] = np.asarray([v for v, good in zip(values, ok) if good], dtype=np.float64)
    return X, ok


def vectorized(
    udf: Udf,
    db: Any,
    models: str | Sequence[Any],
    X: np.ndarray,
    ok: np.ndarray,
    statement: Any = None,
) -> np.ndarray:
    """Run a vectorised UDF on the rows that have no NULLs; NULL out the others.

    ``models`` is one name for all rows (the usual constant argument) or one per row;
    ``statement`` identifies the calling statement (its model version is pinned).
    """
    out = np.full(len(ok), np.nan)
    if ok.all():
        out[:] = udf.callable()(db, models, X, statement)
    elif ok.any():
        names = models if isinstance(models, str) else [m for m, g in zip(models, ok) if g]
        out[ok] = udf.callable()(db, names, X[ok], statement)
    return out
