"""A DuckDB vector of feature lists as the rows the model reads (``functions._features``): a
view of the list's values where every row holds as many, row by row otherwise; and a vector of
model names read as one name only when every row holds it (``functions._same_text``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from loomdb.engines.calls import feature_rows
from loomdb.engines.duckdb.functions import _features, _same_text
from loomdb.errors import LoomOptionError

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
