"""A synthetic sparse source at scale: Zipf-distributed columns, labels from a hidden model.

No paper section (it stands in for the CTR-shaped data of SketchML §5, whose feature
frequencies are heavy-tailed).  ``loom_load('zipf', '', 'clicks', '{"rows": 1000000}')`` makes a
table like the LIBSVM loader's — ``(label double, indices integer[], "values" double[])`` — of
``rows`` rows over ``columns`` columns (defaults 10^6 and 2^20):

* each row holds 1 + Poisson(density·columns − 1) draws of a column, duplicates within the row
  merged (so a row may hold fewer), sorted;
* a draw is column r − 1 for a rank r from the power law p(r) ∝ r^−exponent on [1, columns],
  drawn by inverting its continuous CDF ((1 + u·((c + 1)^(1−s) − 1))^(1/(1−s)), floored);
  column 0 is the most frequent;
* values are 1 (``binary``, the CTR case) or uniform in (0, 1];
* the label is 1 when Σ w_c·x_c + ε > 0, else 0, with hidden weights w_c uniform in [−1, 1)
  from the fixed hash of (seed, c) (``loaders/hashing.py``: no table of ``columns`` weights) and
  ε ~ N(0, (0.5·σ)²), σ² = Σ x_c²/3 the margin's variance: a linear model can learn it, not
  perfectly.

Rows are made in blocks of ``BLOCK`` rows, block b from a generator seeded with (seed, b): the
table depends only on the options, memory is bounded by a block, and rows stream into the table
as they are made.  The path is not read (pass ``''``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.loaders.hashing import unit_interval
from loomdb.options import Boolean, Interval, Option, Options, Text

BLOCK = 8192
NOISE = 0.5


class ZipfLoader:
    name = "zipf"
    options = Options(
        "zipf",
        Option("label", Text(), "label", "the label column's name"),
        Option("rows", Interval(True, 1, 10**9), 1_000_000, "rows to make"),
        Option("columns", Interval(True, 1, 2**31), 2**20, "the width: columns 0 … columns − 1"),
        Option(
            "density",
            Interval(False, 0, 1, low_open=True),
            1e-5,
            "the expected fraction of columns a row holds (before duplicates merge)",
        ),
        Option("exponent", Interval(False, 0, 10, low_open=True), 1.1, "the power law's s"),
        Option("seed", Interval(True, 0, 2**31 - 1), 42, "the generator's seed"),
        Option("binary", Boolean(), True, "values 1 (else uniform in (0, 1])"),
    )
    reads_files = False  # it generates its rows: no file, no pg_read_server_files
    skipped = 0

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        return [(options["label"], "double"), ("indices", "integer[]"), ("values", "double[]")]

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        if path not in ("", "-"):
            raise LoomOptionError(
                "the zipf loader makes its rows and reads no file",
                hint="pass '' as the path and the table's shape in the options",
            )
        self.skipped = 0
        for first in range(0, options["rows"], BLOCK):
            n = min(BLOCK, options["rows"] - first)
            labels, indptr, cols, vals = block(options, first // BLOCK, n)
            lists_c, lists_v = cols.tolist(), vals.tolist()
            bounds = indptr.tolist()
            for r in range(n):
                a, b = bounds[r], bounds[r + 1]
                yield float(labels[r]), lists_c[a:b], lists_v[a:b]


def ranks(u: np.ndarray, columns: int, s: float) -> np.ndarray:
    """Ranks 1 … columns of the power law r^−s, by its continuous inverse CDF."""
    top = float(columns) + 1.0
    if abs(s - 1.0) < 1e-12:
        x = np.power(top, u)
    else:
        x = np.power(1.0 + u * (top ** (1.0 - s) - 1.0), 1.0 / (1.0 - s))
    return np.clip(np.floor(x), 1, columns).astype(np.int64)


def block(
    options: dict[str, Any], number: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Block ``number`` of ``n`` rows: ``(labels, indptr, columns, values)``."""
    columns = int(options["columns"])
    rng = np.random.default_rng([int(options["seed"]), number])
    mean = max(float(options["density"]) * columns, 1.0)
    draws = 1 + rng.poisson(mean - 1.0, n)
    rows = np.repeat(np.arange(n, dtype=np.int64), draws)
    picked = ranks(rng.random(int(draws.sum())), columns, float(options["exponent"])) - 1
    keys = np.unique(rows * columns + picked)  # sorted by row, then column; duplicates merged
    rows, cols = keys // columns, keys % columns
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    vals = np.ones(len(cols)) if options["binary"] else 1.0 - rng.random(len(cols))
    weights = 2.0 * unit_interval(int(options["seed"]), cols) - 1.0
    margin = np.bincount(rows, weights=weights * vals, minlength=n)
    spread = np.sqrt(np.bincount(rows, weights=vals * vals, minlength=n) / 3.0)
    noise = rng.standard_normal(n) * NOISE * spread
    labels = (margin + noise > 0).astype(np.float64)
    return labels, indptr, cols, vals
