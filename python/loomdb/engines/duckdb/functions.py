"""Bind the UDF catalogue to a DuckDB database.  No paper section.

Every function is a Python UDF under its SQL name, visible on every connection and cursor of
the database: scalar ones take their arguments as varargs and fill in the catalogue's defaults
(``loom_train(m, src, label)`` works as in PostgreSQL), vectorised ones (``loom_predict``…) are
arrow UDFs receiving whole vectors, with untyped parameters: one taking a ``row``
(``loom_predict_row``) gets any STRUCT (``t`` of ``FROM t``, ``{'a': 1}``) with its field names,
the function it ``overloads`` (``loom_predict``) sends a STRUCT to it, and every features LIST
is checked to hold numbers on its Arrow type (``_number_lists``) before a value is read.
A connection loomdb opened (``loomdb.connect``, ``register``, and cursors of loomdb's
connection) also gets TEMP macros of the same names that shadow them and pass two more arguments
to hidden twins: the connection's token (so a call knows whose transaction and interrupt it runs
under) and, for vectorised functions,
``txid_current()`` (so every vector of one statement is scored by one version of the model).

A table function (``returns = "table(…)"`` in the catalogue) cannot be a Python UDF: DuckDB's
Python API has none.  Its public function and hidden twin are scalar UDFs returning a LIST of
STRUCTs (one per row), and a loomdb connection's TEMP *table* macro of the same name unnests
it: ``SELECT * FROM loom_roc_curve('m', 't')`` works as in PostgreSQL.  (A raw cursor has no
TEMP macros: there ``SELECT unnest(loom_roc_curve('m', 't'), max_depth := 2)``.)

A loomdb error raised in a UDF — on whatever DuckDB worker thread ran it — is kept in a small
table under a number that travels in DuckDB's error text (``[loomdb error 17]``); the
connection finds it and raises the original ``LoomError`` subclass.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import re
import threading
from collections import OrderedDict
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa  # (pyarrow.compute, 30 ms to import, only where it is used)

from loomdb.csr import CsrRows
from loomdb.engines.calls import MAX_WIDTH, feature_rows, not_one_dimensional, vectorized
from loomdb.engines.duckdb.database import TYPES, DuckDatabase
from loomdb.engines.duckdb.state import ConnectionState, Instance
from loomdb.errors import LoomDataError, LoomError, LoomOptionError, LoomStateError
from loomdb.named_rows import NamedRows
from loomdb.udfs import Arg, Udf, load, row_forms

HIDDEN = "{}__conn"
KEPT_ERRORS = 1024
READ_ONLY = {"loom_backends"}  # volatile (their answer may change) but they write nothing
_TAG = re.compile(r"\[loomdb error (\d+)\]")
_errors: OrderedDict[int, LoomError] = OrderedDict()
_errors_lock = threading.Lock()
_numbers = itertools.count(1)


class CarriedError(Exception):
    """What a UDF raises to DuckDB: the LoomError's text and the number it is kept under."""


@functools.cache
def _carrier(name: str) -> type[CarriedError]:
    """A ``CarriedError`` named as the LoomError it carries: DuckDB writes the class's name
    before the text, and where no loomdb connection reads it back (a raw cursor, dbt-duckdb)
    that is what the user sees ("…UDF: LoomNotFoundError: no model …")."""
    return type(name, (CarriedError,), {"__module__": "loomdb.errors"})


def _carry(error: LoomError) -> CarriedError:
    number = next(_numbers)
    with _errors_lock:
        _errors[number] = error
        while len(_errors) > KEPT_ERRORS:
            _errors.popitem(last=False)
    return _carrier(type(error).__name__)(f"{error} [loomdb error {number}]")


def raised_in_udf(error: BaseException) -> LoomError | None:
    """The LoomError a UDF raised, found through DuckDB's error text (then forgotten)."""
    match = _TAG.search(str(error))
    if match is None:
        return None
    with _errors_lock:
        return _errors.pop(int(match.group(1)), None)


def _one_chunk(column: pa.Array) -> pa.Array:
    """A vector as one Arrow array (DuckDB hands a UDF a one-chunk ChunkedArray)."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def _uniform(column: pa.Array) -> tuple[np.ndarray, int] | None:
    """A LIST or text vector's value offsets and the one length all its rows have (None when
    the lengths differ); ``column`` has no NULL rows."""
    large = pa.types.is_large_list(column.type) or pa.types.is_large_string(column.type)
    wide = np.int64 if large else np.int32
    n = len(column)
    ends = np.frombuffer(column.buffers()[1], wide)[column.offset : column.offset + n + 1]
    width = int(ends[1] - ends[0])
    return (ends, width) if (np.diff(ends) == width).all() else None


def _features(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A LIST (or fixed-size ARRAY) vector of numbers (``_number_lists`` checked its type) →
    (X, ok) without a Python loop when it has no NULLs: when every row holds as many values, X
    is a view of the values buffer (read-only; a copy when they are not doubles)."""
    column = _one_chunk(column)
    n = len(column)
    if n and column.null_count == 0:
        values: pa.Array | None = None
        kind = column.type
        if pa.types.is_fixed_size_list(kind):
            values, width = column.flatten(), kind.list_size  # this vector's values
        elif (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
            uniform := _uniform(column)
        ) is not None:  # (a list view's offsets do not follow each other: read row by row)
            ends, width = uniform
            values = column.values.slice(ends[0], ends[-1] - ends[0])
        if values is not None and values.null_count == 0:
            if pa.types.is_decimal(values.type):  # (to_numpy gives Decimal objects)
                import pyarrow.compute as pc

                values = pc.cast(values, pa.float64(), safe=False)
            X = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            return X.reshape(n, width), np.ones(n, dtype=bool)
    return feature_rows(column.to_pylist())


def _same_text(column: pa.Array) -> str | None:
    """The text every row of ``column`` holds (the usual constant model name), else None: a
    NULL, rows that differ, or an empty vector.  Compares the bytes, not Python strings."""
    column = _one_chunk(column)
    text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    if not len(column) or column.null_count or not text:
        return None
    uniform = _uniform(column)
    if uniform is None:
        return None
    ends, _ = uniform
    first = column[0].as_py()
    held = column.buffers()[2].to_pybytes()[ends[0] : ends[-1]]
    return first if held == first.encode() * len(column) else None


def _guarded(fn, names: list[str] | None):
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except LoomError as e:
            raise _carry(e) from None

    if names is not None:
        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
        )
    return wrapper


def _sparse(indices: pa.Array, values: pa.Array) -> tuple[CsrRows, np.ndarray]:
    """Two LIST vectors (indices: integers, values: numbers; ``_number_lists`` checked their
    types) → (CsrRows, ok) without a Python loop per value; a row with a NULL list or a NULL
    element is not ok."""
    import pyarrow.compute as pc

    indices, values = _one_chunk(indices), _one_chunk(values)
    n = len(indices)
    ok = indices.is_valid().to_numpy(zero_copy_only=False) & values.is_valid().to_numpy(
        zero_copy_only=False
    )
    li = pc.fill_null(pc.list_value_length(indices), 0).to_numpy(zero_copy_only=False)
    lv = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
    if not np.array_equal(li[ok], lv[ok]):
        raise LoomDataError(
            "a row's indices and values arrays have different lengths",
            hint="each index needs exactly one value",
        )
    flat_i, flat_v = pc.list_flatten(indices), pc.list_flatten(values)
    if flat_i.type != pa.int64():  # (unsafe: past 2⁶³ wraps negative, which the model refuses)
        flat_i = pc.cast(flat_i, pa.int64(), safe=False)
    if flat_v.type != pa.float64():  # integers, decimals, booleans (0/1)
        flat_v = pc.cast(flat_v, pa.float64(), safe=False)
    lengths = np.where(ok, li, 0).astype(np.int64)
    keep_i = np.repeat(ok, li.astype(np.int64))  # list_flatten skips NULL lists only
    keep_v = np.repeat(ok, lv.astype(np.int64))
    holes = ~(flat_i.is_valid().to_numpy(zero_copy_only=False)[keep_i])
    holes |= ~(flat_v.is_valid().to_numpy(zero_copy_only=False)[keep_v])
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    rows = CsrRows(
        indptr,
        pc.fill_null(flat_i, 0).to_numpy(zero_copy_only=False)[keep_i].astype(np.int64),
        pc.fill_null(flat_v, 0.0).to_numpy(zero_copy_only=False)[keep_v].astype(np.float64),
        MAX_WIDTH,
    )
    if holes.any():
        ok &= np.bincount(rows.row_ids()[holes], minlength=n) == 0
    return rows, ok


def _named(udf: Udf, column: pa.Array) -> tuple[NamedRows, np.ndarray]:
    """A STRUCT vector (a row with its column names), or JSON objects' text → (NamedRows, ok);
    a NULL row is not ok.
    Numeric and boolean fields become float64 columns, text ones keep their values, others
    stay unread."""
    import pyarrow.compute as pc

    column = _one_chunk(column)
    if pa.types.is_null(column.type):  # an untyped NULL: every row NULL
        return NamedRows(len(column), {}, {}), np.zeros(len(column), dtype=bool)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):  # JSON text
        rows = column.to_pylist()
        objects = ["{}" if r is None else r for r in rows]  # ("" is no JSON, as in PostgreSQL)
        return NamedRows.from_json(objects), column.is_valid().to_numpy(zero_copy_only=False)
    if not pa.types.is_struct(column.type):
        raise LoomOptionError(
            f"{udf.name} takes a row with named columns; got a {column.type} value",
            hint=f"SELECT {udf.name}('m', t) FROM t, or a struct {{'a': 1.0, 'b': 2.0}}; "
            "for an array of features in the model's order use loom_predict",
        )
    ok = column.is_valid().to_numpy(zero_copy_only=False)
    everywhere = np.ones(len(column), dtype=bool)  # shared by the fields without a NULL
    everywhere.flags.writeable = False
    columns: dict[str, tuple[np.ndarray | None, np.ndarray]] = {}
    texts: dict[str, np.ndarray] = {}
    for i in range(column.type.num_fields):
        name, field = column.type.field(i).name, column.field(i)
        whole = field.null_count == 0
        present = everywhere if whole else field.is_valid().to_numpy(zero_copy_only=False)
        values = None
        if pa.types.is_null(field.type):  # a NULL literal's field
            values = np.zeros(len(field))
        elif whole and field.type.id in _INTEGERS | _FLOATS:
            # the usual table of numbers: a view of the doubles (one conversion otherwise),
            # where going through Arrow's cast and fill_null took 12 µs a field and vector
            values = field.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        elif field.type.id in _NUMBERS:
            ints = pa.types.is_boolean(field.type)
            # (unsafe: an integer past 2⁵³ rounds to the nearest double, as DuckDB's cast
            # of the array form does, where a safe cast raised Arrow's error)
            doubles = pc.cast(pc.cast(field, pa.int8()) if ints else field, pa.float64(), False)
            values = pc.fill_null(doubles, 0.0).to_numpy(zero_copy_only=False)
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            texts[name] = np.array(field.to_pylist(), dtype=object)
        columns[name] = (values, present)
    return NamedRows.from_columns(len(column), columns, texts), ok


def _is_row(column: pa.Array) -> bool:
    return pa.types.is_struct(column.type)


# Arrow type ids, so a vector's type is checked in a set look-up or two (the features check
# of every vector: 0.5 µs, where pa.types' predicates took 5)
_LISTS = frozenset(
    t.id
    for t in (
        pa.list_(pa.null()),
        pa.large_list(pa.null()),
        pa.list_(pa.null(), 1),
        pa.list_view(pa.null()),
        pa.large_list_view(pa.null()),
    )
)
_INTEGERS = frozenset(
    t.id
    for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())
    + (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())
)
_FLOATS = frozenset(t.id for t in (pa.float16(), pa.float32(), pa.float64()))
_NUMBERS = (
    _INTEGERS
    | _FLOATS
    | frozenset(
        t.id
        for t in (pa.bool_(), pa.decimal32(9), pa.decimal64(18), pa.decimal128(38))
        + (pa.decimal256(76),)
    )
)


def _number_lists(
    udf: Udf,
    column: pa.Array,
    argument: str = "the features",
    integers: bool = False,
    row: bool = False,
) -> pa.Array:
    """``column`` when it is a LIST (or ARRAY) of numbers — integers, floats, decimals or
    booleans (0/1, as a boolean column trains); integers only where ``integers`` — or an untyped
    NULL (a NULL row each); else a LoomOptionError, decided on the Arrow type before a value is
    read: a DATE, a TIMESTAMP or an INTERVAL is no number (Arrow would read its days or
    microseconds, or crash), nor is text.  ``row``: the function has a row form (see
    ``overloads``), which a STRUCT went to; the error says so."""
    kind = column.type
    listed = kind.id in _LISTS
    if listed and kind.value_type.id in (_INTEGERS if integers else _NUMBERS):
        return column  # the usual case
    wanted = pa.int64() if integers else pa.float64()
    if pa.types.is_null(kind):
        return pa.nulls(len(column), pa.list_(wanted))
    if listed and pa.types.is_null(kind.value_type):  # [NULL] or []: a row each, no value
        return _retyped(_one_chunk(column), wanted)
    depth, inner = 0, kind
    while inner.id in _LISTS:
        depth, inner = depth + 1, inner.value_type
    if depth > 1 and inner.id in (_INTEGERS if integers else _NUMBERS):  # DOUBLE[][]
        raise not_one_dimensional(depth, argument.removeprefix("the "))
    numbers = "integers" if integers else "numbers"
    got = f"a LIST of {kind.value_type}" if listed else f"a {kind} value"
    if row and not listed:
        whole = ", or a whole row (a STRUCT)"
        hint = (
            f"{udf.name}('m', [x1, x2]) in the model's feature order, or {udf.name}('m', t) "
            "FROM t to bind them by column name"
        )
    else:
        whole = ""
        cast = "CAST(i AS BIGINT)" if integers else "CAST(x AS DOUBLE)"
        hint = (
            f"cast each to a number, e.g. [{cast}, …] (a column: CAST(c AS "
            f"{'BIGINT' if integers else 'DOUBLE'}[])); a date, time or interval has no "
            "number of its own: choose one, e.g. epoch(d)"
        )
    raise LoomOptionError(
        f"{udf.name} takes {argument} as a LIST of {numbers}{whole}; got {got}", hint=hint
    )


def _retyped(column: pa.Array, element: pa.DataType) -> pa.Array:
    """A LIST vector whose elements are all NULL (Arrow's null type) as a LIST of ``element``."""
    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        return column.cast(pa.list_(element, kind.list_size))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return column.cast(
            pa.large_list(element) if pa.types.is_large_list(kind) else pa.list_(element)
        )
    return pa.array(column.to_pylist(), type=pa.list_(element))  # a list view: no cast


def _widths_differ(column: pa.Array) -> bool:
    """Whether the rows of a LIST vector hold different numbers of values (NULL rows aside)."""
    import pyarrow.compute as pc

    column = _one_chunk(column)
    kind = column.type
    if pa.types.is_fixed_size_list(kind) or not len(column):
        return False
    if column.null_count == 0 and (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return _uniform(column) is None
    lengths = pc.list_value_length(column).drop_null()
    span = pc.min_max(lengths)
    return len(lengths) > 0 and span["min"].as_py() != span["max"].as_py()


def _model_by_model(
    udf: Udf, db: Any, models: pa.Array, features: pa.Array, statement: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(out, ok) of rows naming their models, whose feature LISTs differ in length: each
    model's rows read and scored on their own, so a row's length is judged against its own
    model only (two models of other widths in one vector), wherever DuckDB cut the vectors."""
    names = models.to_pylist()
    features = _one_chunk(features)
    text = udf.returns == "text"
    out = np.full(len(names), None if text else np.nan, dtype=object if text else np.float64)
    ok = np.zeros(len(names), dtype=bool)
    rows: dict[Any, list[int]] = {}
    for i, name in enumerate(names):
        if name is not None:
            rows.setdefault(name, []).append(i)
    for name, at in rows.items():
        X, good = _features(features.take(pa.array(at, type=pa.int64())))
        named = name if isinstance(name, str) else [name] * len(at)  # (refused by name)
        out[at] = vectorized(udf, db, named, X, good, statement)
        ok[at] = good
    return out, ok


def _returned(udf: Udf, out: np.ndarray, ok: np.ndarray) -> pa.Array:
    """A vectorised UDF's result vector: NULL where a row is not ok (or scored NaN)."""
    if udf.returns == "text":
        return pa.array(out, type=pa.string(), mask=~ok)
    return pa.array(out, mask=~ok | np.isnan(out))


def _vector_fn(udf: Udf, instance: Instance, pinned: bool, row_form: Udf | None = None):
    """The arrow UDF of ``udf``; ``row_form``: its row form, which a STRUCT argument goes to."""
    data = len(udf.args) - 1  # the data arguments after the model's name

    def fn(models: pa.Array, *columns: pa.Array) -> pa.Array:
        given, extra = columns[:data], columns[data:]
        token = extra[1][0].as_py() if len(extra) > 1 else None
        state = instance.state(token)
        statement = (token, extra[0][0].as_py()) if extra else None  # see model_cache.load
        db = DuckDatabase(instance.lazy_cursor(), state)
        try:
            X: Any
            called = row_form if row_form is not None and _is_row(given[0]) else udf
            same = _same_text(models)
            if called.takes_row:
                X, ok = _named(called, given[0])
            elif data == 1:
                features = _number_lists(udf, given[0], row=row_form is not None)
                if same is None and _widths_differ(features):  # models of other widths?
                    return _returned(udf, *_model_by_model(called, db, models, features, statement))
                X, ok = _features(features)
            else:
                indices, values = (a.name for a in udf.args[1:])
                X, ok = _sparse(
                    _number_lists(udf, given[0], indices, integers=True),
                    _number_lists(udf, given[1], values),
                )
            names: str | list[Any]
            if same is not None:
                names = same  # the usual case: one constant model name
            else:
                names = models.to_pylist()
                ok &= np.array([n is not None for n in names], dtype=bool)
            return _returned(udf, vectorized(called, db, names, X, ok, statement), ok)
        finally:
            db.close()

    params = [
        "models",
        *(a.name for a in udf.args[1:]),
        *(["statement", "token"] if pinned else []),
    ]
    return _guarded(fn, params)


def _arguments(udf: Udf, args: tuple[Any, ...]) -> list[Any]:
    """The SQL arguments with the catalogue's defaults filled in (varargs come in short)."""
    required = sum(1 for a in udf.args if a.default is None)
    if not required <= len(args) <= len(udf.args):
        arity = f"{required} to {len(udf.args)}" if required < len(udf.args) else str(required)
        raise LoomOptionError(
            f"{udf.name} takes {arity} arguments; got {len(args)}",
            hint=f"{udf.name}({', '.join(a.name for a in udf.args)})",
        )
    return [*args, *(_default(a) for a in udf.args[len(args) :])]


def _default(arg: Arg) -> Any:
    """An argument's default in the catalogue as the value SQL would pass."""
    if not arg.default or arg.default.upper() == "NULL":
        return None
    if arg.type == "bigint":
        return int(arg.default)
    if arg.type == "double":
        return float(arg.default)
    return arg.default.strip("'")


def _scalar_fn(udf: Udf, instance: Instance, with_token: bool):
    def fn(*args: Any) -> Any:
        state = instance.state(args[-1] if with_token else None)
        values = _arguments(udf, args[:-1] if with_token else args)
        if udf.volatility == "volatile" and udf.name not in READ_ONLY:
            state.may_write(udf.name)
        cursor = instance.cursor()
        try:
            _follow(udf, state, cursor, values)
        except BaseException:
            cursor.close()
            raise
        db = DuckDatabase(cursor, state)
        try:
            out = udf.callable()(db, *values)
        finally:
            db.close()  # once no statement runs on it (a page read ahead, when a call failed)
        if udf.table:  # rows (tuples in column order) → the LIST of STRUCTs DuckDB returns
            names = [c.name for c in udf.columns]
            return [dict(zip(names, row, strict=True)) for row in out]
        return out

    names = [a.name for a in udf.args] + ["token"] if with_token else None
    return _guarded(fn, names)


NAMING = ("source", "target")  # arguments naming the caller's relations


def _follow(udf: Udf, state: ConnectionState, cursor: Any, values: list[Any]) -> None:
    """Resolve names on loomdb's ``cursor`` as the calling connection does: its search path
    (``SET schema``/``search_path``) is set there.  A default database that ``USE`` made
    another than loomdb's cannot be followed (loomdb's catalog is in its own), so a call that
    would resolve the caller's names there (a source, a load's target, a deployment's schema)
    is refused rather than run on the tables of the same names in loomdb's database."""
    names = [v for a, v in zip(udf.args, values) if a.name in NAMING and v is not None]
    if state.elsewhere is not None and (names or udf.name == "loom_deploy"):
        raise LoomStateError(
            f"{udf.name} resolves names in loomdb's database, where its catalog is, but this "
            f"connection's default database is {state.elsewhere!r} (USE): its tables of those "
            "names would not be the ones read",
            hint="USE the database loomdb was connected to again, and name the other "
            f"database's tables with it ({state.elsewhere}.t, also in a SELECT source)",
        )
    state.follow(cursor)


def _type(name: str) -> Any:
    return duckdb.sqltype(TYPES[name])


def _return_type(udf: Udf) -> Any:
    if not udf.table:
        return _type(udf.returns)
    return duckdb.list_type(duckdb.struct_type({c.name: _type(c.type) for c in udf.columns}))


def _create(
    con: Any, name: str, fn: Any, params: list[Any] | None, udf: Udf, new: bool = False
) -> None:
    if not new:  # (``new``: the database has none: each refusal costs a raised error)
        with contextlib.suppress(Exception):  # not registered yet
            con.remove_function(name)
    con.create_function(
        name,
        fn,
        params,
        _return_type(udf),
        type="arrow" if udf.vectorized else "native",
        # vectorised UDFs mask NULL rows themselves (a NULL element NULLs the row too)
        null_handling="default" if udf.strict and not udf.vectorized else "special",
        exception_handling="default",
        side_effects=udf.volatility == "volatile",
    )


def register_functions(con: Any, instance: Instance, new: bool = False) -> None:
    """Create every function (public and hidden twin) in ``con``'s database, replacing those
    ``con`` made before unless the database is ``new``."""
    udfs = load()
    rows = row_forms(udfs)
    for udf in udfs:
        hidden = HIDDEN.format(udf.name)
        row_form = rows.get(udf.name)
        if udf.vectorized:
            # untyped parameters (DuckDB's ANY): a row form takes a STRUCT of any fields, and
            # every vector's type is checked here (``_number_lists``), so a LIST of DATEs is a
            # LoomOptionError with a hint rather than a binder's "no function matches"
            _create(con, udf.name, _vector_fn(udf, instance, False, row_form), None, udf, new)
            _create(con, hidden, _vector_fn(udf, instance, True, row_form), None, udf, new)
            continue
        types = [*(_type(a.type) for a in udf.args), _type("bigint")]
        _create(con, udf.name, _scalar_fn(udf, instance, False), None, udf, new)
        _create(con, hidden, _scalar_fn(udf, instance, True), types, udf, new)


def remove_functions(con: Any) -> None:
    """Remove every function ``con`` registered (``register_functions``)."""
    if getattr(con, "closed", False):
        return
    for udf in load():
        for name in (udf.name, HIDDEN.format(udf.name)):
            with contextlib.suppress(Exception):  # not registered by con
                con.remove_function(name)


def _macro(udf: Udf, token: int) -> str:
    params = ", ".join(a.name + (f" := {a.default}" if a.default else "") for a in udf.args)
    passed = [a.name for a in udf.args]
    if udf.vectorized:
        passed.append("CAST(txid_current() AS BIGINT)")
    passed.append(f"CAST({int(token)} AS BIGINT)")
    call = f"{HIDDEN.format(udf.name)}({', '.join(passed)})"
    if udf.table:  # one row per element, one column per field (array columns stay arrays)
        call = f"TABLE SELECT unnest({call}, max_depth := 2)"
    return f"CREATE OR REPLACE TEMP MACRO {udf.name}({params}) AS {call}"


def equip(con: Any, state: ConnectionState) -> None:
    """This connection's TEMP macros: its token and the statement's transaction id."""
    for udf in load():
        con.execute(_macro(udf, state.token))
