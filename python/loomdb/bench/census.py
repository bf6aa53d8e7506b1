"""Census-like data for benchmarks: mostly small coded categories, a few numeric columns.
No paper section (TOC §6 benchmarks on US Census, 2.5M × 68; this is a synthetic stand-in).

The 1990 US census extract (UCI "USCensus1990", TOC's "US Census") holds coded attributes:
most are categories with a handful of codes, code 0 the most common ("not applicable", "none"),
and a few are numbers.  :func:`census_like` draws a table shaped like that, 40 columns:

* 34 categorical codes, cardinality 2 to 12, Zipf-skewed: P(code k) ∝ (k + 1)^−1.2;
* age 0–90 (whole years); hours worked a week 0–99 (0 for 45% of rows); weeks worked 0–52,
  wage income rounded to $100 and travel time 1–99 minutes (all 0 when no hours are worked);
  other income rounded to $10 (0 for 80% of rows).

About half the cells are nonzero (TOC Table 5: Census 0.43), and 250-row batches compress
7–8x with TOC_FULL.  The label is a fixed linear score of the columns, cut at its median.
"""

from __future__ import annotations

import numpy as np

CARDINALITIES = [2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11]
CARDINALITIES += [11, 12, 12, 2, 3, 4, 5, 6, 8, 10]
NUMERIC = ["age", "hours", "weeks", "wage", "other_income", "travel"]


def census_like(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: ``rows`` × 40 float64 features (34 codes, then ``NUMERIC``), 0/1 labels."""
    rng = np.random.default_rng(seed)
    columns = []
    for card in CARDINALITIES:
        p = 1.0 / np.arange(1, card + 1) ** 1.2
        columns.append(rng.choice(card, size=rows, p=p / p.sum()).astype(np.float64))
    age = np.clip(rng.normal(38, 18, rows), 0, 90).round()
    works = rng.random(rows) >= 0.45
    hours = np.where(works, np.clip(rng.normal(40, 10, rows), 1, 99).round(), 0.0)
    weeks = np.where(works, np.clip(rng.normal(46, 10, rows), 1, 52).round(), 0.0)
    wage = np.where(works, np.round(np.exp(rng.normal(10, 0.8, rows)), -2), 0.0)
    other = np.where(rng.random(rows) < 0.8, 0.0, np.round(rng.exponential(3000, rows), -1))
    travel = np.where(works, np.clip(rng.gamma(2, 12, rows), 1, 99).round(), 0.0)
    X = np.column_stack(columns + [age, hours, weeks, wage, other, travel])
    weights = np.random.default_rng(5).normal(size=X.shape[1]) / (X.std(axis=0) + 1.0)
    score = X @ weights
    return X, (score > np.median(score)).astype(np.float64)
