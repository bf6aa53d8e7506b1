"""``loom_tune``'s search space: which options are lists of candidates, and the trials drawn.

No paper section (grid and random search as in scikit-learn's ``GridSearchCV`` and
``RandomizedSearchCV``, written small).  Any ``loom_train`` option whose value is a scalar (or
an object: ``class_weight``) may be given as a list of candidates; an option whose value is
itself a list (``features``) is passed through.  Options that would make the trials' scores
incomparable or the search meaningless (the model kind, the validation split and the rows
it holds, where the model is written) are refused as lists, with the reason.  Every trial's
options are checked with ``loom_train``'s own parser before any trial runs, so a bad
candidate is named up front.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomOptionError
from loomdb.functions.train_options import TRAIN
from loomdb.functions.train_plan import Plan, plan
from loomdb.learn.losses import LOSSES
from loomdb.learn.metrics import TUNE_METRICS
from loomdb.options import Choices, Interval, Option, Options

MAX_TRIALS = 64
DEFAULT_VALIDATION = 0.2  # tuning scores each trial on held-out batches
SEARCH = Options(
    "loom_tune",
    Option("search", Choices(["grid", "random"]), "grid", "every combination, or a random draw"),
    Option("trials", Interval(True, 1, MAX_TRIALS), None, "random search: how many combinations"),
    Option("search_seed", Interval(True, 0, 2**31 - 1), 0, "random search: the seed of the draw"),
    Option(
        "metric",
        Choices(list(TUNE_METRICS)),
        "loss",
        "what scores a trial on the validation rows: "
        + "; ".join(f"{m.name}: {m.doc}" for m in TUNE_METRICS.values()),
    ),
)
# option → why it cannot be a list of candidates
NOT_CANDIDATES = {
    "model": "the losses of different model kinds are not comparable; tune each kind apart",
    "validation_fraction": "every trial is scored on the same held-out rows",
    "test_fraction": "every trial holds the same test rows out",
    "split_column": "every trial holds the same test rows out",
    "seed": "the shuffle decides which rows are held out: every trial uses the same",
    "nulls": "every trial trains and validates on the same rows",
    "index": "every trial trains on the same rows",
    "features": "give one list of feature columns; it is not searched",
    "replace": "it says whether the kept model may replace one of its name",
    "progress": "it is not a hyperparameter",
}
GROUPED = (  # a SlimML layout's batches are groups of similar rows: its held-out rows differ
    "a SlimML layout holds other rows out than another layout does (its batches are groups of "
    "similar rows), so the trials' scores would not compare"
)
NOT_CANDIDATES |= dict.fromkeys(("slimml", "aggregation_ratio", "stratify"), GROUPED)
REFUSED = {  # option: (why, what to do instead)
    "warm_start": (
        "every trial trains from zero",
        'leave it out; to train the kept model on, call loom_train with {"warm_start": true} '
        "after the tune",
    ),
}


@dataclass
class Space:
    fixed: dict[str, Any]  # the options every trial shares (validation_fraction included)
    lists: dict[str, list[Any]]  # the searched options, in the order given
    search: str
    trials: int | None
    seed: int
    metric: str = "loss"  # learn/metrics.py TUNE_METRICS

    @property
    def size(self) -> int:
        n = 1
        for values in self.lists.values():
            n *= len(values)
        return n

    def combination(self, i: int) -> dict[str, Any]:
        """The ``i``-th combination of the grid (the last option varying fastest)."""
        out: dict[str, Any] = {}
        for key in reversed(self.lists):
            values = self.lists[key]
            i, j = divmod(i, len(values))
            out[key] = values[j]
        return {k: out[k] for k in self.lists}

    def draws(self) -> list[dict[str, Any]]:
        """Each trial's searched values: the whole grid, or ``trials`` distinct combinations
        drawn with ``search_seed`` (the whole grid when it holds no more)."""
        if self.search == "grid" or self.trials is None or self.trials >= self.size:
            picks = list(range(self.size))
        else:
            picks = random.Random(self.seed).sample(range(self.size), self.trials)
        return [self.combination(i) for i in picks]


def space(given: dict[str, Any]) -> Space:
    """Split ``loom_tune``'s options into the search's own, the shared and the searched."""
    own = SEARCH.parse({k: given[k] for k in SEARCH.names() if k in given})
    rest = {k: v for k, v in given.items() if k not in SEARCH.by_name}
    for key, (why, instead) in REFUSED.items():
        if rest.get(key):
            raise LoomOptionError(f"loom_tune does not take '{key}': {why}", hint=instead)
    lists: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for key, value in rest.items():
        if key == "features" or not isinstance(value, list):
            fixed[key] = value
            continue
        if key in NOT_CANDIDATES:
            raise LoomOptionError(
                f"'{key}' cannot be a list of candidates: {NOT_CANDIDATES[key]}",
                hint=f"give '{key}' one value",
            )
        _check_list(key, value)
        lists[key] = value
    if fixed.get("validation_fraction") is None:
        fixed["validation_fraction"] = DEFAULT_VALIDATION
    if fixed["validation_fraction"] == 0:
        raise LoomOptionError(
            "loom_tune scores each trial on held-out rows: validation_fraction cannot be 0",
            hint=f"leave it out (default {DEFAULT_VALIDATION}) or give a fraction above 0",
        )
    s = Space(fixed, lists, own["search"], own["trials"], own["search_seed"], own["metric"])
    _check_size(s, seeded=given.get("search_seed") is not None)
    _check_metric(s)
    return s


def _check_metric(s: Space) -> None:
    """Refuse a metric that does not score the model kind (before any trial runs)."""
    metric = TUNE_METRICS[s.metric]
    kind = s.fixed.get("model") or TRAIN.by_name["model"].default
    if kind not in LOSSES or metric.applies == "any":
        return  # an unknown kind: loom_train's parser names it
    is_a = "classifier" if LOSSES[kind].classifier else "regression"
    if metric.applies != is_a:
        fitting = [m.name for m in TUNE_METRICS.values() if m.applies in ("any", is_a)]
        raise LoomOptionError(
            f"the '{s.metric}' metric scores {metric.applies} models; model '{kind}' is a "
            f"{is_a} model",
            hint=f"give 'metric' one of {', '.join(fitting)}",
        )


def _check_list(key: str, values: list[Any]) -> None:
    if not values:
        raise LoomOptionError(f"'{key}' is an empty list", hint="give at least one candidate")
    seen: list[Any] = []
    for v in values:
        if isinstance(v, list):
            raise LoomOptionError(
                f"'{key}' candidates must be single values, not lists; got {v!r}",
                hint=f"write '{key}' as a flat list, e.g. [0.01, 0.1]",
            )
        if any(_same(v, w) for w in seen):
            raise LoomOptionError(f"'{key}' lists {v!r} twice", hint="give each candidate once")
        seen.append(v)


def _same(a: Any, b: Any) -> bool:
    """Two candidates that are one value: equal numbers (0 and 0.0: the option takes one
    value), or equal values of one type (true is not 1)."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return a == b and (numbers or type(a) is type(b))


def _check_size(s: Space, seeded: bool) -> None:
    for key, given in (("trials", s.trials is not None), ("search_seed", seeded)):
        if given and s.search == "grid":
            raise LoomOptionError(
                f"'{key}' applies to random search; a grid runs every combination",
                hint=f'add "search": "random", or leave \'{key}\' out',
            )
    if s.search == "random" and s.trials is None:
        raise LoomOptionError(
            "random search needs 'trials': how many combinations to draw",
            hint='e.g. {"search": "random", "trials": 10}',
        )
    if s.search == "grid" and s.size > MAX_TRIALS:
        raise LoomOptionError(
            f"the grid holds {s.size} combinations; loom_tune runs at most {MAX_TRIALS}",
            hint=f'shorten the lists, or draw some: {{"search": "random", "trials": {MAX_TRIALS}}}',
        )


def trial_options(s: Space, values: dict[str, Any]) -> dict[str, Any]:
    """One trial's ``loom_train`` options: the shared ones, its values, no per-epoch NOTICEs."""
    return {**s.fixed, **values, "progress": False}


def plans(s: Space) -> list[tuple[dict[str, Any], Plan]]:
    """Every trial's options and plan, each checked by ``loom_train``'s parser before any
    trial runs (a bad candidate is named: "the 'lr' option must be … got -1 instead")."""
    out = []
    for values in s.draws():
        options = trial_options(s, values)
        out.append((options, plan(dict(options))))
    return out
