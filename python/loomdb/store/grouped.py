"""A grouped (SlimML) layout: rows stored group by group, each group's aggregated point beside it.

SlimML §3.2 (the aggregator, ``store.groups``) made physical, which is what a database can do
that Spark could not: a group is one stored unit (a ``batch`` of the storage table, every part
of every format), so a group the remover drops is never returned by the engine nor decoded.
Its aggregated point is stored in the same table as part −1 of the group — the groups table
``(id, rows, mean vector, ŷ, ‖[a, 1]‖₁)``, with the stored bytes of the group's parts — and is
read once per train.  The trainer's minibatch is ``groups_per_batch`` consecutive groups
(⌈``batch_size`` / mean group rows⌉ rounded, at least one); groups are stored in a random order.

The layout holds the source's rows in memory while it divides them (N·(d + 1) doubles): the
division needs every row before the first group can be written.  Generation time (the SVD, the
splits and the means) is recorded in the index's statistics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.errors import LoomDataError, LoomFormatError, LoomOptionError
from loomdb.options import Boolean, Interval, Option, Options
from loomdb.seams import Aggregates, IndexInfo
from loomdb.store import groups
from loomdb.store.formats.base import Format
from loomdb.store.source import SourceProfile
from loomdb.store.storage import Stored, damaged

OPTIONS = Options(
    "layout",
    Option(
        "slimml",
        Boolean(),
        False,
        "lay rows out in groups of similar rows with their aggregated points (SlimML), so "
        'training can skip groups ({"skip": "slimml"})',
    ),
    Option(
        "aggregation_ratio",
        Interval(True, 2, 1_000_000),
        groups.RATIO,
        "rows per SlimML group at most (the paper's aggregation ratio)",
    ),
    Option(
        "stratify",
        Boolean(),
        False,
        "SlimML groups never mix labels (classification labels only)",
    ),
)
GROUP_OPTIONS = ("aggregation_ratio", "stratify")
GROUPED_FORMATS = ("dense", "toc", "mlweaving")


def check(opts: dict[str, Any]) -> None:
    """Refuse grouping options on a layout that is not grouped, and grouping on a format whose
    stored unit is not a group of rows (honour or refuse)."""
    if opts.get("slimml"):
        if opts["format"] not in GROUPED_FORMATS:
            raise LoomOptionError(
                f"the {opts['format']} format cannot be laid out in SlimML groups",
                hint=f"use slimml with format {', '.join(GROUPED_FORMATS)}",
            )
        return
    for key in GROUP_OPTIONS:
        if opts.get(key) != OPTIONS.by_name[key].default:
            raise LoomOptionError(
                f"'{key}' applies to SlimML layouts only",
                hint="add slimml = true to group the rows, or leave it out",
            )


def groups_per_batch(info: IndexInfo) -> int:
    """How many consecutive groups make one of the trainer's minibatches (1: not grouped)."""
    return int(info.stats.get("slimml", {}).get("groups_per_batch", 1))


def encoded(
    chunks: Iterator[np.ndarray],
    prof: SourceProfile,
    fmt: Format,
    opts: dict[str, Any],
    info: IndexInfo,
    progress: Any,
) -> Iterator[tuple[int, np.ndarray, list[bytes], bytes]]:
    """``(group, rows, parts, aggregated point)`` of every group of the shuffled source."""
    rows = np.concatenate(list(chunks)) if prof.rows else np.zeros((0, len(prof.features) + 1))
    if not np.isfinite(rows).all():
        raise LoomDataError(f"{prof.source} holds NaN or infinite values")
    X, y = rows[:, :-1], rows[:, -1]
    if opts["stratify"] and not prof.label_counts:
        raise LoomOptionError(
            f"stratify needs a class label; '{prof.label}' has too many distinct values",
            hint="leave stratify out for a continuous label",
        )
    progress.phase(f"dividing {len(y):,} rows into SlimML groups (SVD, median splits)")
    grouping = groups.divide(
        X, y, prof.stats, opts["aggregation_ratio"], opts["stratify"], opts["seed"]
    )
    encode = fmt.encoder(prof.stats, {**opts, "feature_names": prof.features})
    means = 0.0
    done = 0
    for number, members in enumerate(grouping.members):
        Xg, yg = X[members], y[members]
        parts = [fmt.encode_labels(yg), *encode(Xg)]
        started = time.perf_counter()
        point = summary_payload(*groups.aggregate(Xg, yg), [len(p) for p in parts])
        means += time.perf_counter() - started
        yield number, Xg, parts, point
        done += len(members)
        progress.rows(done)
    grouping.seconds += means
    summary = grouping.summary(opts["aggregation_ratio"], opts["stratify"])
    size = len(y) / max(len(grouping.members), 1)
    summary["groups_per_batch"] = max(1, int(round(opts["batch_size"] / max(size, 1.0))))
    info.stats["slimml"] = summary


def summary_payload(a: np.ndarray, label: float, norm1: float, part_bytes: list[int]) -> bytes:
    """A group's aggregated point as stored: ``[ŷ, ‖[a, 1]‖₁, a₁ … a_d, bytes₀ … bytes_P]``."""
    row = np.concatenate([[label, norm1], a, np.asarray(part_bytes, dtype=np.float64)])
    return dense.encode(row.reshape(1, -1))


def aggregates(stored: list[Stored], n_features: int, index: str) -> Aggregates:
    """The groups table of a grouped layout, from its checked part −1 rows."""
    try:
        table = np.vstack([dense.decode(s.parts[0]) for s in stored]) if stored else None
    except (LoomFormatError, ValueError):
        table = None
    if table is None or table.shape[1] < n_features + 3:
        raise damaged(index, "its aggregated points cannot be read")
    return Aggregates(
        rows=np.array([s.rows for s in stored], dtype=np.int64),
        means=table[:, 2 : 2 + n_features],
        labels=table[:, 0],
        norm1=table[:, 1],
        part_bytes=table[:, 2 + n_features :].astype(np.int64),
    )
