"""The ``preprocess`` layout option and the statistics an encoding is made of, in SQL.

No paper section.  Text feature columns are one-hot encoded without being asked (as BigQuery
ML does for STRING columns); per-column options override::

    {"preprocess": {"city": {"top_k": 20}, "age": {"impute": "median"}, "x": {"impute": 0},
                    "zip": {"encode": "hash", "buckets": 64}}}

``encode`` is ``"onehot"`` (the default for text) or ``"hash"`` (the feature hashing trick:
``buckets`` features, each value in the bucket of its MD5, no statistics needed — for columns
of many or unbounded values; ``store/encoding.py``).  ``top_k`` (one-hot only) keeps a text
column's most frequent values (ties broken by the value, in Python's code-point order, so both
engines keep the same ones) and folds the rest into ``<other>``; ``buckets`` (hash only, default
32) is the number of hashed features;
``impute`` fills a number's NULLs with its mean or median over the training rows (NULLs left
out, as scikit-learn's ``SimpleImputer`` does) or a constant, instead of the ``nulls`` rule.
The statistics are computed once, when the source is profiled, and recorded with the index
and the model (``store/encoding.py``), never recomputed at predict time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loomdb.errors import LoomDataError, LoomOptionError
from loomdb.options import Constraint
from loomdb.store.db import Database
from loomdb.store.encoding import Encoded
from loomdb.store.names import builtin, quote_ident
from loomdb.store.settle import column_stats

TOP_K = 100  # categories kept per text column unless top_k says otherwise
MAX_TOP_K = 1000
BUCKETS = 32  # hashed features per text column unless buckets says otherwise
MAX_BUCKETS = 1 << 16
ENCODE = ("onehot", "hash")
IMPUTE = ("mean", "median")
KEYS = {"top_k", "impute", "encode", "buckets"}


def _whole(value: Any, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= high


class PreprocessOption(Constraint):
    """``{column: {"encode": "onehot" | "hash", "top_k": n, "buckets": n,
    "impute": "mean" | "median" | number}}`` (which key fits which column: :func:`plan`)."""

    def check(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for spec in value.values():
            if not isinstance(spec, dict) or set(spec) - KEYS:
                return False
            if not _whole(spec.get("top_k", TOP_K), MAX_TOP_K):
                return False
            if not _whole(spec.get("buckets", BUCKETS), MAX_BUCKETS):
                return False
            if spec.get("encode", ENCODE[0]) not in ENCODE:
                return False
            fill = spec.get("impute", "mean")
            if not (
                fill in IMPUTE or (isinstance(fill, int | float) and not isinstance(fill, bool))
            ):
                return False
        return True

    def describe(self) -> str:
        return (
            'an object {"column": {"encode": "onehot" | "hash", "top_k": n, "buckets": n, '
            '"impute": "mean" | "median" | number}} (encode for text columns, with top_k from 1 '
            f"to {MAX_TOP_K} for onehot or buckets from 1 to {MAX_BUCKETS} for hash; impute for "
            "numeric ones)"
        )


def wanted(kinds: dict[str, str], features: Sequence[str], spec: dict[str, Any] | None) -> bool:
    """Whether the features need an encoding (a text column, or options asked for)."""
    return bool(spec) or any(kinds[c] == "text" for c in features)


def _filtered(where: str | None, condition: str) -> str:
    return f" WHERE {where} AND {condition}" if where else f" WHERE {condition}"


def check_not_empty(db: Database, rel: str, source: str, columns: Sequence[str]) -> None:
    """Refuse a feature column that holds only NULLs: nothing could be learnt from it.  A
    source of no rows is left to ``source.count_rows``, which says that it is empty."""
    count = builtin("count", db.dialect)  # count("any"): never a role's count(the column type)
    counts = ", ".join(f"{count}({quote_ident(c)}) AS n{i}" for i, c in enumerate(columns))
    rows, *row = db.query(f"SELECT {count}(*) AS n, {counts} FROM {rel}")[0]
    if not rows:
        return
    empty = [c for c, n in zip(columns, row) if not n]
    if empty:
        raise LoomDataError(
            f"feature column(s) {', '.join(empty)} of {source} hold only NULLs",
            hint="leave them out of 'features', or fill them in first",
        )


def plan(
    db: Database,
    rel: str,
    source: str,
    features: Sequence[str],
    kinds: dict[str, str],
    spec: dict[str, Any] | None,
    where: str | None,
) -> list[Encoded]:
    """Each feature column's encoding, from the training rows' statistics (``where``)."""
    spec = spec or {}
    unknown = [c for c in spec if c not in features]
    if unknown:
        raise LoomOptionError(
            f"'preprocess' names {', '.join(unknown)}, not feature column(s) of {source}",
            hint=f"features: {', '.join(features[:20])}",
        )
    bad = [c for c in features if kinds[c] not in ("numeric", "boolean", "text")]
    if bad:
        raise LoomDataError(
            f"feature column(s) {', '.join(bad)} of {source} are not numeric or text",
            hint="cast them to a number or to text in a SELECT source",
        )
    return [_column(db, rel, c, kinds[c], spec.get(c, {}), where) for c in features]


def _column(
    db: Database, rel: str, column: str, kind: str, spec: dict[str, Any], where: str | None
) -> Encoded:
    if kind == "text":
        if "impute" in spec:
            raise LoomOptionError(
                f"'impute' applies to numeric columns; '{column}' is text",
                hint="a NULL text value is encoded as no category (all its indicators 0)",
            )
        if _encode(column, spec) == "hash":
            return Encoded(column, "text", buckets=int(spec.get("buckets", BUCKETS)))
        return _categories(db, rel, column, int(spec.get("top_k", TOP_K)), where)
    for key in ("top_k", "encode", "buckets"):
        if key in spec:
            raise LoomOptionError(
                f"'{key}' applies to text columns; '{column}' is {kind}",
                hint=f"cast it to text in a SELECT source to encode it: CAST({column} AS TEXT)",
            )
    fill = spec.get("impute")
    if fill is None:
        return Encoded(column, kind)
    if not isinstance(fill, str):
        return Encoded(column, kind, impute=float(fill))
    value = Encoded(column, kind).sql(db.type("double"), db.dialect)[0]
    if fill == "mean":  # settled, as the column's own statistics are: the same in every run
        got = column_stats(db, rel, [value], where)[0, 2]
    else:
        double = db.type("double")
        median = (  # a numeric 0.5 would need a cast to pg_catalog's percentile_cont(double)
            f"SELECT {builtin('percentile_cont', db.dialect)}(CAST(0.5 AS {double})) "
            f"WITHIN GROUP (ORDER BY {value}) FROM {rel}"
        )
        (got,) = db.query(median + (f" WHERE {where}" if where else ""))[0]
    if got is None or got != got:  # NULL (PostgreSQL, DuckDB) or NaN (no values: the mean)
        raise LoomDataError(
            f"feature column '{column}' has no values to take the {fill} of",
            hint="every training row holds NULL there: leave it out of 'features'",
        )
    return Encoded(column, kind, impute=float(got))


def _encode(column: str, spec: dict[str, Any]) -> str:
    """A text column's ``encode``, refusing the other encoding's parameter."""
    encode = str(spec.get("encode", "onehot"))
    wrong = "top_k" if encode == "hash" else "buckets"
    if wrong in spec:
        right = "onehot" if encode == "hash" else "hash"
        raise LoomOptionError(
            f"'{wrong}' applies to \"encode\": \"{right}\"; column '{column}' is encoded "
            f'with "{encode}"',
            hint=f'give {{"encode": "{right}", "{wrong}": …}}, or leave \'{wrong}\' out',
        )
    return encode


def _categories(db: Database, rel: str, column: str, top_k: int, where: str | None) -> Encoded:
    value = f"CAST({quote_ident(column)} AS TEXT)"
    rows = db.query(
        f"SELECT {value} AS v, count(*) AS n FROM {rel}"
        + _filtered(where, f"{quote_ident(column)} IS NOT NULL")
        + " GROUP BY 1"
    )
    ranked = sorted(((str(v), int(n)) for v, n in rows), key=lambda r: (-r[1], r[0]))
    kept = sorted(ranked[:top_k])
    return Encoded(
        column,
        "text",
        tuple(v for v, _ in kept),
        other=len(ranked) > top_k,
        counts=tuple(n for _, n in kept),
    )
