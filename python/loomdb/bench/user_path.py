"""What a user would do instead of ``loom_train``: fetch the table into numpy from the same
engine, z-score it (StandardScaler) and fit scikit-learn, timed end to end.
No paper section."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine
from loomdb.bench.fetch import duckdb_fetchnumpy, pg_copy_binary, pg_fetchall
from loomdb.bench.objective import Objective, to_raw
from loomdb.bench.peers import lbfgs, quiet_fit, sgd
from loomdb.bench.repeat import best_of

Fetch = Callable[[Any, str, str], tuple[np.ndarray, np.ndarray]]

FETCHES: dict[str, list[tuple[str, Fetch]]] = {
    "duckdb": [("fetchnumpy", duckdb_fetchnumpy)],
    "postgres": [("fetchall", pg_fetchall), ("COPY binary", pg_copy_binary)],
}


def fits(l2: float) -> list[tuple[str, Callable[[int], Any]]]:
    """The fits a user would reach for, on the same objective (C = 1/(n·l2), alpha = l2)."""
    return [
        ("LogisticRegression lbfgs", lambda n: lbfgs(n, l2, max_iter=1000)),
        ("SGDClassifier", lambda n: sgd(l2)),
    ]


@dataclass
class UserRun:
    fetch_s: float
    fit_s: float  # StandardScaler + fit
    total_s: float
    passes: int  # scikit-learn's n_iter_
    objective: float


def fetch_and_fit(
    engine: BenchEngine,
    fetch: Fetch,
    make: Callable[[int], Any],
    table: str,
    label: str,
    obj: Objective,
) -> UserRun:
    from sklearn.preprocessing import StandardScaler

    started = time.perf_counter()
    X, y = fetch(engine.raw, table, label)
    fetched = time.perf_counter()
    scaler = StandardScaler()
    Xs = scaler.fit_transform(X)
    model = make(len(y))
    quiet_fit(model, Xs, y)
    done = time.perf_counter()
    w, b = to_raw(model.coef_[0], model.intercept_[0], scaler.mean_, scaler.scale_)
    passes = int(np.max(model.n_iter_))
    return UserRun(fetched - started, done - fetched, done - started, passes, obj(w, b))


def best_fetch_and_fit(*args: Any, repeat: int) -> UserRun:
    return best_of(lambda: fetch_and_fit(*args), lambda r: r.total_s, repeat)
