"""Column statistics two runs agree on: means and stds rounded so that last-bit differences
of the engines' parallel sums vanish (store/settle.py)."""

from __future__ import annotations

import numpy as np

from loomdb.store.settle import BITS, indicator_stats, settled

rng = np.random.default_rng(7)


def _last_bits(a: np.ndarray, ulps: int) -> np.ndarray:
    """``a`` moved by up to ``ulps`` units in the last place either way."""
    out = a.copy()
    for _ in range(ulps):
        out = np.nextafter(out, np.where(rng.random(a.shape) < 0.5, -np.inf, np.inf))
    return out


def test_sums_that_differ_in_their_last_bits_settle_to_the_same_values():
    std = (rng.random(2000) + 1e-3) * 10.0 ** rng.integers(-9, 9, 2000)
    mean = rng.normal(0, 1e3, 2000) * std  # means up to thousands of deviations from 0
    lo, hi = mean - 3 * std, mean + 3 * std
    a = settled(mean, std, lo, hi)
    b = settled(_last_bits(mean, 8), _last_bits(std, 8), lo, hi)
    agree = (a[0] == b[0]) & (a[1] == b[1])
    assert agree.mean() > 0.999  # only values within 8 ulps of a rounding boundary differ
    assert not np.array_equal(a[1], std)  # and they were rounded


def test_the_rounding_moves_a_z_score_by_less_than_two_to_the_minus_bits():
    mean = np.array([1e6, -3.25, 0.1, 12345.678])
    std = np.array([1e-3, 0.7, 3e-9, 250.0])
    got_mean, got_std = settled(mean, std, mean - std, mean + std)
    assert np.all(np.abs(got_mean - mean) <= std * 2.0**-BITS)
    assert np.all(np.abs(got_std - std) <= std * 2.0**-BITS)
    assert np.all(got_std > 0)


def test_a_constant_columns_mean_is_its_value_exactly():
    value = np.array([0.1, -7.3, 1e20])
    inexact = value * (1 + 1e-15)  # what a sum of many copies returns
    mean, std = settled(inexact, np.array([1e-17, 0.0, 3.0]), value, value)
    assert np.array_equal(mean, value) and np.array_equal(std, np.zeros(3))


def test_what_cannot_be_rounded_is_left_as_it_is():
    mean = np.array([np.nan, 5.0, 1e300, 2.0])
    std = np.array([np.nan, 0.0, 1e-300, np.inf])
    got_mean, got_std = settled(mean, std, np.array([0.0, 4.0, 0.0, 0.0]), np.ones(4) * 9)
    assert np.isnan(got_mean[0]) and np.isnan(got_std[0])
    assert got_mean[1:].tolist() == [5.0, 1e300, 2.0]
    assert got_std[1:].tolist() == [0.0, 1e-300, np.inf]


def test_column_stats_over_more_expressions_than_one_query_takes():
    """Statistics in chunks of ``STATS_PER_QUERY`` expressions, with a filter."""
    import loomdb
    from loomdb.store.settle import STATS_PER_QUERY, column_stats

    db = loomdb.connect(":memory:", progress=False).database()
    db.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x FROM range(1000) r(i)")
    exprs = [f"(CASE WHEN x % {k + 2} = 0 THEN x ELSE 0.5 END)" for k in range(STATS_PER_QUERY + 3)]
    where = "x >= 10"
    a = column_stats(db, "t", exprs, where)
    assert a.shape == (len(exprs), 4)
    x = np.arange(10, 1000, dtype=float)
    first = np.where(x % 2 == 0, x, 0.5)  # the first expression, in numpy
    assert a[0, :2].tolist() == [first.min(), first.max()]
    step = first.std() * 2.0**-BITS  # as settled
    assert abs(a[0, 2] - first.mean()) <= step and abs(a[0, 3] - first.std()) <= step


def test_indicator_statistics_from_counts_are_those_of_the_ones_and_zeros():
    rng = np.random.default_rng(3)
    ones = np.zeros((1000, 5))
    ones[:, 0] = 1.0  # every row
    ones[:, 2] = rng.random(1000) < 0.3
    ones[:, 3] = rng.random(1000) < 0.001
    ones[:, 4] = np.arange(1000) < 999  # all but one (column 1: none)
    got = indicator_stats(ones.sum(axis=0), len(ones))
    mean, std = settled(ones.mean(axis=0), ones.std(axis=0), ones.min(axis=0), ones.max(axis=0))
    assert got[:, 0].tolist() == ones.min(axis=0).tolist()
    assert got[:, 1].tolist() == ones.max(axis=0).tolist()
    assert got[:, 2].tolist() == mean.tolist()
    assert np.allclose(got[:, 3], std, rtol=2.0**-22, atol=0)
    assert got[0, 3] == got[1, 3] == 0.0  # constant indicators


def test_indicator_statistics_of_no_rows_are_null():
    assert np.isnan(indicator_stats(np.zeros(3), 0)).all()
