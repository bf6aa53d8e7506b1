"""``loomdb bench slimml``: SlimML against plain SGD and three baselines, in one run (SlimML §4).

For each task (a9a.t, MNIST digit < 5, a 1M-row synthetic table; ``bench.slimml_runs``), each
GLM (logistic, svm, linear) and each engine, cold (``cache_mb`` 0: every epoch reads the
database) and warm (decoded groups kept), on dense layouts with 1024-row minibatches:

* plain SGD on an ordinary index (the same options, no grouping) — the reference;
* plain SGD on the SlimML index (what the grouped layout alone costs);
* SlimML, ε = 0.01, on mixed-label groups (the paper's) and on label-stratified groups;
  cold also with ``read_ahead`` 16 (16 minibatches chosen and read per query);
* random groups, a coreset-style subset and loss-proportional importance sampling, each
  removing SlimML's mean share of rows, and the fixed 25% coreset.

Time-to-accuracy is wall clock: the index build (SlimML's aggregation included) plus the
shortest ``loom_train`` of a ladder of epoch counts whose model reaches plain SGD's final test
accuracy − 0.4 points.  Final accuracy is after the longest train; rows and bytes per epoch are
what the engine returned (mean over its epochs).  A second table gives SlimML's removed share
checked by the exact oracle (the share of removed rows truly non-critical), a third the builds
and generation times, a fourth bytes and epoch time per storage format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.bench.engines import BenchEngine, engines
from loomdb.bench.slimml_runs import Task, Trained, build, tasks, time_to, train
from loomdb.bench.table import BenchTable

BATCH = 1024
TOLERANCE = 0.004  # 0.4 points of accuracy
MODELS = ("logistic", "svm", "linear")
SAME = "same"  # stands for SlimML's measured share of removed rows
METHODS: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
    ("SlimML", "mixed", {"skip": "slimml"}, ("cold", "warm")),
    ("plain SGD", "plain", {}, ("cold", "warm")),
    ("plain, grouped layout", "mixed", {}, ("cold", "warm")),
    ("SlimML stratified", "strat", {"skip": "slimml"}, ("cold", "warm")),
    ("SlimML read_ahead 16", "mixed", {"skip": "slimml", "read_ahead": 16}, ("cold",)),
    ("random, same share", "mixed", {"skip": "random", "skip_fraction": SAME}, ("cold", "warm")),
    ("coreset, same share", "mixed", {"skip": "coreset", "skip_fraction": SAME}, ("cold", "warm")),
    ("coreset 25%", "mixed", {"skip": "coreset"}, ("cold", "warm")),
    (
        "importance, same share",
        "mixed",
        {"skip": "importance", "skip_fraction": SAME},
        ("cold", "warm"),
    ),
]
INDEXES = {"plain": {}, "mixed": {"slimml": True}, "strat": {"slimml": True, "stratify": True}}
MODES = {"cold": {"cache_mb": 0}, "warm": {"cache_mb": 4000}}


def _tables(quick: bool) -> dict[str, BenchTable]:
    ladder = _ladder(quick)
    return {
        "main": BenchTable(
            f"slimml: time to plain SGD's accuracy − 0.4 points, batch {BATCH}, ladder {ladder} "
            "(over 100k rows: the first four)",
            [
                "engine",
                "data",
                "model",
                "mode",
                "method",
                "removed",
                "TTA s",
                "vs plain",
                "accuracy",
                "Δ points",
                "rows/epoch",
                "MB/epoch",
                "epoch s",
            ],
        ),  # fmt: skip
        "oracle": BenchTable(
            f"slimml: removed rows checked by the exact oracle, ε = 0.01, {ladder[-1]} epochs "
            "(over 100k rows: 8)",
            [
                "data",
                "model",
                "groups",
                "removed",
                "non-critical among removed",
                "non-critical rows",
            ],
        ),
        "builds": BenchTable(
            "slimml: index builds (wall clock) and SlimML's generation time",
            [
                "engine",
                "data",
                "rows",
                "plain s",
                "SlimML s",
                "generation s",
                "groups",
                "rows/group",
                "groups/batch",
                "stratified s",
            ],
        ),  # fmt: skip
        "formats": BenchTable(
            "slimml: svm, cold, 4 epochs, per storage format (bytes the engine returned)",
            [
                "engine",
                "data",
                "format",
                "plain MB/epoch",
                "SlimML MB/epoch",
                "read share",
                "plain epoch s",
                "SlimML epoch s",
                "vs plain",
                "removed",
            ],
        ),  # fmt: skip
    }


def _ladder(quick: bool, rows: int = 0) -> tuple[int, ...]:
    """Epoch counts trained from scratch; a large task converges in fewer epochs."""
    if quick:
        return (1, 2, 4)
    return (1, 2, 4, 8) if rows > 100_000 else (1, 2, 4, 8, 12)


def _options(options: dict[str, Any], share: float) -> dict[str, Any]:
    return {k: (min(round(share, 4), 0.99) if v == SAME else v) for k, v in options.items()}


def _ladder_runs(engine, task, index, options, ladder) -> list[Trained]:
    return [train(engine, task, index, {**options, "epochs": e}) for e in ladder]


def _configuration(
    engine: BenchEngine,
    task: Task,
    model: str,
    mode: str,
    built: dict,
    out: BenchTable,
    quick: bool,
) -> None:
    ladder = _ladder(quick, len(task.y))
    base = {"model": model, "batch_size": BATCH, **MODES[mode]}
    runs: dict[str, list[Trained]] = {}
    share = 0.0
    for name, index, options, modes in METHODS:
        if mode not in modes:
            continue
        runs[name] = _ladder_runs(
            engine, task, f"sb_{index}", {**base, **_options(options, share)}, ladder
        )
        if name == "SlimML":
            share = runs[name][-1].mean("removed")
    reference = runs["plain SGD"][-1].accuracy
    plain_tta = time_to(runs["plain SGD"], reference - TOLERANCE, built["plain"]["wall_s"])
    for name, index, _, modes in METHODS:
        if mode not in modes:
            continue
        last = runs[name][-1]
        tta = time_to(runs[name], reference - TOLERANCE, built[index]["wall_s"])
        epoch_s = float(np.median([h["seconds"] for h in last.history]))
        out.add(
            engine.name, task.name, model, mode, name, last.mean("removed"), tta,
            plain_tta / tta if tta == tta else float("nan"), last.accuracy,
            100 * (last.accuracy - reference), last.mean("rows"), last.mean("bytes_read") / 1e6,
            epoch_s,
        )  # fmt: skip


def _oracle(engine: BenchEngine, task: Task, model: str, out: BenchTable, quick: bool) -> None:
    for index in ("mixed", "strat"):
        options = {"model": model, "batch_size": BATCH, "skip": "slimml", "slimml_oracle": True}
        run = train(
            engine, task, f"sb_{index}", {**options, "epochs": _ladder(quick, len(task.y))[-1]}
        )
        shares = [h["noncritical_share"] for h in run.history if "noncritical_share" in h]
        out.add(
            task.name, model, index, run.mean("removed"),
            float(np.mean(shares)) if shares else float("nan"), run.mean("noncritical_rows"),
        )  # fmt: skip


def _formats(engine: BenchEngine, task: Task, out: BenchTable) -> None:
    for fmt in ("dense", "toc", "mlweaving"):
        build(engine, "sb_f", "sb_t", {"format": fmt, "slimml": True, "batch_size": BATCH})
        base = {"model": "svm", "epochs": 4, "cache_mb": 0, "batch_size": BATCH}
        plain = train(engine, task, "sb_f", base)
        slim = train(engine, task, "sb_f", {**base, "skip": "slimml"})
        p_s, s_s = (float(np.median([h["seconds"] for h in r.history])) for r in (plain, slim))
        out.add(
            engine.name, task.name, fmt, plain.mean("bytes_read") / 1e6,
            slim.mean("bytes_read") / 1e6, slim.mean("bytes_read") / plain.mean("bytes_read"),
            p_s, s_s, p_s / s_s, slim.mean("removed"),
        )  # fmt: skip
        engine.run(f"SELECT {engine.loom}loom_drop_index('sb_f')")


def _warm_up(engine: BenchEngine) -> None:
    """Load each code path once (numba caches, the server's imports) before anything is timed,
    so no method pays a one-time cost for another."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4))
    task = Task("warm-up", X, (X[:, 0] > 0).astype(float), X[:10], np.zeros(10))
    engine.load("sb_t", task.X, task.y)
    for fmt in ("dense", "toc", "mlweaving"):
        for key, opts in INDEXES.items():
            build(engine, f"sb_{key}", "sb_t", {**opts, "format": fmt})
            skip = {"skip": "slimml"} if opts else {}
            train(engine, task, f"sb_{key}", {"epochs": 1, "model": "svm", **skip})
            engine.run(f"SELECT {engine.loom}loom_drop_index('sb_{key}')")


def run(quick: bool = False, dsn: str | None = None) -> list[BenchTable]:
    out = _tables(quick)
    with engines(dsn) as found:
        for engine in found:
            _warm_up(engine)
            for task in tasks(quick):
                engine.load("sb_t", task.X, task.y)
                built = {
                    key: build(engine, f"sb_{key}", "sb_t", {**opts, "batch_size": BATCH})
                    for key, opts in INDEXES.items()
                }
                g = built["mixed"]["slimml"]
                out["builds"].add(
                    engine.name, task.name, len(task.y), built["plain"]["wall_s"],
                    built["mixed"]["wall_s"], g["seconds"], g["groups"],
                    len(task.y) / g["groups"], g["groups_per_batch"], built["strat"]["wall_s"],
                )  # fmt: skip
                for model in MODELS:
                    for mode in MODES:
                        _configuration(engine, task, model, mode, built, out["main"], quick)
                    if engine.name == "duckdb":  # the same arithmetic on both engines
                        _oracle(engine, task, model, out["oracle"], quick)
                for key in INDEXES:
                    engine.run(f"SELECT {engine.loom}loom_drop_index('sb_{key}')")
                if not task.name.startswith("synthetic"):
                    _formats(engine, task, out["formats"])
            engine.run(f"SELECT {engine.loom}loom_drop_model('sb_m')")
    out["main"].notes += [
        "TTA: index build + the shortest train of the ladder reaching plain SGD's final "
        "accuracy − 0.4 points (n/a: not reached); vs plain: plain's TTA / this TTA",
        "removed: mean share of sampled rows left out per epoch; rows, MB: read per epoch "
        "(MB: what the engine returned); same share: SlimML's removed share in that mode",
    ]
    if dsn is None:
        out["main"].notes.append("PostgreSQL not measured: pass --dsn to include it")
    return list(out.values())
