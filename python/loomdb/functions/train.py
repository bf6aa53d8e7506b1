"""``loom_train``: options parsed once, a layout found or made, the trainer run, the model kept.

No paper section of its own (the layout is Bismarck's, the formats and backends cite theirs).
Everything happens inside one (sub)transaction: a failed train leaves the catalog and the
tables exactly as they were, and a model whose coefficients are not finite is never stored.
The catalog records the options actually used — the automatic step size, the minibatch size,
the standardisation — not the ones asked for.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.distributed import options as distributed
from loomdb.errors import LoomConflictError, LoomDataError, LoomDivergedError, LoomOptionError
from loomdb.functions import deploy, train_parallel
from loomdb.functions.train_plan import Plan, class_shown, plan, standardize_for
from loomdb.learn import skipping, slim, step_size
from loomdb.learn.model import LinearModel
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.learn.slim import Points
from loomdb.learn.sparse_model import SparseLinearModel, from_layout, warm_start_over
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.options import parse_json
from loomdb.seams import IndexInfo, ModelRecord
from loomdb.store import catalog, layout
from loomdb.store.epochs import Epochs
from loomdb.store.names import check_name
from loomdb.store.source import classes as classes_of
from loomdb.store.split import Split


def train(db: Any, name: str, source: str | None, label: str | None, options: str | None) -> str:
    check_name(name, "model")
    p = plan(index_format(db, parse_json(options)))
    try:
        with db.atomic():
            catalog.hold_model(db, name)
            exists = catalog.model_exists(db, name)
            if exists and not (p.opts["warm_start"] or p.opts["replace"]):
                catalog.require_absent(db, name, "model")
            if exists:  # before the fit: a grant shares predicting, not training
                deploy.require_owner(db, name, "retrain it")
            record, model = fit_record(db, name, p, source, label, f"loom_train {name}")
            catalog.put_model(db, record, replace=exists)
            if exists:
                deploy.refresh(db, name, model, db.role())
    except LoomConflictError:  # (DuckDB finds another session's row of the name at COMMIT)
        raise catalog.taken("model", name) from None
    return json.dumps(_summary(record, model))


def index_format(db: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with the format of the index it names, where it names no format: the index's
    own layout options (a pcr index's ``image_size``, …) are then read as that format's and,
    like every layout option, accepted at the value the index was built with (``check_index``)
    rather than refused as unknown to the default format."""
    index = given.get("index")
    if "format" in given or not isinstance(index, str) or not index:
        return given
    fmt = catalog.index_format(db, index)
    return given if fmt is None else {**given, "format": fmt}


def fit_record(
    db: Any,
    name: str,
    p: Plan,
    source: str | None,
    label: str | None,
    what: str,
    metric: str | None = None,
    shared: tuple[layout.Layout, float] | None = None,
) -> tuple[ModelRecord, LinearModel]:
    """Lay the source out (or open the index), train, and return the model's catalog record
    (not yet written) and the model: one train, what ``loom_train`` and each trial of
    ``loom_tune`` run (``metric``: the tune's, scored on the validation rows; ``shared``: a
    layout of :func:`open_layout` for this plan's :func:`layout_key`, and the seconds this
    train spent making it — used as it is and left open for the next train)."""
    cluster = _prepare(db, p)
    if p.opts["warm_start"] and catalog.model_exists(db, name):
        _continue_split(name, p, catalog.get_model(db, name).options.get("split"))
    started = time.perf_counter() - (0.0 if shared is None else shared[1])
    laid = _layout(db, p, source, label, what) if shared is None else shared[0]
    try:
        _check_layout(p, laid, source, label, db)
        laid_out = time.perf_counter()
        model, history, used, report = _fit(db, name, p, laid, what, cluster, metric)
    finally:
        if shared is None:
            laid.close()
    finished = time.perf_counter()
    timings = {
        "layout_s": round(laid_out - started, 6),
        "train_s": round(finished - laid_out, 6),
        "total_s": round(finished - started, 6),
    }
    record = _record(name, p, laid.info, model, history, used, timings, source, report)
    return record, model


def _prepare(db: Any, p: Plan) -> Any:
    """Refuse what the plan cannot run, fill in the engine's default cache, and resolve the
    cluster it trains on (None: this process)."""
    train_parallel.check_options(p.opts)
    _defaults(db, p)
    cluster = distributed.resolve(db, p.given, p.opts)  # None: trained in this process
    if cluster is not None and p.opts["parallel"] > 1:
        raise LoomOptionError(
            "'parallel' trains shards of each epoch in this database; with 'cluster' the Dask "
            "workers share each step",
            hint="leave 'parallel' out when training on a cluster",
        )
    return cluster


def _defaults(db: Any, p: Plan) -> None:
    if p.opts["cache_mb"] is None:  # the engine's default, recorded as the value used
        p.opts["cache_mb"] = db.cache_default_mb()


def layout_key(db: Any, p: Plan) -> str:
    """What decides the layout a train opens or makes: two plans with the same key train on
    the same minibatches, so they may share one (``loom_tune``'s trials)."""
    _defaults(db, p)
    o = p.opts
    decides = [o["index"], o["allow_stale"], p.layout_options, p.cache_bytes]
    decides += [train_parallel.in_database(db, o), o["test_fraction"], o["split_column"]]
    return json.dumps(decides, sort_keys=True, default=str)


def open_layout(db: Any, p: Plan, source: str | None, label: str | None, what: str):
    """The layout ``fit_record`` would make (or the index it would open) for ``p``, for
    several trains to share; the caller closes it."""
    train_parallel.check_options(p.opts)  # refused before any layout, as fit_record refuses
    _defaults(db, p)
    return _layout(db, p, source, label, what)


def _layout(db: Any, p: Plan, source: str | None, label: str | None, what: str) -> layout.Layout:
    split = Split.of(p.opts)
    if p.opts["index"]:
        if split is not None:
            raise LoomOptionError(
                "'test_fraction' and 'split_column' split a source's rows; an index's rows are "
                "already laid out",
                hint="train on the source (without 'index') to hold rows out, or build the index "
                "on a SELECT of the training rows",
            )
        return layout.open_index(db, check_name(p.opts["index"], "index"), p.opts["allow_stale"])
    if not source:
        raise LoomOptionError(
            "loom_train needs a source (a table, view or SELECT) or an index",
            hint='pass the source, or {"index": "name"} to train on an index',
        )
    quiet = not p.opts["progress"]
    shared = train_parallel.in_database(db, p.opts)
    opts = p.layout_options
    budget = None if p.opts["cluster"] is not None else p.cache_bytes  # None: in a table
    return layout.scratch(db, source, label or "", opts, budget, what, quiet, shared, split)


def _check_layout(
    p: Plan, laid: layout.Layout, source: str | None, label: str | None, db: Any
) -> None:
    if p.opts["index"]:
        p.check_index(laid.info, source, label, db)
    p.check_layout(laid)


def _problem(db: Any, name: str, p: Plan, laid: layout.Layout) -> Problem:
    kind, info, fmt = p.opts["model"], laid.info, laid.fmt
    features = fmt.features(info)
    if p.loss.classifier and info.stats.get("label_classes") is None:
        _check_exact_classes(info)
    if not p.loss.classifier:
        _check_label_magnitude(info)
    cls = classes_of(info.label, info.label_counts) if p.loss.classifier else []
    if info.stats.get("label_classes") is not None and not p.loss.classifier:
        raise LoomDataError(
            f"label '{info.label}' is text: a {kind} model learns a number",
            hint='train a classifier ({"model": "logistic"} or "svm") on text classes',
        )
    init = _warm_start(db, name, p, info, features, cls) if p.opts["warm_start"] else None
    sparse = bool(info.options.get("sparse"))
    method = init.scaling.method if init else standardize_for(p.opts, sparse)
    codes = hasattr(registry.get(p.opts["backend"]), "run_epoch")  # fpga-sim: on the codes
    raw = raw_scaling(method, info, None if codes else init)
    scaling = Scaling.over_minmax(method, info.stats, raw) if fmt.value_map == "minmax" else raw
    label = info.stats.get("label", [0.0, 0.0, 0.0, 1.0])
    return Problem(
        features=features,
        scaling=scaling,
        classes=cls,
        class_weights=p.class_weights(info.label_counts, cls, info.stats.get("label_classes"))
        if cls
        else None,
        init=init,
        label_moments=(float(label[2]), float(label[3])),
        raw_scaling=raw,
    )


def raw_scaling(method: str, info: IndexInfo, init: LinearModel | None) -> Scaling:
    """The map from raw values to the standardised features the coefficients are over: a
    warm start's own, which carries on (its coefficients are in its units; the new source's
    statistics would move every prediction before a step), else the layout's statistics'.
    A sparse model's coefficients are re-laid over the layout's columns, its map with them;
    a backend computing on an index's codes (fpga-sim) takes the index's min–max."""
    if init is not None and not info.options.get("sparse"):
        return init.scaling
    return Scaling.from_stats(method, info.stats)


# A regression label reaching this in magnitude has a squared residual at the zero model that
# overflows a double: every step size diverged, and the guard's hint blamed the step and the
# features.  (Labels somewhat below it may still overflow a minibatch's sum and diverge.)
HUGE_LABEL = 2.0**512


def _check_label_magnitude(info: IndexInfo) -> None:
    low, high = (float(v) for v in info.stats.get("label", [0.0, 0.0])[:2])
    largest = max(abs(low), abs(high))
    if largest >= HUGE_LABEL:
        raise LoomDataError(
            f"label '{info.label}' reaches {largest:.3g} in magnitude: its square, a linear "
            "model's loss, overflows a double",
            hint=f"divide it by a power of ten in a SELECT source ({info.label} / 1e… AS "
            f"{info.label}) and multiply the predictions back",
        )


EXACT = 2.0**53  # every integer below this in magnitude is exactly a double


def _check_exact_classes(info: IndexInfo) -> None:
    """A numeric label's classes are read as doubles: at 2^53 and beyond, integers stop being
    exact (9007199254740993 reads as 9007199254740992), so distinct classes would merge and a
    class would be stored as another number; refused.  It costs nothing: the label's minimum
    and maximum (as doubles) are among the statistics every layout gathers in its profiling
    pass.  Those cannot tell 2^53 itself from 2^53 + 1, so 2^53 is refused too; so is a double
    label that large (its values are then whole numbers 2 or more apart: an identifier's, not
    a number's — text keeps them)."""
    low, high = (float(v) for v in info.stats.get("label", [0.0, 0.0])[:2])
    largest = max(abs(low), abs(high))
    if largest >= EXACT:
        raise LoomDataError(
            f"label '{info.label}' holds values of 2^53 or more in magnitude (up to about "
            f"{largest:.6g}): a classifier reads a numeric label as doubles, which cannot keep "
            "such classes apart",
            hint=f"cast it to text to use the values as class names, e.g. a SELECT source of "
            f"CAST({info.label} AS VARCHAR) AS {info.label}",
        )


def _split_rows(split: dict[str, Any], info: Any, held: int) -> dict[str, Any]:
    rows = {"train": info.rows - held, "validation": held, "skipped": info.skipped}
    return {**split, "rows": {**split["rows"], **rows}}


def _kept_lr(lr: float, history: list[dict[str, Any]]) -> float:
    """The step size the kept run took: after a restart, the smaller one it retried with, not
    the one that diverged."""
    backed_off = [h["next_lr"] for h in history if "restart" in h]
    return backed_off[-1] if backed_off else lr


def _fit(db: Any, name: str, p: Plan, laid: layout.Layout, what: str, cluster=None, metric=None):
    info = laid.info
    problem = _problem(db, name, p, laid)
    p.check_backend(problem.k)
    backend = registry.get(p.opts["backend"])
    given = p.opts["lr"]
    safe = _automatic_step(p, laid, problem, backend, estimate=given is None)  # None: no step
    lr = given if given is not None else p.default_lr(safe)
    lr = getattr(backend, "step_size", float)(lr)  # what the backend can take (fpga-sim: 2^-j)
    config = _config(p, laid, lr, safe, metric)
    skip, skip_used = _skip(p, laid, problem)
    read_ahead = skip_used.get("read_ahead", 1)
    keeper = getattr(backend, "keeper", None)  # a device that keeps epochs (the gpu backend)
    device = keeper() if keeper is not None and cluster is None else None
    epochs = Epochs(laid, p.opts["validation_fraction"], p.cache_bytes, read_ahead, device)
    train_parallel.check_layout(p.opts, epochs)
    progress = None
    if p.opts["progress"]:
        progress = _progress(db, what)
    report = None
    if cluster is None:
        with train_parallel.runner(db, p.opts, laid, epochs, problem, config) as runner:
            model, history = fit(
                epochs, problem, config, backend, progress, db.check_interrupt, skip, runner
            )
    else:  # the epochs run on a cluster (distributed/; skip is refused there)
        from loomdb.distributed.fit import fit_distributed

        model, history, report = fit_distributed(
            cluster, laid, epochs, problem, config, progress, db.check_interrupt
        )
    if not (np.isfinite(model.W).all() and np.isfinite(model.b).all()):
        raise LoomDivergedError(
            f"model '{name}' has non-finite coefficients and was not stored",
            hint="give a smaller lr, standardize the features, or lower l2",
        )
    used = {**p.used(info), "lr": _kept_lr(lr, history), "standardize": problem.scaling.method}
    used.update(skip_used)
    if "split" in used:  # the rows of each part: they add up to the source's
        used["split"] = _split_rows(used["split"], info, epochs.validation_rows())
    if cluster is not None and report is not None:
        from loomdb.distributed.fit import used as used_on

        used.update(used_on(cluster, report))
    inputs = laid.fmt.inputs(info.options)
    if inputs is not None:  # what predicting needs besides the weights (an image's pipeline)
        used["inputs"] = model.inputs = {**inputs, "column": info.columns[0]}
    if info.stats.get("encoding") is not None:  # how columns become features (store/encoding.py)
        used["encoding"] = info.stats["encoding"]
        model.encoding = info.stats["encoding"]
    elif booleans := _booleans(model.features, info.stats):
        used["booleans"] = model.booleans = booleans
    if info.stats.get("label_classes") is not None:  # a text label's classes, by code
        used["label_classes"] = info.stats["label_classes"]
        model.class_names = info.stats["label_classes"]
    model.scaling = problem.raw_scaling or Scaling.from_stats(problem.scaling.method, info.stats)
    sparse = info.options.get("sparse")
    if sparse:  # coefficients kept by source column (learn/sparse_model.py)
        model = from_layout(model, np.asarray(info.stats["columns"]), sparse["width"])
    return model, history, used, report


def _booleans(features: list[str], stats: dict[str, Any]) -> list[str]:
    """The features read from boolean columns (as 0 and 1), as the layout's profile found
    them: a compiled or deployed model takes them as such (PostgreSQL casts no boolean to a
    double)."""
    kinds = stats.get("kinds") or {}
    return [f for f in features if kinds.get(f) == "boolean"]


def _config(
    p: Plan, laid: layout.Layout, lr: float, safe: float | None, metric: str | None = None
) -> TrainConfig:
    """The trainer's settings from the plan's options, at step size ``lr``."""
    return TrainConfig(
        kind=p.opts["model"],
        epochs=p.opts["epochs"],
        tol=p.opts["tol"] or None,  # 0: run every epoch
        lr=lr,
        lr_schedule=p.lr_schedule,
        lr_decay=p.lr_decay,
        optimizer=p.opts["optimizer"],
        l1=p.opts["l1"],
        l2=p.opts["l2"],
        fit_intercept=p.opts["fit_intercept"],
        precision=p.fidelity(laid.fmt),
        top_precision=laid.fmt.top(),
        safe_lr=safe,
        metric=metric,
        batch_size=int(laid.info.options.get("batch_size") or 0),
    )


def _skip(p: Plan, laid: layout.Layout, problem: Problem) -> tuple[Any, dict[str, Any]]:
    """The skip policy a train asked for (SlimML's remover or a baseline) and the values of
    its options it used."""
    if not p.skip:
        return None, {}
    info = laid.info
    raw = problem.raw_scaling or Scaling.from_stats(problem.scaling.method, info.stats)
    points = Points.of(laid.aggregates(), problem, raw, targets=p.skip == "slimml")
    used: dict[str, Any] = {"skip": p.skip, "read_ahead": p.opts["read_ahead"] or 1}
    if p.skip == "slimml":
        used["epsilon"] = p.opts["epsilon"] if p.opts["epsilon"] is not None else slim.EPSILON
        used["effect_l2"] = bool(p.opts["effect_l2"])
        used["slimml_oracle"] = bool(p.opts["slimml_oracle"])
    else:
        fraction = p.opts["skip_fraction"]
        used["skip_fraction"] = skipping.CORESET_FRACTION if fraction is None else fraction
    policy = skipping.make(
        p.skip,
        points,
        p.opts["model"],
        epsilon=used.get("epsilon", slim.EPSILON),
        fraction=used.get("skip_fraction"),
        fit_intercept=p.opts["fit_intercept"],
        include_l2=p.opts["l2"] if used.get("effect_l2") else 0.0,
        oracle=used.get("slimml_oracle", False),
        seed=int(info.options.get("seed", 42)),
    )
    return policy, used


def _automatic_step(
    p: Plan, laid: layout.Layout, problem: Problem, backend: Any, estimate: bool
) -> float | None:
    """The default step (``learn/step_size.py``): row norms from the layout, λ estimated by
    power iteration on the first batches with the backend's products (where it has them and
    the step is the default; a given lr only needs the safe bound its restarts fall back to)."""
    info = laid.info
    method = problem.scaling.method
    norms = info.stats["sq_norm"][method]
    fidelity = p.fidelity(laid.fmt)
    precision = fidelity if isinstance(fidelity, int) else laid.fmt.top()
    lam = None
    if estimate and not hasattr(backend, "run_epoch"):
        batches = step_size.sample(laid.batches(0, info.batches, precision))
        shift, scale = problem.scaling.shift, problem.scaling.scale
        sparse = info.options.get("sparse")
        start = step_size.start_vector(
            len(scale),
            p.opts["fit_intercept"],
            info.stats["columns"] if sparse else None,
            sparse["width"] if sparse else None,
        )
        lam = step_size.power_lambda(
            batches, backend.margins, backend.gradient, shift, scale, p.opts["fit_intercept"], start
        )
    batch = int(info.options["batch_size"])
    return step_size.auto_step(
        p.opts["model"], info.rows, batch, norms, lam, p.opts["l2"], p.opts["fit_intercept"]
    )


def _warm_start(
    db: Any, name: str, p: Plan, info: IndexInfo, features: list[str], cls: list
) -> LinearModel:
    """The model of this name to continue from, refused unless it is the same problem: kind,
    features, classes (a text label's names included) and sparseness; its standardisation and
    intercept carry on, and a given option that would change them is refused."""
    record = catalog.get_model(db, name)
    model = model_of(record)
    kind, sparse = p.opts["model"], info.options.get("sparse")
    if (
        model.kind != kind
        or model.features != features
        or model.classes != cls
        or isinstance(model, SparseLinearModel) != bool(sparse)
    ):
        raise LoomOptionError(
            f"cannot warm-start model '{name}': it is a {model.kind} model over "
            f"{len(model.features)} features and {len(model.classes)} classes",
            hint="warm_start needs the same model kind, features and classes",
        )
    names = info.stats.get("label_classes")
    if (model.class_names or None) != (names or None):  # the same codes naming other classes
        raise LoomOptionError(
            f"cannot warm-start model '{name}': its classes are "
            f"{_classes_shown(model.classes, model.class_names)}; this source's are "
            f"{_classes_shown(cls, names)}",
            hint="warm_start needs the same model kind, features and classes",
        )
    _continue_options(name, p, model, record)
    if isinstance(model, SparseLinearModel) and sparse:
        return warm_start_over(model, np.asarray(info.stats["columns"]), sparse["width"])
    return model


def _classes_shown(classes: list, names: list[str] | None) -> str:
    return ", ".join(class_shown(c, names) for c in classes)


SPLIT_OPTIONS = ("test_fraction", "split_column")


def _continue_split(name: str, p: Plan, recorded: Any) -> None:
    """A warm start continues the model's test split, as its standardisation: the rows it
    held out stay out (training on them would leave its test metrics measuring rows it
    learnt); left out, the split is the model's (and so is the seed it hashes rows with),
    and one that differs — or a split of a model that trained on every row — is refused."""
    had = Split.recorded(name, {"split": recorded}) if isinstance(recorded, dict) else None
    asked = Split.of(p.opts) if any(k in p.given for k in SPLIT_OPTIONS) else None
    if had is None:
        if asked is not None:
            raise LoomOptionError(
                f"cannot warm-start model '{name}' with a test split: it trained on every row, "
                "the rows the split would hold out included",
                hint="leave 'test_fraction' and 'split_column' out, or train it afresh with "
                '{"replace": true}',
            )
        return
    if p.opts["index"]:
        raise LoomOptionError(
            f"cannot warm-start model '{name}' on an index: it holds test rows out of its "
            f"source ({_split_shown(had)}), and an index's rows include them",
            hint='warm-start it on its source, or train afresh on the index with {"replace": true}',
        )
    if asked is None and "seed" in p.given and had.column is None:
        asked = Split(fraction=had.fraction, seed=int(p.opts["seed"]))  # hashes other rows
    if asked is not None and asked != had:
        raise LoomOptionError(
            f"cannot warm-start model '{name}' with {_split_shown(asked)}: it was trained with "
            f"{_split_shown(had)}, so some of its test rows would be trained on",
            hint="leave 'test_fraction', 'split_column' and 'seed' out to continue with the "
            'model\'s own split, or train it afresh with {"replace": true}',
        )
    if had.column is not None:
        p.opts["split_column"] = had.column
    else:
        p.opts["test_fraction"], p.opts["seed"] = had.fraction, had.seed


def _split_shown(split: Split) -> str:
    if split.column is not None:
        return f"split_column {split.column!r}"
    return f"test_fraction {split.fraction:g} and seed {split.seed}"


def _continue_options(name: str, p: Plan, model: LinearModel, record: ModelRecord) -> None:
    """A warm start continues the model's standardisation and intercept: an option asking for
    another is refused (the coefficients are in its standardised units; dropping a fitted
    intercept is not continuing), one left out takes the model's, as the catalog records."""
    method, asked = model.scaling.method, p.opts["standardize"]
    if asked is not None and asked != method:
        whose = "" if "standardize" in p.given else f" (backend {p.opts['backend']}'s default)"
        raise LoomOptionError(
            f"cannot warm-start model '{name}' with standardize = {asked!r}{whose}: its "
            f"coefficients are over {method!r}-standardised features",
            hint="leave 'standardize' out to continue with the model's own, or train it "
            'afresh with {"replace": true}',
        )
    fitted = bool(record.options.get("fit_intercept", True))
    if "fit_intercept" not in p.given:
        p.opts["fit_intercept"] = fitted
    elif fitted and not p.opts["fit_intercept"]:
        raise LoomOptionError(
            f"cannot warm-start model '{name}' with fit_intercept = false: it has a fitted "
            "intercept",
            hint="leave 'fit_intercept' out to continue fitting it, or train it afresh with "
            '{"fit_intercept": false, "replace": true}',
        )


def model_of(record: ModelRecord) -> LinearModel:
    if isinstance(record.coefficients, dict):  # a sparse source's model
        return SparseLinearModel.from_record(
            record.kind,
            record.feature_names,
            record.coefficients,
            record.intercept,
            record.standardization,
            record.classes,
        )
    return LinearModel.from_dict(
        {
            "kind": record.kind,
            "features": record.feature_names,
            "coef": record.coefficients,
            "intercept": record.intercept,
            "scaling": record.standardization,
            "classes": record.classes,
            "inputs": record.options.get("inputs"),
            "encoding": record.options.get("encoding"),
            "class_names": record.options.get("label_classes"),
            "booleans": record.options.get("booleans"),
        }
    )


def _record(name, p, info, model, history, used, timings, source, report=None) -> ModelRecord:
    simulated = [h["simulated_seconds"] for h in history if "simulated_seconds" in h]
    stored = model.stored()
    return ModelRecord(
        name=name,
        kind=model.kind,
        coefficients=stored["coefficients"],
        intercept=model.b.tolist(),
        feature_names=model.features,
        classes=model.classes,
        standardization=stored["standardization"],
        options=used,
        history=history,
        rows_processed=info.rows,
        rows_skipped=info.skipped,
        timings=timings,
        storage_format=info.format,
        backend=p.opts["backend"],
        source=source or info.source,
        label=info.label,
        report={"engine": "MLWeaving (simulated)", "simulated_seconds": simulated}
        if simulated
        else report,
    )


def _summary(record: ModelRecord, model: LinearModel) -> dict[str, Any]:
    epochs = [h for h in record.history if "epoch" in h]
    stored = (
        {"stored_coefficients": len(model.index)} if isinstance(model, SparseLinearModel) else {}
    )
    return {
        "model": record.name,
        "kind": record.kind,
        "features": model.width,
        **stored,
        "classes": model.classes,
        **({"class_names": model.class_names} if model.class_names else {}),
        "epochs": len(epochs),
        "loss": epochs[-1]["loss"] if epochs else None,
        "restarts": len(record.history) - len(epochs),
        "rows": record.rows_processed,
        "skipped": record.rows_skipped,
        "format": record.storage_format,
        "backend": record.backend,
        "lr": record.options["lr"],
        "seconds": record.timings["total_s"],
    }


EVERY_EPOCH = 10  # epochs reported one by one; after them, at most one report a second
REPORT_S = 1.0


def _progress(db: Any, what: str):
    last: dict[str, Any] = {"at": time.monotonic(), "precision": None}

    def report(e: dict[str, Any]) -> None:
        now = time.monotonic()
        if not (
            e["epoch"] <= EVERY_EPOCH
            or e["epoch"] == e["epochs"]
            or e["precision"] != last["precision"]
            or now - last["at"] >= REPORT_S
        ):
            return
        last.update(at=now, precision=e["precision"])
        rate = f", {e['rows_per_s']:,.0f} rows/s" if e.get("rows_per_s") else ""
        val = f", validation loss {e['val_loss']:.6g}" if "val_loss" in e else ""
        db.notice(
            f"{what}: epoch {e['epoch']}/{e['epochs']}, loss {e['loss']:.6g}{val}{rate}, "
            f"precision {e['precision']}"
        )

    return report
