"""The pieces ``loomdb bench slimml`` is made of: the tasks, one timed index build, one timed train
and the test accuracy of its model.  No paper section (the suite's docstring says what it
measures).

Tasks are split 80/20 with a fixed seed; accuracy is measured on the held-out 20% from the
stored model (its coefficients and standardisation), a linear model's value thresholded at ½.
The synthetic task: 1,000,000 rows of 32 standard normal features, label 1 where x·β + 0.5·ε > 0
(β standard normal, ε noise): a large, redundant table where most rows are far from the
boundary, as in the paper's sensor and earth-science sets.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine
from loomdb.learn.model import LinearModel

SYNTHETIC_ROWS = 1_000_000
SYNTHETIC_FEATURES = 32


@dataclass
class Task:
    name: str
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def _split(name: str, X: np.ndarray, y: np.ndarray) -> Task:
    order = np.random.default_rng(7).permutation(len(y))
    cut = int(0.8 * len(y))
    train, test = order[:cut], order[cut:]
    return Task(name, X[train], y[train], X[test], y[test])


def tasks(quick: bool) -> list[Task]:
    """a9a.t and MNIST (digit < 5) when the shared datasets are there, and the synthetic task."""
    from loomdb.datasets import load_a9a, load_mnist, shared_datasets

    out = []
    folder = shared_datasets()
    if folder is not None:
        Xa, ya = load_a9a(folder)
        Xm, ym = load_mnist(folder, limit=3000 if quick else None)
        if quick:
            Xa, ya = Xa[:4000], ya[:4000]
        out += [_split("a9a.t", Xa, (ya > 0).astype(float))]
        out += [_split("mnist<5", Xm, (ym < 5).astype(float))]
    rng = np.random.default_rng(0)
    n = 25_000 if quick else SYNTHETIC_ROWS
    X = rng.normal(size=(n, SYNTHETIC_FEATURES))
    y = (X @ rng.normal(size=SYNTHETIC_FEATURES) + 0.5 * rng.normal(size=n) > 0).astype(float)
    out.append(_split(f"synthetic {n // 1000:,}k", X, y))
    return out


def build(engine: BenchEngine, name: str, table: str, options: dict[str, Any]) -> dict[str, Any]:
    """``loom_create_index`` timed end to end; its summary with ``seconds`` (wall clock)."""
    opts = json.dumps(options)
    started = time.perf_counter()
    info = json.loads(
        engine.scalar(f"SELECT {engine.loom}loom_create_index('{name}', '{table}', 'y', '{opts}')")
    )
    info["wall_s"] = time.perf_counter() - started
    return info


@dataclass
class Trained:
    """One train: its epochs, wall clock, test accuracy and per-epoch history."""

    epochs: int
    seconds: float
    accuracy: float
    history: list[dict[str, Any]] = field(default_factory=list)

    def mean(self, key: str) -> float:
        values = [h.get(key, 0) or 0 for h in self.history if "epoch" in h]
        return float(np.mean(values)) if values else float("nan")


def train(engine: BenchEngine, task: Task, index: str, options: dict[str, Any]) -> Trained:
    """``loom_train`` on ``index`` timed end to end, then its accuracy on the test rows."""
    opts = json.dumps({"index": index, "tol": 0, "replace": True, "progress": False, **options})
    started = time.perf_counter()
    engine.scalar(f"SELECT {engine.loom}loom_train('sb_m', NULL, 'y', '{opts}')")
    seconds = time.perf_counter() - started
    info = json.loads(engine.scalar(f"SELECT {engine.loom}loom_model_info('sb_m')"))
    model = LinearModel.from_dict(
        {
            "kind": info["kind"],
            "features": info["feature_names"],
            "coef": info["coefficients"],
            "intercept": info["intercept"],
            "scaling": info["standardization"],
            "classes": info["classes"],
        }
    )
    predicted = model.predict(task.X_test)
    if model.kind == "linear":
        predicted = (predicted > 0.5).astype(float)
    accuracy = float(np.mean(predicted == task.y_test))
    history = [h for h in info["history"] if "epoch" in h]
    return Trained(int(options["epochs"]), seconds, accuracy, history)


def time_to(ladder: list[Trained], target: float, setup_s: float) -> float:
    """Setup plus the wall clock of the shortest train that reached ``target`` accuracy."""
    for run in sorted(ladder, key=lambda r: r.epochs):
        if run.accuracy >= target:
            return setup_s + run.seconds
    return float("nan")
