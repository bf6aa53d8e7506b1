"""The two tables of ``bench train``: their columns, what each column means, their rows.
No paper section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loomdb.bench.epochwise import Race
from loomdb.bench.objective import L2
from loomdb.bench.peers import ETA0_GRID, REFERENCE_TOL
from loomdb.bench.table import BenchTable

MARGIN = 0.01  # the target: the reference objective × (1 + MARGIN)
PATIENCE = 50  # epochs without a new best objective: SGD's noise floor, stop
NA = float("nan")


@dataclass
class Row:
    """One system's time to the target; ``seconds`` None: not reached (``objective`` is then
    the best seen)."""

    engine: str
    system: str
    passes: Any
    seconds: float | None
    objective: float
    call_s: float = NA
    ratios: bool = True


def race_row(engine: str, system: str, r: Race, cap: int) -> Row:
    if r.epochs is not None:
        return Row(engine, system, r.epochs, r.seconds, r.best)
    passes = f"plateau @ {r.ran}" if r.why == "plateau" else f"> {cap}"
    return Row(engine, system, passes, None, r.best)


def add_target_rows(
    table: BenchTable, data: str, rows: list[Row], optimum: float, lbfgs_s, floor_s
) -> None:
    def ratio(seconds: float | None, peer: float | None) -> float:
        return seconds / peer if seconds is not None and peer else NA

    for r in rows:
        table.add(
            data,
            r.engine,
            r.system,
            r.passes,
            "not reached" if r.seconds is None else r.seconds,
            r.call_s,
            ratio(r.seconds, lbfgs_s) if r.ratios else NA,
            ratio(r.seconds, floor_s) if r.ratios else NA,
            r.objective / optimum,
        )


def target_table(cap: int, repeat: int) -> BenchTable:
    return BenchTable(
        f"train: time to the target loss (converged lbfgs objective + {MARGIN:.0%}), "
        f"logistic, l2 = {L2:g}",
        [
            "data",
            "engine",
            "system",
            "passes",
            "seconds",
            "call s",
            "÷ lbfgs",
            "÷ floor",
            "obj ÷ ref",
        ],
        notes=[
            "passes: epochs (iterations for lbfgs) to the target, read off an epoch-by-epoch "
            "run (SGDClassifier, the floor) or searched (loomdb, lbfgs: k-step runs, doubling "
            "then bisecting to a k that reaches the target after k − 1 did not; if the "
            "objective is not monotone in k an earlier k might also reach it); not reached within "
            f"{cap} ('> {cap}'), or given up on after {PATIENCE} epochs without a new best "
            "objective ('plateau @ epoch')",
            "seconds: time to the target. lbfgs: the fit; SGDClassifier and the numpy floor: "
            "the sum of their epochs (the objective is measured between epochs, untimed); "
            "loomdb cold/warm: the sum of the per-epoch seconds (the model's history) of a "
            "train of exactly k epochs on an index; loomdb whole call: the wall time of "
            "SELECT loom_train from the table with epochs = k (profiling, layout, step-size "
            "estimate and storing the model included); loom_create_index: its wall time",
            "loomdb cold: cache_mb 0, every epoch reads the index from the database; warm: the "
            "default cache (epoch 1 reads, later epochs reuse the decoded batches); every loomdb "
            f"and fetch + fit time (and lbfgs to target) is the best of {repeat} (fewer when "
            "a run is long) after one "
            "warm-up train per engine and data set (a session's imports and compiled kernels)",
            "call s: the wall time of the whole SELECT loom_train that trained those k epochs",
            "÷ lbfgs, ÷ floor: seconds / the seconds of 'sklearn lbfgs, to target' / of the "
            "numpy floor on the same data; below 1 this row is faster",
            "obj ÷ ref: the objective of this row's final model / the reference's (not "
            f"reached: the best seen); the target is {1 + MARGIN:.2f}",
            f"reference: LogisticRegression(C = 1/(n·l2), lbfgs, tol {REFERENCE_TOL:g}) on the "
            "z-scored rows; 'to target': the fewest max_iter that reach the target, refitted; "
            "SGDClassifier(loss='log_loss', alpha = l2), one partial_fit epoch at a time, "
            f"default ('optimal') and learning_rate 'constant' with eta0 in {list(ETA0_GRID)} "
            "(the fastest shown); the floor: loomdb's minibatch SGD with the step, schedule "
            "and batch size that engine's default train used, on a z-scored in-memory array",
        ],
        digits={"seconds": 3, "call s": 3, "obj ÷ ref": 5},
    )


def call_table() -> BenchTable:
    return BenchTable(
        "train: the whole loom_train call vs fetch + fit (loomdb's defaults)",
        [
            "data",
            "engine",
            "system",
            "passes",
            "fetch/layout s",
            "fit s",
            "total s",
            "loomdb ÷ this",
            "obj ÷ ref",
        ],
        notes=[
            'loomdb: SELECT loom_train(\'m\', table, \'y\', \'{"model": "logistic", "l2": '
            f'{L2:g}, "progress": false}}\'), every other option its default (it stops where '
            "its tol says); fetch/layout s and fit s: loomdb's own layout_s and train_s; "
            "total s: the SELECT's wall time",
            "the others: fetch the table from the same engine (DuckDB: the cursor's "
            "fetchnumpy; PostgreSQL: psycopg's fetchall, or binary COPY parsed by numpy), then "
            "StandardScaler and scikit-learn's defaults on the same objective: "
            "LogisticRegression(C = 1/(n·l2), max_iter = 1000), SGDClassifier(loss='log_loss',"
            " alpha = l2); fit s includes the StandardScaler",
            "passes: epochs (loomdb, SGDClassifier) or iterations (lbfgs) run",
            "loomdb ÷ this: loomdb's total s / this row's; below 1 loomdb is faster",
            "obj ÷ ref: the objective reached / the converged reference's; the target of the "
            f"first table is {1 + MARGIN:.2f}",
        ],
        digits={"fetch/layout s": 3, "fit s": 3, "total s": 3, "obj ÷ ref": 5},
    )
