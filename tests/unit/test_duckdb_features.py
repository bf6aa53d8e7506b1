"""A DuckDB vector of feature lists as the rows the model reads (``functions._features``): a
view of the list's values where every row holds as many, row by row otherwise; and a vector of
model names read as one name only when every row holds it (``functions._same_text``); a vector
of rows (STRUCTs) as named columns (``functions._named``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from loomdb.engines.calls import feature_rows
from loomdb.engines.duckdb.functions import _features, _named, _same_text
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
