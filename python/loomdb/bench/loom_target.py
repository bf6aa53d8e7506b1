"""loomdb's time to the target loss on one engine, through SQL.
No paper section.

loomdb's trainer is deterministic and what it does in epoch k depends on epochs 1..k only (the
step schedule is indexed by the epoch, the optimiser's restarts by the epoch losses so far), so
a k-epoch train is the first k epochs of any longer one (train.py checks the timed trains end
where the search's did).  The fewest epochs k that reach the target are found by
:func:`loomdb.bench.search.fewest_steps` over ``{"epochs": k, "tol": 0}`` trains on an index
(warm, so the search is cheap); then k-epoch trains are timed three ways: cold (on the index
with ``"cache_mb": 0``: every epoch reads the database), warm (on the index, the default cache)
and the whole call from the table (profiling and layout included), each the best of a few,
after one warm-up train (what a session pays once: imports, compiled kernels).  Only the
model and its penalty are fixed (they define the objective); every other option is loomdb's
default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loomdb.bench.engines import BenchEngine
from loomdb.bench.loom_runs import Trained, create_index, train
from loomdb.bench.objective import L2, Objective
from loomdb.bench.repeat import best_of
from loomdb.bench.search import Search, fewest_steps

FIXED: dict[str, Any] = {"model": "logistic", "l2": L2}
TABLE, INDEX, MODEL, LABEL = "bench_train", "bench_ix", "bench_m", "y"


@dataclass
class LoomTarget:
    engine: str
    default: Trained  # the whole call with the defaults (stops where loomdb's tol says)
    index_s: float  # loom_create_index with the defaults
    search: Search
    cold: Trained | None = None  # None: the target was not reached within the cap
    warm: Trained | None = None
    whole: Trained | None = None

    @property
    def restarts(self) -> int:
        runs = [self.default, self.cold, self.warm, self.whole]
        return sum(r.restarts for r in runs if r is not None)


def measure(
    engine: BenchEngine, obj: Objective, optimum: float, target: float, cap: int, repeat: int
) -> LoomTarget:
    engine.load(TABLE, obj.X, obj.y)
    train(engine, MODEL, TABLE, LABEL, epochs=1, **FIXED)  # warm-up: imports, compiled kernels
    default = best_of(lambda: train(engine, MODEL, TABLE, LABEL, **FIXED), _wall, repeat)
    index_s, _ = create_index(engine, INDEX, TABLE, LABEL)

    def epochs(k: int, **opts: Any) -> Trained:
        return train(engine, MODEL, None, LABEL, index=INDEX, epochs=k, tol=0, **FIXED, **opts)

    def after(k: int) -> float:
        t = epochs(k)
        return obj(t.w, t.b)

    search = fewest_steps(after, target, cap, floor=optimum)
    out = LoomTarget(engine.name, default, index_s, search)
    if search.k is not None:
        k = search.k
        out.cold = best_of(lambda: epochs(k, cache_mb=0), _trained, repeat)
        out.warm = best_of(lambda: epochs(k), _trained, repeat)
        whole = {"epochs": k, "tol": 0, **FIXED}
        out.whole = best_of(lambda: train(engine, MODEL, TABLE, LABEL, **whole), _wall, repeat)
    engine.run(f"SELECT {engine.loom}loom_drop_index('{INDEX}')")
    engine.run(f"SELECT {engine.loom}loom_drop_model('{MODEL}')")
    return out


def _wall(t: Trained) -> float:
    return t.wall


def _trained(t: Trained) -> float:
    return t.epoch_seconds()
