"""loomdb as a user drives it, through SQL: train, build an index, read back what was stored.
No paper section.

Only the options a benchmark must fix are passed; everything else is loomdb's default, and what
a train actually used (its step size, schedule, batch size …) is read back from ``loom.models``,
so the benchmarks follow the defaults wherever they go.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine
from loomdb.learn.model import LinearModel


def as_json(value: Any) -> Any:
    """Catalog JSON: DuckDB returns text, psycopg the parsed value."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@dataclass
class Trained:
    wall: float  # the whole ``SELECT loom_train(…)``, seconds
    epochs: list[dict[str, Any]]  # the history's per-epoch entries
    restarts: int  # the guard's restarts (history entries without an epoch)
    timings: dict[str, float]  # layout_s, train_s, total_s as loomdb recorded them
    used: dict[str, Any]  # every option with the value the train used
    w: np.ndarray  # the model on raw rows: margin = X·w + b
    b: float

    def epoch_seconds(self, upto: int | None = None) -> float:
        """Σ of the per-epoch ``seconds`` up to epoch ``upto`` (all by default)."""
        return float(sum(e["seconds"] for e in self.epochs[:upto]))


def train(engine: BenchEngine, name: str, source: str | None, label: str, **opts: Any) -> Trained:
    options = json.dumps({"replace": True, "progress": False, **opts})
    src = "NULL" if source is None else f"'{source}'"
    started = time.perf_counter()
    engine.scalar(f"SELECT {engine.loom}loom_train('{name}', {src}, '{label}', '{options}')")
    return stored(engine.run, name, time.perf_counter() - started)


def stored(run: Callable[[str], list[tuple]], name: str, wall: float) -> Trained:
    """Model ``name`` as ``loom.models`` holds it (``run`` runs SQL), trained in ``wall`` s."""
    row = run(
        "SELECT kind, feature_names, coefficients, intercept, standardization, classes, "
        f"options, history, timings FROM loom.models WHERE name = '{name}'"
    )[0]
    kind, *stored = row
    features, coef, intercept, scaling, classes, used, history, timings = map(as_json, stored)
    model = LinearModel.from_dict(
        {
            "kind": kind,
            "features": features,
            "coef": coef,
            "intercept": intercept,
            "scaling": scaling,
            "classes": classes,
        }
    )
    W, b = model.folded()
    epochs = [h for h in history if "epoch" in h]
    return Trained(wall, epochs, len(history) - len(epochs), timings, used, W[:, 0], float(b[0]))


def create_index(
    engine: BenchEngine, name: str, source: str, label: str, **opts: Any
) -> tuple[float, dict[str, Any]]:
    """Build index ``name`` (replacing one of that name); (wall seconds, its summary)."""
    if engine.scalar(f"SELECT count(*) FROM loom.indexes WHERE name = '{name}'"):
        engine.run(f"SELECT {engine.loom}loom_drop_index('{name}')")
    options = json.dumps(opts)
    started = time.perf_counter()
    info = engine.scalar(
        f"SELECT {engine.loom}loom_create_index('{name}', '{source}', '{label}', '{options}')"
    )
    return time.perf_counter() - started, as_json(info)
