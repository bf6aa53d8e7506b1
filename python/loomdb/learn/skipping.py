"""What a train leaves out of each minibatch: SlimML, its exact oracle, and the baselines.

SlimML §3.3 (the remover, ``learn.slim``) and §4.3–4.4 (what it is compared with).  A policy
answers two questions per minibatch of a grouped layout: before reading, which of its groups
to read (``choose``: a mask over the minibatch's group ids and a weight per group); after the
margins are known, a weight per row (``weigh``; None keeps the chosen weights).  Weights
make the kept rows' gradient sum an estimate of the whole minibatch's, since the trainer always
divides by the minibatch as sampled:

* ``slimml``: Algorithm 1; removed groups are never read; weight 1 (their gradients are ≈ 0);
  with ``oracle`` every group is read, removed groups get weight 0 (the same training), and
  each minibatch's exact per-row effects tell how many removed rows were truly non-critical;
* ``random``: the same share of groups as ``fraction``, drawn at random (the number of groups
  f·g rounded up with probability its fractional part, so that the share removed is f on
  average even where a minibatch holds one group or a few); weight |B|/|B′|;
* ``coreset``: a subset of groups fixed once (lightweight coreset sampling over the groups'
  means: q ∝ ½·rows/N + ½·rows·‖ã − μ‖²/Σ, Bachem et al. 2018), 1 − ``fraction`` of them,
  weight 1/(M·q); it never changes while training;
* ``importance``: loss-proportional importance sampling — every row is read and its loss
  computed at the current parameters, then m = (1 − fraction)·|B| rows are drawn with
  replacement, p ∝ loss (mixed with 10% uniform so no row has p = 0), weight count/(m·p); its
  "removed" share is the fraction of the minibatch not drawn, 1 − m/|B|.

Each policy keeps its own per-epoch report (``report``): the share of rows removed, the time
spent deciding, and for the oracle the share of removed rows that were truly non-critical.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from loomdb.learn.losses import LOSSES
from loomdb.learn.slim import Points, Remover, effects, noncritical
from loomdb.seams import Batch

UNIFORM = 0.1  # importance sampling: the uniform share mixed into p ∝ loss
COMMON = ("sampled", "removed_rows", "seconds")


class Policy:
    """Reads every group and keeps every row; subclasses decide otherwise."""

    name = "none"

    def __init__(self, points: Points):
        self.points = points
        self.counts = dict.fromkeys(COMMON, 0.0)

    def choose(self, ids: np.ndarray, W: np.ndarray, b: np.ndarray):
        """Which of the minibatch's groups ``ids`` to read (mask) and their weights."""
        started = time.perf_counter()
        read, weights = self._choose(ids, W, b)
        rows = self.points.rows[ids]
        self._count(rows.sum(), rows[~read].sum(), started)
        return read, weights

    def _choose(self, ids, W, b) -> tuple[np.ndarray, np.ndarray | None]:
        return np.ones(len(ids), dtype=bool), None

    def weigh(self, batch: Batch, Z, T, sw, W, b) -> np.ndarray | None:
        return batch.weights

    def _count(self, sampled: float, removed: float, started: float, **more: float) -> None:
        self.counts["sampled"] += float(sampled)
        self.counts["removed_rows"] += float(removed)
        self.counts["seconds"] += time.perf_counter() - started
        for key, value in more.items():
            self.counts[key] = self.counts.get(key, 0.0) + float(value)

    def report(self) -> dict[str, Any]:
        """This epoch's numbers (then reset for the next)."""
        c, self.counts = self.counts, dict.fromkeys(COMMON, 0.0)
        out: dict[str, Any] = {
            "skip": self.name,
            "removed": c["removed_rows"] / c["sampled"] if c["sampled"] else 0.0,
            "skip_seconds": round(c["seconds"], 6),
        }
        if c.get("oracle_removed"):
            out["noncritical_share"] = c["oracle_hits"] / c["oracle_removed"]
        if c.get("oracle_rows"):
            out["noncritical_rows"] = c["oracle_noncritical"] / c["oracle_rows"]
        return out


class SlimML(Policy):
    name = "slimml"

    def __init__(self, points: Points, remover: Remover, oracle: bool = False):
        super().__init__(points)
        self.remover, self.oracle = remover, oracle

    def _choose(self, ids, W, b):
        return ~self.remover.removed(ids, W, b), None

    def choose(self, ids, W, b):
        read, weights = super().choose(ids, W, b)
        if self.oracle:  # read them all, train on the same rows as without the oracle
            return np.ones(len(ids), dtype=bool), read.astype(np.float64)
        return read, weights

    def weigh(self, batch, Z, T, sw, W, b):
        if not self.oracle:
            return batch.weights
        assert batch.weights is not None
        removed = batch.weights == 0.0
        r = self.remover
        X = batch.X if isinstance(batch.X, np.ndarray) else batch.X.toarray()
        Xs = self.points.scaling.apply(X)
        exact = noncritical(effects(r.kind, Xs, T, sw, W, b, r.fit_intercept, r.l2), r.epsilon)
        self._count(
            0,
            0,
            time.perf_counter(),
            oracle_removed=removed.sum(),
            oracle_hits=(removed & exact).sum(),
            oracle_rows=len(exact),
            oracle_noncritical=exact.sum(),
        )
        return batch.weights


class RandomGroups(Policy):
    name = "random"

    def __init__(self, points: Points, fraction: float, seed: int):
        super().__init__(points)
        self.fraction, self.rng = fraction, np.random.default_rng(seed)

    def _choose(self, ids, W, b):
        read = np.zeros(len(ids), dtype=bool)
        share = self.fraction * len(ids)  # groups to drop: rounded at random, so that a
        drop = int(share)  # minibatch of few groups drops the share asked on average
        if share > drop and self.rng.random() < share - drop:
            drop += 1
        keep = len(ids) - drop
        read[self.rng.choice(len(ids), size=keep, replace=False)] = True
        rows = self.points.rows[ids]
        scale = rows.sum() / max(rows[read].sum(), 1)
        return read, np.full(len(ids), float(scale))


class Coreset(Policy):
    name = "coreset"

    def __init__(self, points: Points, fraction: float, seed: int):
        super().__init__(points)
        rows = points.rows.astype(np.float64)
        centre = (points.means * rows[:, None]).sum(axis=0) / rows.sum()
        spread = rows * ((points.means - centre) ** 2).sum(axis=1)
        q = 0.5 * rows / rows.sum()
        q = q + (0.5 * spread / spread.sum() if spread.sum() > 0 else 0.5 * rows / rows.sum())
        m = max(1, len(rows) - int(round(fraction * len(rows))))
        chosen = np.random.default_rng(seed).choice(len(rows), size=m, replace=False, p=q)
        self.weight = np.zeros(len(rows))
        self.weight[chosen] = 1.0 / (m * q[chosen])

    def _choose(self, ids, W, b):
        return self.weight[ids] > 0, self.weight[ids]


class Importance(Policy):
    name = "importance"

    def __init__(self, points: Points, fraction: float, seed: int, kind: str):
        super().__init__(points)
        self.fraction, self.rng, self.kind = fraction, np.random.default_rng(seed), kind

    def weigh(self, batch, Z, T, sw, W, b):
        started = time.perf_counter()
        n = batch.rows
        loss = (LOSSES[self.kind].value(Z, T) * sw[:, None]).sum(axis=1)
        total = loss.sum()
        p = np.full(n, 1.0 / n) if total <= 0 else (1 - UNIFORM) * loss / total + UNIFORM / n
        m = max(1, n - int(round(self.fraction * n)))
        counts = np.bincount(self.rng.choice(n, size=m, p=p), minlength=n)
        self._count(0, n - m, started)  # m draws stand for the minibatch's n rows
        return counts / (m * p)


POLICIES = ("slimml", "random", "coreset", "importance")
CORESET_FRACTION = 0.75  # the coreset baseline keeps a fixed 25% of the groups by default


def make(
    name: str,
    points: Points,
    kind: str,
    *,
    epsilon: float,
    fraction: float | None,
    fit_intercept: bool,
    include_l2: float,
    oracle: bool,
    seed: int,
) -> Policy:
    """The policy ``name`` (one of :data:`POLICIES`) over a layout's aggregated points."""
    if name == "slimml":
        return SlimML(points, Remover(points, kind, epsilon, fit_intercept, include_l2), oracle)
    if name == "coreset":
        return Coreset(points, CORESET_FRACTION if fraction is None else fraction, seed)
    assert fraction is not None
    if name == "random":
        return RandomGroups(points, fraction, seed)
    return Importance(points, fraction, seed, kind)
