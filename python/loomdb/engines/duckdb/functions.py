"""Bind the UDF catalogue to a DuckDB connection.

Scalar UDFs run once per call with a :class:`DuckDatabase` on a fresh cursor of the same
database; vectorised ones (``loom_predict``…) are arrow UDFs that receive whole vectors, so
prediction in SELECT never calls Python per row.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import weakref
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loomdb.engines.calls import feature_rows, vectorized
from loomdb.engines.duckdb.database import TYPES, DuckDatabase
from loomdb.errors import LoomError
from loomdb.udfs import Udf, load


def _features(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A LIST<DOUBLE> vector → (X, ok) without a Python loop when it has no NULLs."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if n and column.null_count == 0 and column.values.null_count == 0:
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        if (lengths == lengths[0]).all():
            flat = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float64)
            return flat.reshape(n, int(lengths[0])), np.ones(n, dtype=bool)
    return feature_rows(column.to_pylist())


_last_error = threading.local()


def raised_in_udf() -> LoomError | None:
    """The LoomError the last failing loomdb UDF on this thread raised (then forgotten)."""
    error = getattr(_last_error, "value", None)
    _last_error.value = None
    return error


def _remember(fn):
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except LoomError as e:
            _last_error.value = e
            raise

    return wrapper


def _connection(ref: Any) -> Any:
    con = ref()
    if con is None:
        raise LoomError("the DuckDB connection these loomdb functions belong to is closed")
    return con


def _vector_fn(udf: Udf, ref: Any):
    def fn(models: pa.Array, features: pa.Array) -> pa.Array:
        db = DuckDatabase(_connection(ref).cursor(), cache_key=ref)
        X, ok = _features(features)
        names: str | list[Any]
        distinct = pc.unique(models)
        if len(distinct) == 1 and distinct[0].is_valid:
            names = distinct[0].as_py()  # the usual case: one constant model name
        else:
            names = models.to_pylist()
            ok &= np.array([n is not None for n in names], dtype=bool)
        out = vectorized(udf, db, names, X, ok)
        return pa.array(out, mask=~ok | np.isnan(out))

    return _remember(fn)


def _scalar_fn(udf: Udf, ref: Any):
    defaults = [a.default.strip("'") if a.default else None for a in udf.args]

    def fn(*args: Any) -> Any:
        args = tuple(d if v is None and d is not None else v for v, d in zip(args, defaults))
        cur = _connection(ref).cursor()
        try:
            return udf.callable()(DuckDatabase(cur, cache_key=ref), *args)
        finally:
            cur.close()

    wrapped = _remember(fn)
    wrapped.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in udf.args]
    )
    return wrapped


def _type(name: str) -> Any:
    return duckdb.sqltype(TYPES[name])


def register_functions(con: Any) -> None:
    # The functions hold the connection weakly: a strong reference would be a cycle
    # (connection → function → connection) that outlives close() and leaks at exit.
    ref = weakref.ref(con)
    for udf in load():
        fn = _vector_fn(udf, ref) if udf.vectorized else _scalar_fn(udf, ref)
        with contextlib.suppress(Exception):  # not registered yet
            con.remove_function(udf.name)
        con.create_function(
            udf.name,
            fn,
            [_type(a.type) for a in udf.args],
            _type(udf.returns),
            type="arrow" if udf.vectorized else "native",
            # vectorised UDFs mask NULL rows themselves (a NULL element NULLs the row too)
            null_handling="default" if udf.strict and not udf.vectorized else "special",
            exception_handling="default",
            side_effects=udf.volatility == "volatile",
        )
