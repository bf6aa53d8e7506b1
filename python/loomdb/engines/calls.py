"""Calling a catalogued UDF from an engine: argument shaping shared by both engines.
No paper section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.csr import CsrRows
from loomdb.named_rows import NamedRows
from loomdb.udfs import ROW, Udf

MAX_WIDTH = 2**31  # what a sparse row may name; the model checks its own width


def _one_dimensional(rows: Sequence[Any], what: str = "features") -> None:
    """Refuse an array of arrays: PostgreSQL hands a multidimensional ``float8[]`` (its type
    says nothing of its dimensions) to PL/Python as nested lists, which numpy then read as a
    matrix per row (a ``ValueError`` from deep inside, or a silently wrong answer)."""
    for row in rows:
        if row is not None and len(row) and isinstance(row[0], (list, tuple)):
            depth, inner = 1, row
            while len(inner) and isinstance(inner[0], (list, tuple)):
                depth, inner = depth + 1, inner[0]
            raise not_one_dimensional(depth, what)


def not_one_dimensional(depth: int, what: str = "features") -> Exception:
    """The error of an array of ``depth`` dimensions where one row's flat array belongs."""
    from loomdb.errors import LoomOptionError

    return LoomOptionError(
        f"{what} are a one-dimensional array of numbers; got a {depth}-dimensional array",
        hint="pass one row's features as a flat array, e.g. ARRAY[1.0, 2.0, 3.0]; "
        "for several rows call the function once per row",
    )


def feature_rows(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Feature arrays → ``(X (n, m) float64, ok (n,) bool)``; rows with NULLs are not ok."""
    n = len(values)
    _one_dimensional(values)
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


def sparse_rows(indices: Sequence[Any], values: Sequence[Any]) -> tuple[CsrRows, np.ndarray]:
    """Per-row index and value arrays → ``(CsrRows, ok)``; a row with a NULL array or a NULL
    element is not ok (it predicts NULL); arrays of different lengths are an error."""
    _one_dimensional(indices, "indices")
    _one_dimensional(values, "values")
    ok = np.array(
        [
            i is not None and v is not None and None not in i and None not in v
            for i, v in zip(indices, values)
        ],
        dtype=bool,
    )
    kept_i = [list(i) if good else [] for i, good in zip(indices, ok)]
    kept_v = [list(v) if good else [] for v, good in zip(values, ok)]
    return CsrRows.from_lists(kept_i, kept_v, MAX_WIDTH), ok


def rows_of(udf: Udf, columns: Sequence[Sequence[Any]]) -> tuple[Any, np.ndarray]:
    """The rows a vectorised UDF scores from its data arguments (all but the model): one
    ``double[]`` of features (dense rows), ``bigint[]`` indices and ``double[]`` values, or a
    row as JSON text (``row``: PostgreSQL passes ``to_jsonb(row)``)."""
    if [a.type for a in udf.args[1:]] == [ROW]:
        (rows,) = columns
        ok = np.array([r is not None for r in rows], dtype=bool)
        return NamedRows.from_json([r if r is not None else "{}" for r in rows]), ok
    if [a.type for a in udf.args[1:]] == ["bigint[]", "double[]"]:
        return sparse_rows(*columns)
    (features,) = columns
    return feature_rows(features)


def vectorized(
    udf: Udf,
    db: Any,
    models: str | Sequence[Any],
    X: Any,
    ok: np.ndarray,
    statement: Any = None,
) -> np.ndarray:
    """Run a vectorised UDF on the rows that have no NULLs; NULL out the others.

    ``models`` is one name for all rows (the usual constant argument) or one per row; ``X``
    the rows (an array, or ``CsrRows``); ``statement`` identifies the calling statement (its
    model version is pinned).
    """
    if ok.all():
        return udf.callable()(db, models, X, statement)
    out = np.full(len(ok), None if udf.returns == "text" else np.nan)
    if ok.any():
        names = models if isinstance(models, str) else [m for m, g in zip(models, ok) if g]
        out[ok] = udf.callable()(db, names, X[ok], statement)
    return out
