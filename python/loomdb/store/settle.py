"""Column statistics that two runs agree on.  No paper section.

The engines compute a column's mean and population standard deviation with parallel sums
whose order, and so whose last bits, change from run to run.  The z-score, the automatic step
size and through them every step follow these numbers, and over millions of steps a last-bit
difference can decide where a train stops (10M rows in PostgreSQL: 8 epochs in one run, 24 in
the next).  So each std is rounded to ``BITS`` significant bits and each mean to a multiple of
the power of two just below std · 2^-BITS: two runs then agree unless a value lies within its
sums' error of a rounding boundary (about 1e-7 of the time for sums that differ at 1e-14; a
mean more than about 2^25 deviations from zero has last bits finer than that grid and may still
differ).  A z-scored value moves by less than 2^-BITS, far below what a model can tell; a model
stores the scaling it used, so its predictions are exact.  A constant column (min = max) has that
value for its mean, exactly, and a std of 0.  Min and max are exact already and never rounded.
``column_stats`` computes them in SQL; a column's imputed mean (``preprocess``) is its settled
mean, so the values that fill its NULLs are the same in every run too.
"""

from __future__ import annotations

import numpy as np

from loomdb.store.db import Database

BITS = 24
STATS_PER_QUERY = 400  # 4 aggregates each: PostgreSQL allows 1664 entries in a target list


def settled(
    mean: np.ndarray, std: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, std)`` of columns with minima ``lo`` and maxima ``hi``, rounded as above
    (NaN and infinite values, and a mean too large for its std's grid, are left as they are)."""
    mean, std, lo, hi = (np.asarray(a, dtype=np.float64) for a in (mean, std, lo, hi))
    fraction, exponent = np.frexp(std)  # std = fraction · 2^exponent, 0.5 ≤ fraction < 1
    rounded_std = np.ldexp(np.round(np.ldexp(fraction, BITS)), exponent - BITS)
    grid = np.ldexp(1.0, exponent - BITS - 1)  # a power of two: the products below are exact
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        rounded_mean = np.round(mean / grid) * grid
    usable = np.isfinite(std) & (std > 0) & np.isfinite(rounded_mean) & (grid > 0)
    constant = lo == hi
    mean = np.where(constant, lo, np.where(usable, rounded_mean, mean))
    std = np.where(constant, 0.0, np.where(usable, rounded_std, std))
    return mean, std


# Below this in magnitude a column's deviations, squared and summed over 2^61 rows, hold in a
# double; a column reaching it is summed again scaled by a power of two (``_large_stats``).
LARGE = 2.0**480
# A column of values that differ whose deviation is below this (1e-300s) has squares that
# underflow: its std came out 0, and the column, read as constant, lost its weight.  It is
# summed again scaled up by a power of two, as a large one is scaled down.
SMALL = 2.0**-480
FNS = ("avg", "stddev_pop")


def guarded(db: Database, c: str) -> str:
    """``c`` where a sum of its squares cannot overflow, else NULL, on PostgreSQL, whose avg and
    stddev_pop of 1e300s fail with "value out of range".  DuckDB's are infinite or NaN, and
    what reads them looks at the column's min and max first: ``c`` as it is there (the CASE
    made DuckDB's stats pass 27% slower)."""
    if db.dialect != "postgres":
        return c
    return f"CASE WHEN abs({c}) < CAST({LARGE!r} AS {db.type('double')}) THEN {c} END"


def column_stats(db: Database, rel: str, exprs: list[str], where: str | None) -> np.ndarray:
    """(columns, 4) array of min, max, mean and population std, in SQL (the mean and std
    ``settled``: the same in every run).  A column of values of ``LARGE`` or more in
    magnitude (1e300s), or of a deviation below ``SMALL`` (1e-300s), has its mean and std
    from a second pass over its values scaled by a power of two, so they are finite, not 0,
    and exact to the last bits as any other column's."""
    out: list[float] = []
    source = f"{rel} WHERE {where}" if where else rel
    double = db.type("double")
    for start in range(0, len(exprs), STATS_PER_QUERY):
        chunk = exprs[start : start + STATS_PER_QUERY]
        aggs = ", ".join(
            f"{fn}({c if fn in ('min', 'max') else guarded(db, c)}) AS s{start + i}_{fn}"
            for i, c in enumerate(chunk)
            for fn in ("min", "max", "avg", "stddev_pop")
        )
        row = db.query(f"SELECT {aggs} FROM {source}")[0]
        out.extend(np.nan if v is None else float(v) for v in row)
    stats = np.array(out).reshape(-1, 4)
    _large_stats(db, source, exprs, stats, double)
    stats[:, 2], stats[:, 3] = settled(stats[:, 2], stats[:, 3], stats[:, 0], stats[:, 1])
    return stats


def _large_stats(
    db: Database, source: str, exprs: list[str], stats: np.ndarray, double: str
) -> None:
    """Mean and std of the columns reaching ``LARGE``, and of those whose values differ by
    less than ``SMALL``, from their values times 2^−k (k: the exponent of the largest
    magnitude, so every scaled value is within ±1, exactly; at least −1000, so 2^−k is a
    double: subnormal values scaled by 2^1000 are still far above underflow)."""
    with np.errstate(invalid="ignore"):
        peak = np.fmax(np.abs(stats[:, 0]), np.abs(stats[:, 1]))
        tiny = (stats[:, 0] < stats[:, 1]) & ~(stats[:, 3] >= SMALL)
    large = np.flatnonzero((peak >= LARGE) | tiny)
    for start in range(0, len(large), STATS_PER_QUERY):
        chunk = large[start : start + STATS_PER_QUERY]
        exponents = [max(int(np.frexp(peak[i])[1]), -1000) for i in chunk]
        scaled = [f"({exprs[i]}) * CAST({2.0**-k!r} AS {double})" for i, k in zip(chunk, exponents)]
        aggs = ", ".join(f"{fn}({v}) AS l{n}_{fn}" for n, v in enumerate(scaled) for fn in FNS)
        row = db.query(f"SELECT {aggs} FROM {source}")[0]
        for n, (i, k) in enumerate(zip(chunk, exponents)):
            stats[i, 2:] = [np.ldexp(float(row[2 * n + j]), k) for j in (0, 1)]


def indicator_stats(counts: np.ndarray, rows: int) -> np.ndarray:
    """``column_stats`` of 0/1 indicators from how many of ``rows`` rows each is 1 in: the
    mean ``c / n`` (what the engines' sums of ones give exactly) and the population deviation
    ``√(c·(n − c)) / n``, settled."""
    c = np.asarray(counts, dtype=np.float64)
    n = float(rows)
    with np.errstate(invalid="ignore", divide="ignore"):  # no rows: NULL stats, as in SQL
        stats = np.stack(
            [np.where(c < n, 0.0, 1.0), np.where(c > 0, 1.0, 0.0), c / n, np.sqrt(c * (n - c)) / n],
            axis=1,
        )
    if not rows:
        stats[:] = np.nan
    stats[:, 2], stats[:, 3] = settled(stats[:, 2], stats[:, 3], stats[:, 0], stats[:, 1])
    return stats
