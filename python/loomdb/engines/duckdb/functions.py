"""Bind the UDF catalogue to a DuckDB connection.  No paper section.

Each function is a Python UDF under a hidden name (``loom_train__udf``) and a temporary MACRO
under its SQL name that fills in the catalogue's defaults, so ``loom_train(m, src, label)``
works as in PostgreSQL.  Vectorised functions (``loom_predict``…) are arrow UDFs receiving whole
vectors; their macro also passes ``txid_current()``, the statement's transaction, so every
vector of one statement is scored by one version of the model.

A loomdb error raised in a UDF — on whatever DuckDB worker thread ran it — is kept in a small
table under a number that travels in DuckDB's error text (``[loomdb error 17]``); the
connection's ``execute`` finds it and raises the original ``LoomError`` subclass.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import re
import threading
import weakref
from collections import OrderedDict
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loomdb.engines.calls import feature_rows, vectorized
from loomdb.engines.duckdb.database import TYPES, DuckDatabase
from loomdb.engines.duckdb.state import ConnectionState
from loomdb.errors import LoomError
from loomdb.udfs import Udf, load

HIDDEN = "{}__udf"
KEPT_ERRORS = 1024
_TAG = re.compile(r"\[loomdb error (\d+)\]")
_errors: OrderedDict[int, LoomError] = OrderedDict()
_errors_lock = threading.Lock()
_numbers = itertools.count(1)


class CarriedError(Exception):
    """What a UDF raises to DuckDB: the LoomError's text and the number it is kept under."""


def _carry(error: LoomError) -> CarriedError:
    number = next(_numbers)
    with _errors_lock:
        _errors[number] = error
        while len(_errors) > KEPT_ERRORS:
            _errors.popitem(last=False)
    return CarriedError(f"{error} [loomdb error {number}]")


def raised_in_udf(error: BaseException) -> LoomError | None:
    """The LoomError a UDF raised, found through DuckDB's error text (then forgotten)."""
    match = _TAG.search(str(error))
    if match is None:
        return None
    with _errors_lock:
        return _errors.pop(int(match.group(1)), None)


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


def _connection(ref: Any) -> Any:
    con = ref()
    if con is None:
        raise LoomError("the DuckDB connection these loomdb functions belong to is closed")
    return con


def _guarded(fn, names: list[str]):
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except LoomError as e:
            raise _carry(e) from None

    wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )
    return wrapper


def _vector_fn(udf: Udf, ref: Any, state: ConnectionState):
    def fn(models: pa.Array, features: pa.Array, statement: pa.Array) -> pa.Array:
        cur = _connection(ref).cursor()
        try:
            db = DuckDatabase(cur, state)
            X, ok = _features(features)
            names: str | list[Any]
            distinct = pc.unique(models)
            if len(distinct) == 1 and distinct[0].is_valid:
                names = distinct[0].as_py()  # the usual case: one constant model name
            else:
                names = models.to_pylist()
                ok &= np.array([n is not None for n in names], dtype=bool)
            out = vectorized(udf, db, names, X, ok, statement[0].as_py())
            return pa.array(out, mask=~ok | np.isnan(out))
        finally:
            cur.close()

    return _guarded(fn, ["models", "features", "statement"])


def _scalar_fn(udf: Udf, ref: Any, state: ConnectionState):
    def fn(*args: Any) -> Any:
        if udf.volatility == "volatile" and udf.name not in READ_ONLY:
            state.may_write(udf.name)
        cur = _connection(ref).cursor()
        try:
            return udf.callable()(DuckDatabase(cur, state), *args)
        finally:
            cur.close()

    return _guarded(fn, [a.name for a in udf.args])


READ_ONLY = {"loom_backends"}  # volatile (their answer may change) but they write nothing


def _type(name: str) -> Any:
    return duckdb.sqltype(TYPES[name])


def _macro(udf: Udf) -> str:
    params = ", ".join(a.name + (f" := {a.default}" if a.default else "") for a in udf.args)
    passed = [a.name for a in udf.args] + (
        ["CAST(txid_current() AS BIGINT)"] if udf.vectorized else []
    )
    return (
        f"CREATE OR REPLACE TEMP MACRO {udf.name}({params}) AS "
        f"{HIDDEN.format(udf.name)}({', '.join(passed)})"
    )


def register_functions(con: Any, state: ConnectionState) -> None:
    # The functions hold the connection weakly: a strong reference would be a cycle
    # (connection → function → connection) that outlives close() and leaks at exit.
    ref = weakref.ref(con)
    for udf in load():
        hidden = HIDDEN.format(udf.name)
        fn = _vector_fn(udf, ref, state) if udf.vectorized else _scalar_fn(udf, ref, state)
        types = [_type(a.type) for a in udf.args] + ([_type("bigint")] if udf.vectorized else [])
        with contextlib.suppress(Exception):  # not registered yet
            con.remove_function(hidden)
        con.create_function(
            hidden,
            fn,
            types,
            _type(udf.returns),
            type="arrow" if udf.vectorized else "native",
            # vectorised UDFs mask NULL rows themselves (a NULL element NULLs the row too)
            null_handling="default" if udf.strict and not udf.vectorized else "special",
            exception_handling="default",
            side_effects=udf.volatility == "volatile",
        )
        con.execute(_macro(udf))
