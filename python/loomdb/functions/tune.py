"""``loom_tune``: a grid or random search over ``loom_train``'s options; the best trial is kept.

No paper section.  Each trial is one ``loom_train`` (``train.fit_record``: the same layout,
trainer and catalog record) on the first batches of the shuffled source, scored on the last
``validation_fraction`` of them (default 0.2); trials that lay out the same rows run one after
another (``by_layout``) and train on one layout (``SharedLayout``).  By default (``"metric":
"loss"``) the score is the validation loss of the trial's last epoch *without* the L1/L2
penalty, so trials of different penalties compare on the data alone, lower being better;
``metric`` may instead name another of ``learn/metrics.py``'s ``TUNE_METRICS`` — accuracy or
AUC (higher is better) for a classifier, RMSE or MAE for a regression — which the trainer
computes of the trained model on the same validation batches.  The first trial wins a tie;
trials, the summary and the kept model's ``tuned`` record name the metric used.  A trial that
diverges, or whose ``skip`` leaves out every row of its first epoch (an ``epsilon`` or
``skip_fraction`` candidate too large), is recorded as failed with its error and is never
chosen.  Everything runs in one
transaction: the trials (``loom.trials``) and the kept model (the ``loom.models`` row
``loom_train`` writes, its options recording the chosen values and, under ``tuned``, the
search) are written together at the end, or not at all — a tune whose every trial fails leaves
the catalog as it was.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

from loomdb.errors import LoomDivergedError, LoomError, LoomNothingTrainedError
from loomdb.functions import deploy, train
from loomdb.functions.train_options import TRAIN
from loomdb.functions.train_plan import Plan
from loomdb.functions.tune_space import Space, plans, space
from loomdb.learn.metrics import TUNE_METRICS
from loomdb.options import parse_json
from loomdb.store import catalog
from loomdb.store.names import check_name


def tune(db: Any, name: str, source: str | None, label: str | None, options: str | None) -> str:
    check_name(name, "model")
    given = train.index_format(db, parse_json(options))
    s = space(given)  # before 'progress' is read: a list of it is refused as a candidate list
    progress = TRAIN.by_name["progress"].validate(given.get("progress"))
    planned = plans(s)  # every candidate checked before anything runs
    started = time.perf_counter()
    with db.atomic():
        catalog.hold_model(db, name)
        planned = by_layout(db, planned)
        exists = catalog.model_exists(db, name)
        if exists and not s.fixed.get("replace"):
            catalog.require_absent(db, name, "model")
        if exists:  # before any trial: a grant shares predicting, not training
            deploy.require_owner(db, name, "retune it")
        rows: list[dict[str, Any]] = []
        best: tuple[float, int, Any, Any] | None = None
        hint = "give smaller lr candidates, or leave 'lr' out for the automatic step"
        with SharedLayout(db, source, label) as layouts:
            for number, (opts, p) in enumerate(planned, 1):
                what = f"loom_tune {name} trial {number}"
                row, fitted, failed = _trial(db, name, number, opts, p, what, s.metric, layouts)
                rows.append(row)
                hint = failed or hint
                if progress:
                    db.notice(_report(name, number, len(planned), s, row))
                if fitted is not None and (
                    best is None or _better(s.metric, row["score"], best[0])
                ):
                    best = (row["score"], number, *fitted)
        if best is None:
            raise LoomDivergedError(
                f"every trial of loom_tune '{name}' failed: {rows[-1]['error']}",
                hint=hint,
            )
        score, number, record, model = best
        metric = TUNE_METRICS[s.metric].label
        tuned = {"search": s.search, "trial": number, "trials": len(rows), "metric": metric}
        record.options = {**record.options, "tuned": tuned}
        catalog.put_model(db, record, replace=exists)
        catalog.put_trials(db, name, rows, catalog.current_version(db, name))
        if exists:
            deploy.refresh(db, name, model, db.role())
    return json.dumps(_summary(name, s, rows, number, score, time.perf_counter() - started))


def by_layout(db: Any, planned: list[tuple[dict[str, Any], Plan]]):
    """The trials reordered so that those laying out the same rows (``train.layout_key``) run
    one after another: groups in the order of their first trial, trials within a group in the
    search's order.  A grid listing a layout option (``format``, ``batch_size``) after another
    option lays the source out once per value, not once per trial."""
    groups: dict[str, list[tuple[dict[str, Any], Plan]]] = {}
    for trial in planned:
        groups.setdefault(train.layout_key(db, trial[1]), []).append(trial)
    return [trial for group in groups.values() for trial in group]


class SharedLayout:
    """The layout the trials train on, made (or the index opened, and checked fresh) once for
    consecutive trials whose plans lay out the same rows (``train.layout_key``): every trial
    reads the same minibatches anyway, and a layout costs far more than a short train
    (1M × 20 rows in DuckDB: about 1 s against 0.2 s for two epochs).  It lives outside the
    trials' subtransactions, so a failed trial does not take it with it, and is closed when a
    trial needs another or the tune ends."""

    def __init__(self, db: Any, source: str | None, label: str | None):
        self.db, self.source, self.label = db, source, label
        self.key: str | None = None
        self.laid: Any = None

    def __enter__(self) -> SharedLayout:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.close()
            return
        with contextlib.suppress(LoomError):  # the error under way is the one to tell, and
            self.close()  # the rollback after it drops a layout kept in a table anyway

    def get(self, p: Plan, what: str) -> tuple[Any, float]:
        """The layout of plan ``p``, and the seconds spent making it now (0 when shared)."""
        key = train.layout_key(self.db, p)
        if self.laid is not None and key == self.key:
            return self.laid, 0.0
        self.close()
        started = time.perf_counter()
        self.laid = train.open_layout(self.db, p, self.source, self.label, what)
        self.key = key
        return self.laid, time.perf_counter() - started

    def close(self) -> None:
        if self.laid is not None:
            laid, self.laid, self.key = self.laid, None, None
            laid.close()


#: What to do when the validation rows hold one class, which no AUC ranks
ONE_CLASS = (
    "score the trials by 'loss' or 'accuracy', or hold out more rows (a larger "
    "validation_fraction) so that both classes are among them"
)


def _trial(db, name, number, opts, p, what, metric, layouts: SharedLayout):
    """Run one trial in a subtransaction; its catalog row, (record, model) if it trained, and
    the hint of the error that failed it (a candidate diverged or trained on no row)."""
    started = time.perf_counter()
    shared = layouts.get(p, what)
    named = TUNE_METRICS[metric].label
    row: dict[str, Any] = {
        "trial": number,
        "options": _kept(opts),
        "score": None,
        "error": None,
        "metric": named,
    }
    try:
        with db.atomic():
            record, model = train.fit_record(
                db, name, p, layouts.source, layouts.label, what, metric, shared
            )
    except (LoomDivergedError, LoomNothingTrainedError) as e:  # this candidate's outcome
        row.update(status="failed", error=e.message, seconds=_since(started))
        return row, None, e.hint
    score = _score(record.history, metric)
    row["seconds"] = _since(started)
    if score is None and metric == "auc":  # the margins are finite: one class was held out
        row.update(status="failed", error=f"the {named} is undefined: its rows hold one class")
        return row, None, ONE_CLASS
    if score is None:
        row.update(status="failed", error=f"the {named} is not finite")
        return row, None, None
    row.update(status="ok", score=score)
    return row, (record, model), None


def _kept(opts: dict[str, Any]) -> dict[str, Any]:
    """A trial's options as the catalog keeps them: a ``dsn`` without its password (as the
    model's own options keep it)."""
    if opts.get("dsn") is None:
        return opts
    from loomdb.distributed.fit import redact

    return {**opts, "dsn": redact(opts["dsn"])}


def _score(history: list[dict[str, Any]], metric: str) -> float | None:
    """The last epoch's ``metric`` on the validation rows (the trainer records it)."""
    epochs = [h for h in history if "epoch" in h]
    key = "val_data_loss" if metric == "loss" else f"val_{metric}"
    value = epochs[-1].get(key) if epochs else None
    return float(value) if value is not None and math.isfinite(value) else None


def _better(metric: str, score: float, best: float) -> bool:
    """Whether ``score`` beats ``best`` (strictly: the first trial wins a tie)."""
    return score > best if TUNE_METRICS[metric].higher else score < best


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 6)


def _searched(s: Space, opts: dict[str, Any]) -> dict[str, Any]:
    return {k: opts[k] for k in s.lists}


def _report(name: str, number: int, of: int, s: Space, row: dict[str, Any]) -> str:
    head = f"loom_tune {name}: trial {number}/{of} {json.dumps(_searched(s, row['options']))}"
    if row["status"] != "ok":
        return f"{head} failed: {row['error']}"
    return f"{head}: {row['metric']} {row['score']:.6g} ({row['seconds']:.2f} s)"


def _summary(name, s: Space, rows, number, score, seconds) -> dict[str, Any]:
    chosen = rows[number - 1]["options"]
    return {
        "model": name,
        "search": s.search,
        "trials": len(rows),
        "failed": sum(r["status"] != "ok" for r in rows),
        "metric": TUNE_METRICS[s.metric].label,
        "best_trial": number,
        "best_score": score,
        "best_options": _searched(s, chosen),
        "seconds": round(seconds, 6),
    }


def trials(db: Any, name: str) -> list[tuple[Any, ...]]:
    """(trial, status, score, seconds, options, error, metric) rows of the search that made
    the model's current version (``catalog.trials_of``; a row an older loomdb wrote names no
    metric: it was scored by the loss)."""
    found = catalog.trials_of(db, check_name(name, "model"))
    if not found:
        catalog.get_model(db, name)  # no such model: say so; a trained one has no trials
    return [
        (
            int(r["trial"]),
            r["status"],
            r["score"],
            r["seconds"],
            json.dumps(r["options"]),
            r["error"],
            r.get("metric") or TUNE_METRICS["loss"].label,
        )
        for r in found
    ]
