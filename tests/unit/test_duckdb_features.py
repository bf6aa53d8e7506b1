"""A DuckDB vector of feature lists as the rows the model reads (``functions._features``): a
view of the list's values where every row holds as many, row by row otherwise, and only once
``functions._number_lists`` found its elements to be numbers; and a vector of
model names read as one name only when every row holds it (``functions._same_text``); a vector
of rows (STRUCTs) as named columns (``functions._named``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from loomdb.engines.calls import feature_rows
from loomdb.engines.duckdb.functions import _features, _named, _number_lists, _same_text, _sparse
from loomdb.errors import LoomOptionError
from loomdb.udfs import load

ROWS = [[1.0, 2.5, -3.0], [4.0, 0.0, 6.0], [7.0, 8.0, 9.5], [-1.0, 1e300, 2.0]]


def _as_given(rows, kind: str):
    if kind == "list":
        return pa.array(rows, type=pa.list_(pa.float64()))
    if kind == "large":
        return pa.array(rows, type=pa.large_list(pa.float64()))
    if kind == "ints":
        return pa.array([[int(x) for x in r] for r in rows], type=pa.list_(pa.int32()))
    if kind == "sliced":  # a slice of a longer vector: offsets that do not start at 0
        return pa.array([[0.5, 0.5, 0.5], *rows, [9.0, 9.0, 9.0]]).slice(1, len(rows))
    if kind == "array":  # DuckDB's fixed-size ARRAY type (DOUBLE[3])
        return pa.array(rows, type=pa.list_(pa.float64(), 3))
    if kind == "floats":
        return pa.array(rows, type=pa.list_(pa.float32(), 3))
    if kind == "sliced array":
        return pa.array([[0.5] * 3, *rows, [9.0] * 3], type=pa.list_(pa.float64(), 3)).slice(1, 4)
    if kind == "chunked":
        return pa.chunked_array([pa.array(rows)])
    assert kind == "chunks"
    return pa.chunked_array([pa.array(rows[:1]), pa.array(rows[1:])])


KINDS = ["list", "large", "ints", "sliced", "array", "floats", "sliced array", "chunked", "chunks"]


@pytest.mark.parametrize("kind", KINDS)
def test_rows_of_one_width_are_the_lists_values(kind):
    rows = [[float(int(x)) for x in r] for r in ROWS[:3]] if kind == "ints" else ROWS
    if kind == "floats":
        rows = [[float(np.float32(x)) for x in r] for r in ROWS[:3]]
    X, ok = _features(_as_given(rows, kind))
    assert X.dtype == np.float64 and ok.all()
    assert np.array_equal(X, np.asarray(rows))
    assert X.flags.writeable == (kind in ("ints", "floats"))  # a view unless converted


def test_a_null_row_or_element_is_not_ok_and_other_widths_are_refused():
    X, ok = _features(pa.array([[1.0, 2.0], None, [3.0, None], [4.0, 5.0]]))
    assert ok.tolist() == [True, False, False, True]
    assert np.array_equal(X[ok], [[1.0, 2.0], [4.0, 5.0]])
    with pytest.raises(LoomOptionError, match="different lengths"):
        _features(pa.array([[1.0, 2.0], [3.0]]))
    assert _features(pa.array([[], []], type=pa.list_(pa.float64())))[0].shape == (2, 0)
    view = pa.array([[1.0, 2.0], [3.0, 4.0]], type=pa.list_view(pa.float64()))
    assert _features(view)[0].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    fixed = pa.array([[1.0, 2.0], None, [3.0, None]], type=pa.list_(pa.float64(), 2))
    X, ok = _features(fixed)
    assert ok.tolist() == [True, False, False] and X[0].tolist() == [1.0, 2.0]
    same = feature_rows([[1.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(_features(pa.array([[1.0, 2.0], [3.0, 4.0]]))[0], same[0])


@pytest.mark.parametrize(
    "names, same",
    [
        (["m", "m", "m"], "m"),
        (["modèle", "modèle"], "modèle"),  # compared as UTF-8 bytes
        (["ab", "ab"], "ab"),
        (["ab", "ba"], None),  # same lengths, other bytes
        (["mm", ""], None),  # the same bytes, cut elsewhere
        (["m", "m", None], None),
        ([], None),
    ],
)
def test_one_model_name_only_when_every_row_holds_it(names, same):
    assert _same_text(pa.array(names, type=pa.string())) == same
    assert _same_text(pa.array(names, type=pa.large_string())) == same
    assert _same_text(pa.chunked_array([pa.array(names, type=pa.string())])) == same


def test_a_sliced_vector_of_names_is_read_from_its_own_rows():
    names = pa.array(["x", "m", "m", "y"])
    assert _same_text(names.slice(1, 2)) == "m"
    assert _same_text(names.slice(0, 2)) is None
    assert _same_text(pa.chunked_array([pa.array(["m"]), pa.array(["m"])])) == "m"
    assert _same_text(pa.chunked_array([pa.array(["m"]), pa.array(["n"])])) is None


def udf_named():
    return next(u for u in load() if u.name == "loom_predict_row")


def _struct(fields: dict[str, pa.Array], sliced: bool) -> pa.StructArray:
    column = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    return column.slice(1, len(column) - 2) if sliced else column


@pytest.mark.parametrize("sliced", [False, True])
def test_a_rows_fields_are_its_named_columns_whatever_their_type(sliced):
    """``_named``: a STRUCT vector's number fields as float64 columns (a view of doubles
    without a NULL, converted otherwise), their NULLs masked, text kept, other types unread."""
    given = {
        "d": pa.array([0.0, 1.5, -2.0, np.nan, 4.0]),
        "i": pa.array([0, 2**60 + 1, -3, 7, 9], type=pa.int64()),  # past 2⁵³: rounded
        "f": pa.array([0.0, 0.25, 1.5, 2.0, 3.0], type=pa.float32()),
        "holes": pa.array([0.0, None, 2.0, 3.0, None]),
        "big": pa.array([2**60 + 1, None, -(2**62) - 3, 5, 6], type=pa.int64()),
        "b": pa.array([True, False, True, None, False]),
        "dec": pa.array([1, 2, 3, 4, 5], type=pa.decimal128(5, 2)),
        "s": pa.array(["a", None, "c", "d", "e"]),
        "when": pa.array([1, 2, 3, 4, 5], type=pa.date32()),
    }
    rows, ok = _named(udf_named(), _struct(given, sliced))
    kept = slice(1, 4) if sliced else slice(None)
    assert ok.all() and len(rows) == len(ok) == (3 if sliced else 5)
    for name in ("d", "i", "f", "holes", "big", "b", "dec"):
        cells = given[name].to_pylist()[kept]
        want = np.array([0.0 if c is None else float(c) for c in cells])
        np.testing.assert_array_equal(rows.values[name], want)
        assert rows.values[name].dtype == np.float64
        np.testing.assert_array_equal(rows.present[name], [c is not None for c in cells])
    assert list(rows.texts["s"]) == given["s"].to_pylist()[kept]
    assert rows.values["when"] is None and rows.values["s"] is None
    X = rows.matrix(["i", "d"])  # bound by name, in the model's order
    np.testing.assert_array_equal(X[:, 0], [float(v) for v in given["i"].to_pylist()[kept]])


def test_a_null_row_of_a_struct_vector_is_not_ok():
    column = pa.StructArray.from_arrays(
        [pa.array([1.0, 2.0, 3.0])], names=["x"], mask=pa.array([False, True, False])
    )
    rows, ok = _named(udf_named(), column)
    assert list(ok) == [True, False, True]


def udf_called(name: str):
    return next(u for u in load() if u.name == name)


NOT_NUMBERS = {
    "date": pa.array([[10]], type=pa.list_(pa.date32())),
    "timestamp": pa.array([[1_000_000]], type=pa.list_(pa.timestamp("us"))),
    "time": pa.array([[1]], type=pa.list_(pa.time64("us"))),
    "interval": pa.array(
        [[pa.MonthDayNano([0, 1, 0])]], type=pa.list_(pa.month_day_nano_interval())
    ),
    "text": pa.array([["abc"]], type=pa.list_(pa.string())),
    "bytes": pa.array([[b"1"]], type=pa.list_(pa.binary())),
    "nested text": pa.array([[["a"]]], type=pa.list_(pa.list_(pa.string()))),
    "array of dates": pa.array([[10, 11]], type=pa.list_(pa.date32(), 2)),
    "large list of text": pa.array([["a"]], type=pa.large_list(pa.string())),
}
FEATURE_LISTS = ["loom_predict", "loom_predict_class", "loom_predict_proba"]


@pytest.mark.parametrize("name", FEATURE_LISTS)
@pytest.mark.parametrize("kind", NOT_NUMBERS)
def test_a_list_of_what_is_not_a_number_is_refused_before_a_value_is_read(name, kind):
    # Arrow's to_numpy read a DATE as its days and a TIMESTAMP as microseconds, raised a raw
    # ValueError for text, and crashed the process on an INTERVAL
    column = NOT_NUMBERS[kind]
    with pytest.raises(LoomOptionError, match=f"{name} takes the features as a LIST of numbers"):
        _number_lists(udf_called(name), column, row=name != "loom_predict_proba")
    with pytest.raises(LoomOptionError) as raised:
        _number_lists(udf_called(name), pa.chunked_array([column]))
    assert raised.value.hint and "cast" in raised.value.hint


@pytest.mark.parametrize("name", FEATURE_LISTS)
def test_a_list_of_lists_of_numbers_is_refused_as_not_one_dimensional(name):
    """DOUBLE[][]: numpy would read each row as a matrix; the message is PostgreSQL's."""
    nested = pa.array([[[1.0, 2.0]]], type=pa.list_(pa.list_(pa.float64())))
    with pytest.raises(LoomOptionError, match="one-dimensional array of numbers; got a 2-dim"):
        _number_lists(udf_called(name), nested)


@pytest.mark.parametrize("kind", NOT_NUMBERS)
def test_a_sparse_rows_values_and_indices_are_checked_the_same_way(kind):
    udf = udf_called("loom_predict_sparse")
    with pytest.raises(LoomOptionError, match="feature_values as a LIST of numbers"):
        _number_lists(udf, NOT_NUMBERS[kind], "feature_values")
    with pytest.raises(LoomOptionError, match="feature_indices as a LIST of integers"):
        _number_lists(udf, NOT_NUMBERS[kind], "feature_indices", integers=True)
    for other in (pa.array([[1.0]]), pa.array([[1]], pa.list_(pa.decimal128(4, 1))), [[True]]):
        with pytest.raises(LoomOptionError, match="LIST of integers"):
            _number_lists(udf, pa.array(other), integers=True)


NUMBERS = {
    "int8": pa.int8(),
    "uint64": pa.uint64(),
    "int64": pa.int64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "decimal": pa.decimal128(6, 2),
    "hugeint": pa.decimal128(38, 0),  # DuckDB's HUGEINT and UHUGEINT
    "boolean": pa.bool_(),  # 0/1, as training reads a boolean column
}


@pytest.mark.parametrize("kind", NUMBERS)
def test_every_kind_of_number_is_read_as_doubles(kind):
    element = NUMBERS[kind]
    rows = [[1, 0], [0, 1]] if kind == "boolean" else [[1, 2], [3, 4]]
    cells = [[bool(v) if kind == "boolean" else v for v in r] for r in rows]
    for column in (
        pa.array(cells, type=pa.list_(element)),
        pa.array(cells, type=pa.list_(element, 2)),
        pa.array([*cells, None], type=pa.list_(element)),  # a NULL row: read row by row
    ):
        checked = _number_lists(udf_called("loom_predict"), column, row=True)
        X, ok = _features(checked)
        assert X.dtype == np.float64
        np.testing.assert_array_equal(X[ok], rows)
    indices = pa.array([[0, 1], [1]], type=pa.list_(pa.int32()))
    values = pa.array([cells[0], cells[1][1:]], type=pa.list_(element))
    udf = udf_called("loom_predict_sparse")
    csr, ok = _sparse(
        _number_lists(udf, indices, integers=True), _number_lists(udf, values, "feature_values")
    )
    assert ok.all() and csr.values.dtype == np.float64 and csr.indices.dtype == np.int64
    assert csr.values.tolist() == [float(v) for v in [*rows[0], rows[1][1]]]


def test_a_list_of_nulls_or_an_untyped_null_is_a_null_row():
    udf = udf_called("loom_predict_sparse")
    nothing = pa.array([[None], None], type=pa.list_(pa.null()))
    X, ok = _features(_number_lists(udf_called("loom_predict"), nothing, row=True))
    assert not ok.any()
    nulls = _number_lists(udf, pa.nulls(2), integers=True)
    csr, ok = _sparse(nulls, _number_lists(udf, nothing, "feature_values"))
    assert not ok.any() and csr.nnz == 0
