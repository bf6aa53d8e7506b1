"""scikit-learn's logistic regressions on the same objective, in memory, to a target.
No paper section.

LogisticRegression (lbfgs) with C = 1/(n·l2) and SGDClassifier(loss="log_loss", alpha=l2)
minimise exactly :mod:`loomdb.bench.objective`'s objective on z-scored rows (neither penalises
the intercept).  The tightly converged lbfgs fit is the reference every target derives from.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.bench.epochwise import Race, race
from loomdb.bench.objective import Objective
from loomdb.bench.search import Search, fewest_steps

REFERENCE_TOL = 1e-8  # lbfgs's gradient tolerance for the reference (default 1e-4)
ETA0_GRID = (0.0001, 0.0003, 0.001, 0.003, 0.01)


def lbfgs(n: int, l2: float, **kw: Any):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0 / (n * l2), solver="lbfgs", **kw)


def sgd(l2: float, **kw: Any):
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(loss="log_loss", alpha=l2, random_state=0, **kw)


def quiet_fit(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    """Fit, ignoring convergence warnings (the objective says how far it got); seconds."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        started = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - started


@dataclass
class Reference:
    value: float  # the objective of the converged model
    seconds: float  # its fit time
    iterations: int


def reference(obj: Objective) -> Reference:
    model = lbfgs(len(obj.y), obj.l2, tol=REFERENCE_TOL, max_iter=100_000)
    seconds = quiet_fit(model, obj.zscored(), obj.y)
    value = obj.of_zscored(model.coef_[0], model.intercept_[0])
    return Reference(value, seconds, int(model.n_iter_[0]))


def lbfgs_to_target(obj: Objective, target: float, cap: int, repeat: int):
    """(search over max_iter, best fit seconds of the iterations found or None)."""
    Xs = obj.zscored()

    def after(m: int) -> float:
        model = lbfgs(len(obj.y), obj.l2, tol=1e-12, max_iter=m)
        quiet_fit(model, Xs, obj.y)
        return obj.of_zscored(model.coef_[0], model.intercept_[0])

    found: Search = fewest_steps(after, target, cap)
    if found.k is None:
        return found, None
    k = found.k
    seconds = min(
        quiet_fit(lbfgs(len(obj.y), obj.l2, tol=1e-12, max_iter=k), Xs, obj.y)
        for _ in range(repeat)
    )
    return found, seconds


def sgd_race(obj: Objective, target: float, cap: int, patience: int, **params: Any) -> Race:
    """SGDClassifier one ``partial_fit`` epoch at a time (its step counter carries over)."""
    Xs, y = obj.zscored(), obj.y
    model = sgd(obj.l2, **params)
    classes = np.array([0.0, 1.0])
    return race(
        lambda: model.partial_fit(Xs, y, classes=classes),
        lambda: obj.of_zscored(model.coef_[0], model.intercept_[0]),
        target,
        cap,
        patience,
    )


def sgd_tuned(
    obj: Objective, target: float, cap: int, patience: int
) -> tuple[float, Race, dict[float, Race]]:
    """The grid's best constant eta0: fastest to the target, else the lowest objective."""
    runs = {
        eta0: sgd_race(obj, target, cap, patience, learning_rate="constant", eta0=eta0)
        for eta0 in ETA0_GRID
    }

    def rank(item: tuple[float, Race]) -> tuple[float, float]:
        r = item[1]
        return (r.seconds if r.seconds is not None else float("inf"), r.best)

    eta0, best = min(runs.items(), key=rank)
    return eta0, best, runs
