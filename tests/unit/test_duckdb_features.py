"""A DuckDB vector of feature lists as the rows the model reads (``functions._features``): a
view of the list's values where every row holds as many, row by row otherwise."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from loomdb.engines.calls import feature_rows
from loomdb.engines.duckdb.functions import _features
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
    if kind == "chunked":
        return pa.chunked_array([pa.array(rows)])
    assert kind == "chunks"
    return pa.chunked_array([pa.array(rows[:1]), pa.array(rows[1:])])


@pytest.mark.parametrize("kind", ["list", "large", "ints", "sliced", "chunked", "chunks"])
def test_rows_of_one_width_are_the_lists_values(kind):
    rows = [[float(int(x)) for x in r] for r in ROWS[:3]] if kind == "ints" else ROWS
    X, ok = _features(_as_given(rows, kind))
    assert X.dtype == np.float64 and ok.all()
    assert np.array_equal(X, np.asarray(rows))


def test_a_null_row_or_element_is_not_ok_and_other_widths_are_refused():
    X, ok = _features(pa.array([[1.0, 2.0], None, [3.0, None], [4.0, 5.0]]))
    assert ok.tolist() == [True, False, False, True]
    assert np.array_equal(X[ok], [[1.0, 2.0], [4.0, 5.0]])
    with pytest.raises(LoomOptionError, match="different lengths"):
        _features(pa.array([[1.0, 2.0], [3.0]]))
    assert _features(pa.array([[], []], type=pa.list_(pa.float64())))[0].shape == (2, 0)
    same = feature_rows([[1.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(_features(pa.array([[1.0, 2.0], [3.0, 4.0]]))[0], same[0])
