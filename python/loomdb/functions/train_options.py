"""Every option ``loom_train`` accepts, declared once; choices come from the registries.

No paper section.  The layout options (``store.layout.OPTIONS``) and the format's own options
are accepted too: a train without an index lays its source out with them.  ``None`` defaults
are decided from the data or the backend (the automatic step size, a backend's own defaults)
and the catalog records the values actually used.
"""

from __future__ import annotations

from loomdb.accel import registry
from loomdb.codecs.jpeg_scans import MAX_SCANS
from loomdb.distributed.options import OPTIONS as DISTRIBUTED
from loomdb.learn.losses import LOSSES
from loomdb.learn.optimizers import OPTIMIZERS
from loomdb.learn.precision import SCHEDULES as PRECISION_SCHEDULES
from loomdb.learn.scaling import METHODS
from loomdb.learn.schedules import SCHEDULES
from loomdb.learn.skipping import POLICIES
from loomdb.options import (
    AnyOf,
    Boolean,
    Choices,
    Interval,
    Option,
    Options,
    Text,
    WeightMap,
)

SKIPS = ["none", *POLICIES]

_OWN = Options(
    "loom_train",
    Option("model", Choices(LOSSES), "logistic", "linear (least squares), logistic or svm"),
    Option("epochs", Interval(True, 1, 100_000), 1000, "passes over the data at most"),
    Option(
        "tol",
        Interval(False, 0),
        1e-4,
        "stop when the (validation) loss improves by less than this fraction (0: never)",
    ),
    Option("lr", Interval(False, 0, low_open=True), None, "the step size (default: from the data)"),
    Option(
        "lr_schedule",
        Choices(SCHEDULES),
        None,
        "how the step decays per epoch (default: constant for the automatic step, else inverse-t)",
    ),
    Option("lr_decay", Interval(False, 0), None, "the schedule's decay"),
    Option("optimizer", Choices(OPTIMIZERS), "nesterov"),
    Option("l1", Interval(False, 0), 0.0, "L1 penalty (a proximal step)"),
    Option("l2", Interval(False, 0), 1e-4, "L2 penalty on the weights"),
    Option("fit_intercept", Boolean(), True),
    Option(
        "class_weight",
        AnyOf(Choices(["none", "balanced"]), WeightMap()),
        "none",
        "'balanced' or an object of label: weight",
    ),
    Option(
        "standardize",
        Choices(METHODS),
        None,
        "zscore (default; minmax for sparse sources), minmax or none",
    ),
    Option("warm_start", Boolean(), False, "continue training the model of this name"),
    Option("replace", Boolean(), False, "overwrite the model of this name"),
    Option("validation_fraction", Interval(False, 0, 0.9), 0.0, "hold out the last batches"),
    Option(
        "test_fraction",
        Interval(False, 0, 0.9),
        None,
        "hold this share of the source's rows out of training: a split seeded by 'seed' "
        "(default 0: none)",
    ),
    Option(
        "split_column",
        Text(),
        None,
        "a column naming each row's part: 'train' or 'test' (text), or true for test (boolean)",
    ),
    Option("index", Text(), None, "train over an existing index (loom_create_index)"),
    Option("backend", Choices(registry.names), "cpu", "see loom_backends()"),
    Option("progress", Boolean(), True, "report layout and epochs (NOTICE in PostgreSQL)"),
    Option(
        "precision",
        AnyOf(Interval(True, 1, 32), Choices(PRECISION_SCHEDULES)),
        None,
        "bits read per value from an mlweaving index",
    ),
    Option(
        "scans",
        AnyOf(Interval(True, 1, MAX_SCANS), Choices(PRECISION_SCHEDULES)),
        None,
        "scan groups read per image from a pcr index (default: all)",
    ),
    Option(
        "cache_mb",
        Interval(True, 0, 1_000_000),
        None,
        "keep up to this many MB of batches between epochs (0: read every epoch; default: a "
        "quarter of DuckDB's memory_limit, 256 in PostgreSQL)",
    ),
    Option("allow_stale", Boolean(), False, "train on an index whose source changed"),
    Option(
        "parallel",
        Interval(True, 1, 64),
        1,
        "train each epoch as this many shards averaged (Bismarck): PostgreSQL's parallel "
        "workers or DuckDB threads",
    ),
    Option(
        "skip",
        Choices(SKIPS),
        None,
        "leave rows out of each minibatch of a SlimML layout: 'slimml' (its remover) or a "
        "baseline ('random', 'coreset', 'importance')",
    ),
    Option(
        "epsilon",
        Interval(False, 0, 1, low_open=True),
        None,
        "SlimML's ε: the share of a minibatch's total effect its removed groups may carry "
        "(default 0.01)",
    ),
    Option(
        "skip_fraction",
        Interval(False, 0, 0.99),
        None,
        "the share of rows a baseline removes (random, importance: required; coreset: 0.75)",
    ),
    Option("effect_l2", Boolean(), None, "count the L2 term in SlimML's effects"),
    Option(
        "read_ahead",
        Interval(True, 1, 4096),
        None,
        "minibatches whose groups are chosen together (at the first one's parameters) and read "
        "in one query when skipping (default 1: each at its own step, as SlimML)",
    ),
    Option(
        "slimml_oracle",
        Boolean(),
        None,
        "also read the removed groups and record how many of their rows were truly "
        "non-critical (for measurement: it reads every group)",
    ),
)
TRAIN = _OWN + DISTRIBUTED  # cluster, compress, compress_model, step_batches, dsn (distributed/)
