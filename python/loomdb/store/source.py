"""Profile a source before laying it out: resolve columns, count NULLs, gather statistics.

Everything is computed in SQL (one pass for counts and per-column min/max/mean/std, one for the
label's distinct values) before a single row is written, so bad input fails early and cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.errors import LoomDataError, LoomNotFoundError, LoomOptionError
from loomdb.store.db import Database
from loomdb.store.names import quote_ident, relation

MAX_CLASSES = 1000


@dataclass
class SourceProfile:
    source: str
    relation: str
    label: str
    features: list[str]
    rows: int
    skipped: int
    stats: dict[str, np.ndarray]
    label_counts: dict[float, int] = field(default_factory=dict)
    where: str | None = None

    @property
    def columns(self) -> list[str]:
        """Quoted feature columns followed by the label, as read_matrix takes them."""
        return [quote_ident(c) for c in self.features] + [quote_ident(self.label)]

    def stats_json(self) -> dict[str, list[float]]:
        return {k: v.tolist() for k, v in self.stats.items()}


def _resolve(name: str, available: dict[str, str], what: str, source: str) -> str:
    if name in available:
        return name
    folded = [c for c in available if c.lower() == str(name).lower()]
    if len(folded) == 1:
        return folded[0]
    raise LoomNotFoundError(
        f"{what} '{name}' is not a column of {source}",
        hint=f"columns: {', '.join(list(available)[:20])}",
    )


STATS_PER_QUERY = 400  # 4 aggregates each: PostgreSQL allows 1664 entries in a target list


def _column_stats(db: Database, rel: str, cols: list[str], where: str | None) -> np.ndarray:
    """(columns, 4) array of min, max, mean and population std, in SQL."""
    double = db.type("double")
    out: list[float] = []
    for start in range(0, len(cols), STATS_PER_QUERY):
        aggs = ", ".join(
            f"{fn}(CAST({c} AS {double})) AS s{start + i}_{fn}"
            for i, c in enumerate(cols[start : start + STATS_PER_QUERY])
            for fn in ("min", "max", "avg", "stddev_pop")
        )
        row = db.query(f"SELECT {aggs} FROM {rel}" + (f" WHERE {where}" if where else ""))[0]
        out.extend(np.nan if v is None else float(v) for v in row)
    return np.array(out).reshape(-1, 4)


def profile(
    db: Database,
    source: str,
    label: str,
    features: list[str] | None,
    nulls: str,
) -> SourceProfile:
    rel = relation(source, db.dialect)
    available = dict(db.columns(rel))
    if not isinstance(label, str) or not label:
        raise LoomOptionError("label must name the column to learn")
    label = _resolve(label, available, "label", source)
    if available[label] != "numeric":
        raise LoomDataError(
            f"label column '{label}' is {available[label]}, not numeric",
            hint="cast it to a number in a SELECT source, e.g. (y = 'yes')::int",
        )
    if features is None:
        features = [c for c, kind in available.items() if kind == "numeric" and c != label]
    else:
        features = [_resolve(f, available, "feature", source) for f in features]
        bad = [f for f in features if available[f] != "numeric"]
        if bad:
            raise LoomDataError(
                f"feature column(s) {', '.join(bad)} of {source} are not numeric",
                hint="list only numeric columns in 'features', or cast them in a SELECT source",
            )
    if not features:
        raise LoomDataError(f"{source} has no numeric feature columns besides '{label}'")
    if label in features:
        raise LoomOptionError(f"'{label}' is the label; it cannot also be a feature")

    cols = [quote_ident(c) for c in [*features, label]]
    any_null = " OR ".join(f"{c} IS NULL" for c in cols)
    total, with_nulls = db.query(
        f"SELECT count(*) AS n, count(*) FILTER (WHERE {any_null}) AS n_null FROM {rel}"
    )[0]
    if total == 0:
        raise LoomDataError(f"{source} is empty: there is nothing to learn from")
    if with_nulls and nulls == "error":
        raise LoomDataError(
            f"{with_nulls} of {total} rows of {source} have NULL features or labels",
            hint='pass {"nulls": "skip"} to skip (and count) them, or fill them in first',
        )
    where = f"NOT ({any_null})" if with_nulls else None
    if total == with_nulls:
        raise LoomDataError(f"every row of {source} has a NULL feature or label")

    values = _column_stats(db, rel, cols, where)
    double = db.type("double")
    bad_cols = [
        n
        for n, (lo, hi) in zip([*features, label], values[:, :2])
        if not (np.isfinite(lo) and np.isfinite(hi))
    ]
    if bad_cols:
        raise LoomDataError(
            f"column(s) {', '.join(bad_cols)} of {source} hold NaN or infinite values",
            hint="filter them out in a SELECT source, e.g. WHERE x = x AND abs(x) < 'Infinity'",
        )
    stats = {
        "min": values[:-1, 0],
        "max": values[:-1, 1],
        "mean": values[:-1, 2],
        "std": np.nan_to_num(values[:-1, 3]),
    }
    lab = quote_ident(label)
    rows = db.query(
        f"SELECT CAST({lab} AS {double}) AS v, count(*) AS n FROM {rel}"
        + (f" WHERE {where}" if where else "")
        + f" GROUP BY 1 ORDER BY 1 LIMIT {MAX_CLASSES + 1}"
    )
    counts = {float(v): int(n) for v, n in rows} if len(rows) <= MAX_CLASSES else {}
    return SourceProfile(
        source=source,
        relation=rel,
        label=label,
        features=features,
        rows=int(total - with_nulls),
        skipped=int(with_nulls),
        stats=stats,
        label_counts=counts,
        where=where,
    )


def profile_from_index(info: dict[str, Any]) -> SourceProfile:
    """The profile recorded when an index was built (no query needed)."""
    stats = {k: np.asarray(v, dtype=np.float64) for k, v in info["stats"].items()}
    return SourceProfile(
        source=info["source"],
        relation="",
        label=info["label"],
        features=list(info["columns"]),
        rows=int(info["rows"]),
        skipped=int(info["skipped"]),
        stats=stats,
        label_counts={float(k): int(v) for k, v in (info["label_counts"] or {}).items()},
    )


def classes(profile: SourceProfile) -> list[float]:
    """The sorted classes of a classification source; errors when it cannot be one."""
    if not profile.label_counts:
        raise LoomDataError(
            f"label '{profile.label}' has more than {MAX_CLASSES} distinct values",
            hint='train a regression with {"model": "linear"}',
        )
    if len(profile.label_counts) < 2:
        only = next(iter(profile.label_counts))
        raise LoomDataError(
            f"label '{profile.label}' has a single class ({only:g}): a classifier needs two",
            hint="check the source's filter, or train a linear model",
        )
    return sorted(profile.label_counts)
