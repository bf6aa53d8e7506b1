"""SlimML's input data remover: effects, the ε cut, and the exact per-row oracle.

SlimML §2.2 and §3.3.  A point's effect on the update (Def. 1, Eqn 3) is the L1 norm of its
gradient at the current parameters.  For a GLM with margin z = w·x̃ + b over standardised rows
x̃ = (x − shift)∘scale the gradient is ∂ℓ/∂z·[x̃, 1], so

    e = sw · Σ_c |∂ℓ/∂z_c| · ‖[x̃, 1]‖₁  —  linear |z − y|, logistic |σ(z) − y|,
        hinge |t| if t·z < 1 else 0 (t = 2y − 1), sw the class weight;

the 1 is the intercept's gradient (left out without one).  The non-critical points (Def. 2,
Eqn 4) are the smallest effects whose cumulative share of the total is ≤ ε (default 0.01);
when every effect is 0 the whole set is (Eqn 4 multiplied out, Σ_{i≤n} e_i ≤ ε·Σ_i e_i,
holds for every n; Algorithm 1 line 7 divides, and 0/0 ≤ ε would be false, removing nothing —
but under the hinge loss most minibatches' points sit beyond the margin once training has
converged, and keeping them would remove nothing exactly where SlimML should remove most:
measured on a separable task, 0% removed instead of ~40%, with 95% of the rows truly
non-critical).  Algorithm 1 evaluates aggregated points (a
group's mean row ã, its mean target) and removes their groups' rows all or nothing.

Choices the paper leaves open, decided here:

* ranked within the minibatch (Algorithm 1 ranks the aggregated points of the worker's part
  of the sampled minibatch, §2.2 "only the points used at each iteration");
* the regulariser's gradient is left out of the effect (``include_l2`` adds l2·W to each
  point's gradient before the norm: the same for every point, it only shrinks the cut);
* a group's target is the mean of its rows' targets — the fraction of positives for two
  classes (its class weight the matching mix); one-vs-rest needs groups of one label
  (a stratified layout), where the mean is exact;
* the trainer divides the kept rows' gradient sum by the minibatch as sampled, |B|, not by
  |B′|: the removed rows' gradients are small by construction, so the sum over the rest
  estimates the whole sum (dividing by |B′| would enlarge the step by 1/(1 − removed)).

The oracle computes the same effects for every row of the minibatch at the same parameters
(what Def. 2 would remove with exact effects); ``loomdb bench slimml`` and the tests use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.learn.losses import LOSSES
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.seams import Aggregates

EPSILON = 0.01


def noncritical(effects: np.ndarray, epsilon: float) -> np.ndarray:
    """Def. 2: a mask of the points whose ascending cumulative effect is ≤ ε of the total."""
    e = np.asarray(effects, dtype=np.float64)
    out = np.zeros(len(e), dtype=bool)
    if not len(e):
        return out
    order = np.argsort(e, kind="stable")
    cumulative = np.cumsum(e[order])
    total = cumulative[-1]
    if total <= 0.0:  # no effect at all: Eqn 4 holds for every prefix
        out[:] = True
        return out
    out[order[cumulative <= epsilon * total]] = True
    return out


def effects(
    kind: str,
    Xs: np.ndarray,
    T: np.ndarray,
    sw: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    fit_intercept: bool,
    l2: float = 0.0,
) -> np.ndarray:
    """Eqn 3 for standardised rows ``Xs`` (or aggregated points) with targets ``T``."""
    G = LOSSES[kind].derivative(Xs @ W + b, T) * sw[:, None]
    bias = np.abs(G).sum(axis=1) if fit_intercept else 0.0
    if l2:
        return np.abs(Xs[:, :, None] * G[:, None, :] + l2 * W[None, :, :]).sum(axis=(1, 2)) + bias
    return np.abs(G).sum(axis=1) * np.abs(Xs).sum(axis=1) + bias


@dataclass
class Points:
    """A train's view of the aggregated points: standardised means, targets, class weights."""

    means: np.ndarray  # (G, d) standardised
    targets: np.ndarray  # (G, k)
    weights: np.ndarray  # (G,)
    rows: np.ndarray  # (G,)
    scaling: Scaling  # the train's standardisation (the oracle applies it to rows)

    @classmethod
    def of(cls, agg: Aggregates, problem: Problem, raw: Scaling, targets: bool = True) -> Points:
        """``raw`` standardises original rows (the means); ``problem.scaling`` the values a
        batch holds (they differ where a format stores mapped values: mlweaving).  Targets
        are needed by the remover only (the baselines do without)."""
        if targets:
            T, sw = group_targets(agg.labels, problem)
        else:
            T, sw = np.zeros((len(agg.rows), problem.k)), np.ones(len(agg.rows))
        return cls(raw.apply(agg.means), T, sw, agg.rows, problem.scaling)


def group_targets(labels: np.ndarray, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Mean targets (and class weights) of groups with mean labels ``labels``."""
    if not problem.classes:
        return labels.reshape(-1, 1).astype(np.float64), np.ones(len(labels))
    classes = np.asarray(problem.classes, dtype=np.float64)
    if problem.k == 1:
        low, high = classes
        share = np.clip((labels - low) / (high - low), 0.0, 1.0)
        cw = problem.class_weights if problem.class_weights is not None else np.ones(2)
        return share.reshape(-1, 1), cw[0] + (cw[1] - cw[0]) * share
    if not np.isin(labels, classes).all():
        raise LoomOptionError(
            "SlimML on a one-vs-rest model needs groups of one label each",
            hint="rebuild the index with stratify = true",
        )
    return problem.targets(labels)


class Remover:
    """Algorithm 1 over a minibatch's groups at the current parameters."""

    def __init__(
        self,
        points: Points,
        kind: str,
        epsilon: float,
        fit_intercept: bool,
        include_l2: float = 0.0,
    ):
        self.points, self.kind, self.epsilon = points, kind, epsilon
        self.fit_intercept, self.l2 = fit_intercept, include_l2

    def effects(self, ids: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        p = self.points
        return effects(
            self.kind,
            p.means[ids],
            p.targets[ids],
            p.weights[ids],
            W,
            b,
            self.fit_intercept,
            self.l2,
        )

    def removed(self, ids: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Which of the minibatch's groups ``ids`` are non-critical (removed before reading)."""
        return noncritical(self.effects(ids, W, b), self.epsilon)


def oracle(
    kind: str,
    Xs: np.ndarray,
    T: np.ndarray,
    sw: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    fit_intercept: bool,
    epsilon: float,
    l2: float = 0.0,
) -> np.ndarray:
    """The exact non-critical rows of a minibatch (Def. 2 over per-row effects)."""
    return noncritical(effects(kind, Xs, T, sw, W, b, fit_intercept, l2), epsilon)
