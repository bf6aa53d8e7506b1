"""Every option ``loom_train`` and ``loom_create_index`` accept, declared once."""

from __future__ import annotations

from loomdb.options import Option, in_range, one_of

_pos = in_range(0, float("inf"), lo_open=True)
_nonneg = in_range(0, float("inf"))


def _features(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)


def _precision(v: object) -> bool:
    if isinstance(v, str):
        return v in ("adaptive", "adaptive-plateau")
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 32


def _class_weight(v: object) -> bool:
    if isinstance(v, str):
        return v in ("none", "balanced")
    return isinstance(v, dict) and all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in v.values()
    )


LAYOUT = [
    Option("format", (str,), "dense", doc="storage format: dense, toc or mlweaving"),
    Option("features", (list,), None, _features, "a non-empty list of column names"),
    Option(
        "batch_size",
        (int,),
        None,
        in_range(1, 1_000_000),
        "an integer from 1 to 1000000",
        doc="rows per stored minibatch (default: the format's, 32 for dense)",
    ),
    Option("seed", (int,), 42, expect="an integer", doc="the seed of the one-time shuffle"),
    Option("nulls", (str,), "error", one_of("skip", "error"), "'skip' or 'error'"),
    Option("dtype", (str,), "float64", one_of("float64", "float32"), "'float64' or 'float32'"),
    Option("if_not_exists", (bool,), False),
]

TRAIN = [
    *[o for o in LAYOUT if o.name != "if_not_exists"],
    Option(
        "model",
        (str,),
        "logistic",
        one_of("linear", "logistic", "svm"),
        "'linear', 'logistic' or 'svm'",
    ),
    Option("epochs", (int,), 20, in_range(1, 100_000), "an integer from 1 to 100000"),
    Option("tol", (float,), None, _nonneg, "a number >= 0"),
    Option("lr", (float,), None, _pos, "a number > 0"),
    Option(
        "lr_schedule",
        (str,),
        "inverse-t",
        one_of("constant", "inverse-t", "exponential"),
        "'constant', 'inverse-t' or 'exponential'",
    ),
    Option("lr_decay", (float,), None, _nonneg, "a number >= 0"),
    Option("optimizer", (str,), "sgd", one_of("sgd", "adam"), "'sgd' or 'adam'"),
    Option("l1", (float,), 0.0, _nonneg, "a number >= 0"),
    Option("l2", (float,), 1e-4, _nonneg, "a number >= 0"),
    Option("fit_intercept", (bool,), True),
    Option(
        "class_weight",
        (str, dict),
        "none",
        _class_weight,
        "'none', 'balanced' or an object mapping labels to weights >= 0",
    ),
    Option(
        "standardize",
        (str,),
        "zscore",
        one_of("zscore", "minmax", "none"),
        "'zscore', 'minmax' or 'none'",
    ),
    Option("warm_start", (bool,), False),
    Option("replace", (bool,), False),
    Option("validation_fraction", (float,), 0.0, in_range(0, 0.9), "a number from 0 to 0.9"),
    Option("index", (str,), None, doc="train over an existing index (loom_create_index)"),
    Option("backend", (str,), None, doc="see loom_backends()"),
    Option("progress", (bool,), True, doc="report each epoch (NOTICE in PostgreSQL)"),
    Option(
        "precision",
        (int, str),
        None,
        _precision,
        "an integer from 1 to 32, 'adaptive' or 'adaptive-plateau'",
        doc="bits read per value from an mlweaving index",
    ),
    Option(
        "cache_mb",
        (int,),
        256,
        in_range(0, 1_000_000),
        "an integer >= 0",
        doc="keep up to this many MB of decoded batches between epochs (0: read every epoch)",
    ),
    Option(
        "allow_stale",
        (bool,),
        False,
        doc="train on an index even if its source changed since it was built",
    ),
]
