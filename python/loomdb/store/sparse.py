"""Sparse sources: each row's features as two array columns, ``indices`` and ``values``.

No paper section (TOC §3.1 starts from the same column–value pairs; loomdb reads them from the
database instead of from a dense matrix).  A source is sparse when the ``sparse`` option says
so (``{"indices": col, "values": col, "width": n}``, every key optional), when ``features`` names
exactly its indices then its values array column, or — with neither option given — when its
columns besides the label are one integer-array and one other numeric-array column and no
numeric ones (a source with numeric columns as well must say which it means).  Indices are
0-based columns below ``width`` (at most 2^31; by default the largest index + 1); the order
inside a row does not matter, an index twice in one row is refused.

Nothing here builds a dense row.  Profiling is SQL over the unnested pairs: one pass checks
them (equal lengths, no NULL element, indices in range), one ``GROUP BY index`` gathers each
column's count, mean, population deviation, min and max *of its stored values*, and the
column's statistics over all rows follow exactly, the absent rows being zeros (Chan et al.'s
pairwise combination for the deviation).  Rows travel from the engine packed as CSR chunks
(``Database.read_sparse``) in the same shuffled order a dense source's rows would.

The layout's columns are the *observed* ones: the distinct indices the rows hold, in increasing
order (``stats["columns"]``), renumbered 0…m−1.  A column no row holds has zero statistics and
would keep a zero coefficient under every standardisation (its standardised value is 0, so its
gradient is 0), so leaving it out changes nothing but memory: a 2^31-wide source costs what its
observed columns cost.  The standardisation is folded into the trainer's products (shift as a
rank-one correction), so z-scoring a sparse source never densifies it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.codecs.toc_format import MAX_COLS
from loomdb.csr import CsrRows
from loomdb.errors import LoomDataError, LoomOptionError, LoomStateError
from loomdb.options import Constraint
from loomdb.store import source as dense_source
from loomdb.store.db import Database
from loomdb.store.names import builtin, quote_ident
from loomdb.store.settle import LARGE, SMALL, column_stats, guarded, settled
from loomdb.store.source import SourceProfile, columns_of

MAX_WIDTH = 2**31
STATS_CHUNK = 65536
ARRAYS = ("integer[]", "double[]")


class SparseOption(Constraint):
    """The ``sparse`` option: an object with optional ``indices``, ``values``, ``width``."""

    def check(self, value: Any) -> bool:
        if not isinstance(value, dict) or set(value) - {"indices", "values", "width"}:
            return False
        names = [value[k] for k in ("indices", "values") if k in value]
        width = value.get("width")
        return all(isinstance(n, str) and n for n in names) and (
            width is None
            or (isinstance(width, int) and not isinstance(width, bool) and 1 <= width <= MAX_WIDTH)
        )

    def describe(self) -> str:
        return (
            'an object {"indices": column, "values": column, "width": n} (each optional; '
            "width from 1 to 2147483648)"
        )


@dataclass
class SparseSpec:
    indices: str
    values: str
    width: int | None = None

    def as_option(self) -> dict[str, Any]:
        return {"indices": self.indices, "values": self.values, "width": self.width}


def _only(kinds: dict[str, str], kind: str, source: str, what: str) -> str:
    found = [c for c, k in kinds.items() if k == kind]
    if len(found) != 1:
        raise LoomOptionError(
            f"{source} has {len(found)} {kind} columns; name its {what} column in 'sparse'",
            hint=f'pass {{"sparse": {{"{what}": column}}}}',
        )
    return found[0]


def resolve(
    source: str,
    label: str,
    available: dict[str, str],
    features: list[str] | None,
    given: dict[str, Any] | None,
) -> SparseSpec | None:
    """The sparse columns of a source, or None when it is dense (see the module docstring)."""
    arrays = {c: k for c, k in available.items() if k in ARRAYS and c != label}
    named = [dense_source.resolve(f, available, "feature", source) for f in features or []]
    if given is None and features is not None:
        if not any(available[f] in ARRAYS for f in named):
            return None
        if len(named) != 2 or available[named[0]] != "integer[]" or named[1] not in arrays:
            raise LoomOptionError(
                "a source's features are numeric columns, or exactly its indices (an integer "
                f"array) and values (a numeric array) columns; got {', '.join(named)}",
                hint="list scalar columns only, or the two array columns, indices first",
            )
        return SparseSpec(named[0], named[1])
    if given is None:
        ints = [c for c, k in arrays.items() if k == "integer[]"]
        nums = [c for c, k in arrays.items() if k == "double[]"]
        if len(ints) != 1 or len(nums) != 1:
            return None
        scalars = [c for c, k in available.items() if k in dense_source.USABLE and c != label]
        if scalars:
            listed = ", ".join(json.dumps(c) for c in scalars[:3]) + (", …" if scalars[3:] else "")
            raise LoomOptionError(
                f"{source} has numeric columns ({', '.join(scalars[:5])}) and the array columns "
                f"{ints[0]} and {nums[0]}: say which are the features",
                hint=f'pass {{"features": [{listed}]}} for the numeric columns, or '
                f'{{"sparse": {{}}}} for the arrays',
            )
        return SparseSpec(ints[0], nums[0])
    indices = given.get("indices")
    if indices is None:
        indices = _only(arrays, "integer[]", source, "indices")
    indices = dense_source.resolve(indices, available, "sparse indices", source)
    values = given.get("values")
    if values is None:
        rest = {c: k for c, k in arrays.items() if c != indices}
        values = next(iter(rest)) if len(rest) == 1 else _only(rest, "double[]", source, "values")
    values = dense_source.resolve(values, available, "sparse values", source)
    if available[indices] != "integer[]" or values not in arrays or values == indices:
        raise LoomDataError(
            f"sparse columns {indices} ({available[indices]}) and {values} "
            f"({available[values]}) of {source} must be an integer array and a numeric array",
            hint="cast them in a SELECT source, e.g. CAST(ix AS INTEGER[])",
        )
    if features is not None and named != [indices, values]:
        raise LoomOptionError(
            "a sparse source's features are its indices and values columns; "
            f"'features' lists {', '.join(named)}",
            hint="leave 'features' out, or list the two array columns, indices first",
        )
    return SparseSpec(indices, values, given.get("width"))


@dataclass
class SparseProfile(SourceProfile):
    spec: SparseSpec = field(default_factory=lambda: SparseSpec("", ""))
    nnz: int = 0  # the pairs the rows hold

    @property
    def columns(self) -> np.ndarray:
        return np.asarray(self.stats["columns"])

    @property
    def width(self) -> int:
        return int(self.spec.width or 0)

    @property
    def raw_bytes(self) -> int:
        return self.nnz * 16 + self.rows * 16

    def stored_stats(self) -> dict[str, Any]:
        out = dict(self.stats)
        out["label"] = np.asarray(out["label"]).tolist()
        return out

    def label_expr(self, double: str) -> str:
        return dense_source.number(self.label, self.kinds[self.label], double)


def profile_source(
    db: Database, source: str, label: str, opts: dict[str, Any], split: Any = None
) -> SourceProfile | SparseProfile:
    """A dense or a sparse profile of ``source``, whichever it is (of the rows ``split``, a
    ``store.split.Split``, leaves for training where given)."""
    rel, available = columns_of(db, source)
    usable = split.others(available, source, label, opts["features"]) if split else available
    label_col = dense_source.label_column(source, label, usable, text=True)
    spec = resolve(source, label_col, usable, opts["features"], opts.get("sparse"))
    if spec is None:
        return dense_source.profile(
            db, source, label, opts["features"], opts["nulls"], opts.get("preprocess"), split
        )
    if opts.get("preprocess"):  # it encodes and fills a dense source's columns
        raise LoomOptionError(
            f"'preprocess' encodes or fills named feature columns; {source} is sparse (its "
            f"features are the arrays {spec.indices} and {spec.values}), which it cannot apply to",
            hint="leave 'preprocess' out: a sparse source's values are used as they are "
            "(transform them in a SELECT source, or skip rows with NULLs with "
            '{"nulls": "skip"})',
        )
    if usable[label_col] == "text":
        raise LoomDataError(
            f"label column '{label_col}' is text: a sparse source's label must be a number",
            hint="map its classes to numbers in a SELECT source, e.g. CASE WHEN y = 'yes' "
            "THEN 1 ELSE 0 END",
        )
    rel, held_out = split.narrow(db, rel, available, source) if split else (rel, None)
    prof = _profile(db, source, rel, available, label_col, spec, opts["nulls"])
    prof.split = held_out
    return prof


def _profile(db, source, rel, available, label, spec, nulls) -> SparseProfile:
    cols = [spec.indices, spec.values, label]
    rows, skipped, where = dense_source.count_rows(db, source, rel, cols, nulls)
    kinds = {c: available[c] for c in cols}
    prof = SparseProfile(source, rel, label, [spec.indices, spec.values], kinds, rows, 0, {})
    prof.skipped, prof.where, prof.spec = skipped, where, spec
    pairs = _pairs(db, rel, spec, where)
    nnz, bad, low, high = db.query(
        "SELECT count(*) AS n, count(*) FILTER (WHERE loom_i IS NULL OR loom_v IS NULL) AS bad, "
        f"min(loom_i) AS lo, max(loom_i) AS hi FROM {pairs}"
    )[0]
    if bad:
        raise LoomDataError(
            f"rows of {source} hold indices and values arrays of different lengths, or NULL "
            f"elements ({bad} unmatched entries)",
            hint="each index needs exactly one non-NULL value; filter such rows in a SELECT",
        )
    if not nnz:
        raise LoomDataError(f"the rows of {source} hold no feature values")
    _check_range(source, int(low), int(high), spec)
    prof.spec = SparseSpec(spec.indices, spec.values, spec.width or int(high) + 1)
    prof.stats = _column_stats(db, source, pairs, rows)
    prof.nnz = int(nnz)
    double = db.type("double")
    label_stats = column_stats(db, rel, [prof.label_expr(double)], where)[0]
    if not np.isfinite(label_stats[:2]).all():
        raise LoomDataError(f"label '{label}' of {source} holds NaN or infinite values")
    prof.stats["label"] = np.nan_to_num(label_stats)
    prof.label_counts = dense_source.label_counts(db, rel, prof.label_expr(double), where)
    return prof


def _pairs(db: Database, rel: str, spec: SparseSpec, where: str | None) -> str:
    """A relation of every (index, value) pair of the rows: ``loom_i``, ``loom_v``."""
    filtered = f" WHERE {where}" if where else ""
    unnest = builtin("unnest", db.dialect)  # polymorphic: never a role's unnest(integer[])
    return (
        f"(SELECT {unnest}({quote_ident(spec.indices)}) AS loom_i, "
        f"{unnest}(CAST({quote_ident(spec.values)} AS {db.type('double[]')})) AS loom_v "
        f"FROM {rel}{filtered}) loom_pairs"
    )


WIDTH_HINT = "give a larger 'width' in the sparse option"


def _check_range(source: str, low: int, high: int, spec: SparseSpec) -> None:
    if low < 0:
        raise LoomDataError(
            f"{source} holds index {low}: sparse indices are 0-based columns",
            hint="shift them in a SELECT source, or load LIBSVM files with loom_load",
        )
    limit = spec.width or MAX_WIDTH
    if high >= limit:
        raise LoomDataError(
            f"{source} holds index {high}, at or beyond the width {limit}",
            hint=WIDTH_HINT if spec.width else "sparse sources have at most 2^31 columns",
        )


def _check_large(source: str, ranges: np.ndarray) -> None:
    """Refuse values of ``LARGE`` or more in magnitude: a column's variance, summed over the
    rows that hold it and those that do not, would overflow a double (infinite values are
    refused after, as NaN and infinite)."""
    with np.errstate(invalid="ignore"):
        peak = np.abs(ranges).max(initial=0.0)
    if np.isfinite(ranges).all() and peak >= LARGE:
        raise LoomDataError(
            f"the values of {source} reach {peak:.3g}: a sparse source's column statistics "
            "hold values below 2^480 (about 3.1e144) in magnitude",
            hint="scale the values down in a SELECT source (e.g. a log or a constant factor)",
        )


def _column_stats(db: Database, source: str, pairs: str, n: int) -> dict[str, Any]:
    """Per observed column: min, max, mean and population std over all ``n`` rows, the rows
    that do not hold it counting as zeros."""
    bounded = guarded(db, "loom_v")  # PostgreSQL's std of 1e300s raises
    grouped = (
        f"(SELECT loom_i, count(*) AS loom_n, avg({bounded}) AS loom_m, stddev_pop({bounded}) "
        f"AS loom_s, min(loom_v) AS loom_lo, max(loom_v) AS loom_hi FROM {pairs} GROUP BY loom_i) "
        "loom_grouped"
    )
    cols = ["loom_i", "loom_n", "loom_m", "loom_s", "loom_lo", "loom_hi"]
    chunks = list(db.read_matrix(grouped, cols, None, None, STATS_CHUNK))
    table = np.concatenate(chunks) if chunks else np.empty((0, len(cols)))
    table = table[np.argsort(table[:, 0], kind="stable")]
    if len(table) > MAX_COLS:
        raise LoomDataError(
            f"{source} holds {len(table):,} distinct columns; a layout holds at most {MAX_COLS:,}",
            hint="hash the features into fewer columns (loom_load 'libsvm' with cross_bits)",
        )
    _check_large(source, table[:, 4:6])
    if not np.isfinite(table).all():
        raise LoomDataError(
            f"the values of {source} hold NaN or infinite values (or overflow a double)",
            hint="filter them out in a SELECT source",
        )
    unit = _faint_units(db, pairs, table)
    held, mean_held, sd_held, lo, hi = (table[:, k] for k in range(1, 6))
    absent = n - held
    mean = held * mean_held / n
    m2 = held * sd_held**2 + held * absent / n * mean_held**2
    low = np.where(absent > 0, np.minimum(lo, 0.0), lo)
    high = np.where(absent > 0, np.maximum(hi, 0.0), hi)
    mean, std = settled(mean / unit, np.sqrt(np.maximum(m2 / n, 0.0)) / unit, low, high)
    return {
        "columns": table[:, 0].astype(np.int64),
        "min": low,
        "max": high,
        "mean": mean,
        "std": std,
    }


FAINT_UNIT = 2.0**600  # values below SMALL times this: squares far from under- or overflow


def _faint_units(db: Database, pairs: str, table: np.ndarray) -> np.ndarray:
    """Each column's unit: 1, or ``FAINT_UNIT`` for a column whose every value is below
    ``SMALL`` (1e-300s), whose squares underflow: its std came out 0 and the column, read as
    constant, lost its weight.  Such columns' held mean and std in ``table`` are replaced by
    those of their values times the unit, from a second pass; the caller divides it out."""
    with np.errstate(invalid="ignore"):
        peak = np.fmax(np.abs(table[:, 4]), np.abs(table[:, 5]))
    faint = (peak > 0) & (peak < SMALL)
    unit = np.where(faint, FAINT_UNIT, 1.0)
    if not faint.any():
        return unit
    double = db.type("double")  # other columns' values scaled would overflow: 0 for them
    scaled = (
        f"CASE WHEN abs(loom_v) < CAST({SMALL!r} AS {double}) "
        f"THEN loom_v * CAST({FAINT_UNIT!r} AS {double}) ELSE 0 END"
    )
    grouped = (
        f"(SELECT loom_i, avg({scaled}) AS loom_m, stddev_pop({scaled}) AS loom_s FROM {pairs} "
        "GROUP BY loom_i) loom_grouped"
    )
    cols = ["loom_i", "loom_m", "loom_s"]
    chunks = list(db.read_matrix(grouped, cols, None, None, STATS_CHUNK))
    again = np.concatenate(chunks)
    again = again[np.argsort(again[:, 0], kind="stable")]
    table[faint, 2:4] = again[faint, 1:3]
    return unit


def read_rows(
    db: Database, prof: SparseProfile, seed: int | None, chunk: int
) -> Iterator[tuple[np.ndarray, CsrRows]]:
    """The profiled rows as ``(labels, CsrRows)`` over the layout's columns 0…m−1."""
    columns = prof.columns
    for y, rows in db.read_sparse(
        prof.relation,
        prof.label_expr(db.type("double")),
        quote_ident(prof.spec.indices),
        quote_ident(prof.spec.values),
        prof.where,
        seed,
        chunk,
        prof.width,
        prof.rows,
    ):
        at = np.minimum(np.searchsorted(columns, rows.indices), len(columns) - 1)
        if rows.nnz and not np.array_equal(columns[at], rows.indices):
            raise LoomStateError(
                f"{prof.source} changed while it was laid out",
                hint="run the call again",
            )
        yield y, rows.with_columns(at, len(columns)).canonical()


def minibatches(
    chunks: Iterator[tuple[np.ndarray, CsrRows]], size: int
) -> Iterator[tuple[np.ndarray, CsrRows]]:
    """Re-cut a stream of row chunks into minibatches of ``size`` rows (the last shorter)."""
    held_y: list[np.ndarray] = []
    held_x: list[CsrRows] = []
    held = 0
    for y, X in chunks:
        held_y.append(y)
        held_x.append(X)
        held += len(y)
        while held >= size:
            Y, R = np.concatenate(held_y), CsrRows.concat(held_x)
            yield Y[:size], R[:size]
            held_y, held_x, held = [Y[size:]], [R[size:]], held - size
    if held:
        yield np.concatenate(held_y), CsrRows.concat(held_x)


def feature_count(info: Any) -> int:
    """The columns a layout's batches have: the observed ones of a sparse layout."""
    if info.options.get("sparse"):
        return len(info.stats["columns"])
    return len(info.columns)
