"""SlimML's input data aggregator: rows → equal-size groups of similar rows → aggregated points.

SlimML §3.2.  Step 1 reduces the attributes to v dimensions (``store.svd``, Funk's incremental
SVD).  Step 2, locality-sensitive division: ``levels = ⌈log2(N / r)⌉`` median splits, one SVD
dimension per level (cycling through the v = min(levels, d) dimensions when there are fewer),
divide the N rows into 2^levels groups whose sizes differ by at most one row — equal sizes are
deliberate (§3.2: aggregated points of one granularity compare fairly), and r, the aggregation
ratio, is at most a group's rows (default 100, the paper's for SVM and NN regression).  Step 3,
aggregation (Def. 3): a group's point is the mean of its rows in the ORIGINAL feature space
(feature weights w = 1) and ŷ the mean of their labels; ‖[a, 1]‖₁ is kept beside it.

``stratify`` (loomdb's option, not the paper's) divides each label value's rows separately, so
no group mixes labels: a mixed group's ŷ sits between the classes and its point can look
non-critical while its rows are not (measured by ``loomdb bench slimml``).  Groups are stored in
a seeded random order, so the trainer's minibatch of consecutive groups is a random sample of
groups (the sampler SlimML filters, §2.2).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from loomdb.errors import LoomDataError
from loomdb.learn.scaling import Scaling
from loomdb.store import svd

RATIO = 100  # rows per group at most (the aggregation ratio; SlimML §4.2 uses 100 for SVM)


@dataclass
class Grouping:
    """The division of a layout's rows: ``members[g]`` are group g's rows, in stored order."""

    members: list[np.ndarray]
    levels: int
    dims: int
    seconds: float

    def summary(self, ratio: int, stratify: bool) -> dict[str, float | int | bool]:
        sizes = [len(m) for m in self.members]
        return {
            "groups": len(self.members),
            "ratio": ratio,
            "stratify": stratify,
            "levels": self.levels,
            "svd_dims": self.dims,
            "min_rows": min(sizes, default=0),
            "max_rows": max(sizes, default=0),
            "seconds": round(self.seconds, 6),  # generation: SVD, splits and means
        }


def levels_for(rows: int, ratio: int) -> int:
    """Median-split levels so that every group holds at most ``ratio`` rows."""
    return math.ceil(math.log2(rows / ratio)) if rows > ratio else 0


def median_splits(P: np.ndarray, rows: np.ndarray, levels: int) -> list[np.ndarray]:
    """Divide ``rows`` by ``levels`` median splits, level ℓ along column ℓ mod v of ``P``:
    2^levels groups (fewer when rows run out), sizes within one row of each other."""
    order = rows.copy()
    bounds = np.array([0, len(order)])
    for level in range(levels):
        if P.shape[1] == 0:
            break
        node = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        order = order[np.lexsort((P[order, level % P.shape[1]], node))]
        mids = bounds[:-1] + (bounds[1:] - bounds[:-1]) // 2
        bounds = np.unique(np.concatenate([bounds, mids]))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def divide(
    X: np.ndarray,
    y: np.ndarray,
    stats: dict,
    ratio: int,
    stratify: bool,
    seed: int,
) -> Grouping:
    """Steps 1–2 of the aggregator: the groups of ``X``'s rows, stored in a seeded random order."""
    started = time.perf_counter()
    parts = _label_parts(y) if stratify else [np.arange(len(y))]
    levels = max((levels_for(len(p), ratio) for p in parts), default=0)
    dims = min(levels, X.shape[1])
    z = Scaling.from_stats("zscore", stats)
    P = svd.reduce(X, z.shift, z.scale, dims, seed) if dims else np.zeros((len(y), 0))
    members = [g for p in parts for g in median_splits(P, p, levels_for(len(p), ratio))]
    order = np.random.default_rng(seed).permutation(len(members))
    return Grouping([members[i] for i in order], levels, dims, time.perf_counter() - started)


def _label_parts(y: np.ndarray) -> list[np.ndarray]:
    values = np.unique(y)
    if len(values) > max(1, len(y) // 2):
        raise LoomDataError(
            f"stratify groups rows by label, and the label has {len(values)} distinct values "
            f"in {len(y)} rows",
            hint="stratify applies to class labels; leave it out for a continuous label",
        )
    return [np.flatnonzero(y == v) for v in values]


def aggregate(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Step 3 (Def. 3): a group's point ``a`` (mean row, original space), ŷ and ‖[a, 1]‖₁."""
    a = X.mean(axis=0)
    return a, float(y.mean()), float(np.abs(a).sum() + 1.0)
