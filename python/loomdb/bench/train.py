"""``loomdb bench train``: time to the same loss, and the whole call against fetch + fit.
No paper section.

One objective for every system (``bench/objective.py``): mean training log-loss + (l2/2)·‖v‖²,
l2 = 1e-4, v the weights per z-scored feature, computed from each system's final model on the
same raw rows.  The reference is scikit-learn's LogisticRegression (lbfgs) converged tightly on
the z-scored rows; the target is its objective + 1%.

Table 1, time to the target: loomdb cold, warm and whole call on each engine
(``bench/loom_target.py``) against scikit-learn in memory — lbfgs (converged, and with the
fewest iterations that reach the target), SGDClassifier (default schedule, and constant eta0
tuned on a grid) — and the floor, loomdb's own SGD as a numpy loop (``bench/floor.py``).

Table 2, the whole ``loom_train`` call with loomdb's defaults against what a user would do
instead: fetch the table from the same engine into numpy, z-score it and fit scikit-learn
(``bench/user_path.py``), with the objective each reached.

Every system computes on one core: BLAS is held to one thread in this process (DuckDB's loomdb
runs here) and the note says what the PostgreSQL server's environment sets.
"""

from __future__ import annotations

import os
import time

from loomdb.bench.engines import BenchEngine, binary_datasets, engines
from loomdb.bench.floor import floor_race
from loomdb.bench.loom_runs import Trained
from loomdb.bench.loom_target import LABEL, TABLE, LoomTarget, measure
from loomdb.bench.objective import L2, Objective
from loomdb.bench.peers import lbfgs_to_target, reference, sgd_race, sgd_tuned
from loomdb.bench.table import BenchTable
from loomdb.bench.train_tables import (
    MARGIN,
    NA,
    PATIENCE,
    Row,
    add_target_rows,
    call_table,
    race_row,
    target_table,
)
from loomdb.bench.user_path import FETCHES, best_fetch_and_fit, fits

MEMORY = "memory"


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    from threadpoolctl import threadpool_limits

    cap, repeat = (200, 1) if quick else (1000, 3)
    started, load = time.perf_counter(), os.getloadavg()[0]
    targets, calls = target_table(cap, repeat), call_table()
    with threadpool_limits(limits=1), engines(dsn) as found:
        for name, X, y in binary_datasets(quick):
            _dataset(targets, calls, found, name, Objective(X, y, L2), cap, repeat)
        blas = [f"{e.name} server {_server_blas(e)}" for e in found if e.name != "duckdb"]
    if len(found) == 1:
        targets.notes.append("PostgreSQL not measured: pass --dsn to include it")
    targets.notes.append(
        "BLAS threads: 1 in this process (scikit-learn, the floor, loomdb on DuckDB)"
        + "".join(f"; {b}" for b in blas)
    )
    targets.notes.append(
        f"suite wall time {time.perf_counter() - started:.0f} s; load average {load:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)"
    )
    return [targets, calls]


def _dataset(targets, calls, found, name: str, obj: Objective, cap: int, repeat: int) -> None:
    ref = reference(obj)
    target = ref.value * (1 + MARGIN)
    loom = [measure(e, obj, ref.value, target, cap, repeat) for e in found]
    lb, lb_s = lbfgs_to_target(obj, target, cap, repeat)
    lb_value = lb.probes[lb.k] if lb.k else lb.best
    default = sgd_race(obj, target, cap, PATIENCE)
    rows = [
        Row(MEMORY, "sklearn lbfgs, converged (reference)", ref.iterations, ref.seconds, ref.value),
        Row(MEMORY, "sklearn lbfgs, to target", lb.k or f"> {cap}", lb_s, lb_value),
        race_row(MEMORY, "sklearn SGDClassifier, default", default, cap),
    ]
    eta0, tuned, grid = sgd_tuned(obj, target, cap, PATIENCE)
    targets.notes.append(
        f"{name}: tuning SGDClassifier's eta0 took {sum(r.spent for r in grid.values()):.1f} s "
        f"of epochs over the grid ({', '.join(f'{e:g}: {r.why}' for e, r in grid.items())}), "
        "not counted in its row"
    )
    rows.append(
        race_row(MEMORY, f"sklearn SGDClassifier, eta0 {eta0:g} (best of grid)", tuned, cap)
    )
    used = loom[0].default.used
    floor = floor_race(obj, used, target, cap)
    lr = f"{loom[0].engine}'s lr {float(used['lr']):.3g}"
    rows.append(race_row(MEMORY, f"numpy minibatch SGD (floor; {lr})", floor, cap))
    for lt in loom:
        rows += _loom_rows(lt, obj, cap)
        if not _deterministic(lt, obj):
            targets.notes.append(
                f"{name} {lt.engine}: the search's k-epoch model and the timed cold/warm ones "
                "differ: the trainer was not deterministic here, k may be off"
            )
        if lt.restarts:
            targets.notes.append(
                f"{name} {lt.engine}: the guard restarted {lt.restarts} trains; a k-epoch "
                "train may then not be the prefix of a longer one"
            )
    add_target_rows(targets, name, rows, ref.value, lb_s, floor.seconds)
    for engine, lt in zip(found, loom):
        _call_rows(calls, name, engine, lt, obj, ref.value, repeat)


def _deterministic(lt: LoomTarget, obj: Objective) -> bool:
    """The timed k-epoch trains end where the search's k-epoch probe did."""
    if lt.search.k is None or lt.cold is None or lt.warm is None:
        return True
    probe = lt.search.probes[lt.search.k]
    return all(abs(obj(t.w, t.b) - probe) <= 1e-9 * probe for t in (lt.cold, lt.warm))


def _loom_rows(lt: LoomTarget, obj: Objective, cap: int) -> list[Row]:
    e = lt.engine
    rows = [
        Row(e, "loomdb loom_create_index (before cold, warm)", "", lt.index_s, NA, ratios=False)
    ]
    k = lt.search.k
    if k is None or lt.cold is None or lt.warm is None or lt.whole is None:
        best = lt.search.best
        return rows + [
            Row(e, f"loomdb {what}", f"> {cap}", None, best)
            for what in ("cold", "warm", "whole call")
        ]

    def row(what: str, t: Trained, seconds: float) -> Row:
        return Row(e, f"loomdb {what}", k, seconds, obj(t.w, t.b), call_s=t.wall)

    return rows + [
        row("cold", lt.cold, lt.cold.epoch_seconds()),
        row("warm", lt.warm, lt.warm.epoch_seconds()),
        row("whole call", lt.whole, lt.whole.wall),
    ]


def _call_rows(
    table: BenchTable,
    name: str,
    engine: BenchEngine,
    lt: LoomTarget,
    obj: Objective,
    optimum: float,
    repeat: int,
) -> None:
    d = lt.default
    layout_s, train_s = d.timings["layout_s"], d.timings["train_s"]
    value = obj(d.w, d.b) / optimum
    row = [len(d.epochs), layout_s, train_s, d.wall, 1.0, value]
    table.add(name, engine.name, "loomdb loom_train", *row)
    for fetch_name, fetch in FETCHES[engine.name]:
        for fit_name, make in fits(obj.l2):
            r = best_fetch_and_fit(engine, fetch, make, TABLE, LABEL, obj, repeat=repeat)
            row = [r.passes, r.fetch_s, r.fit_s, r.total_s, d.wall / r.total_s]
            table.add(name, engine.name, f"{fetch_name} + {fit_name}", *row, r.objective / optimum)


def _server_blas(engine: BenchEngine) -> str:
    """The PostgreSQL server's OPENBLAS_NUM_THREADS (needs plpython3u; 'unknown' without)."""
    fn = "loombench.blas_threads"
    try:
        engine.run(
            f"CREATE OR REPLACE FUNCTION {fn}() RETURNS text LANGUAGE plpython3u AS $$\n"
            "import os\nreturn os.environ.get('OPENBLAS_NUM_THREADS', 'unset')\n$$"
        )
        return f"OPENBLAS_NUM_THREADS={engine.scalar(f'SELECT {fn}()')}"
    except Exception:  # a note, never a failure
        return "OPENBLAS_NUM_THREADS unknown"
