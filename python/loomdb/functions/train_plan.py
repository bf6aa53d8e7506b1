"""A train's options, checked once against the format, the index and the backend.

No paper section.  Honour or refuse, never drop: an option the format or backend cannot honour
is an error naming it; on an index, layout options equal to what the index was built with are
accepted and only a conflict is refused; a backend's own defaults (fpga-sim: no L2, min–max)
apply where the user gave nothing, and ``used`` is what the catalog records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.errors import LoomDivergedError, LoomError, LoomOptionError
from loomdb.functions.train_options import TRAIN
from loomdb.learn.losses import LOSSES, Loss
from loomdb.learn.model import class_text
from loomdb.learn.optimizers import AUTOMATIC_STEP, DEFAULT_LR
from loomdb.learn.schedules import DEFAULT_DECAY
from loomdb.seams import IndexInfo
from loomdb.store import budget, catalog, formats, layout
from loomdb.store.formats.base import Format

# Every format defaults to z-score, mlweaving too: its stored min–max values get the map folded
# on top (Scaling.over_minmax), so the model is dense's at 32 bits.  Its own min–max map as the
# default put the default L2 on weights of columns whose variance is at most ¼ (1/12 uniform):
# a noiseless linear table's mse was 1.1e-4 against dense's 7.6e-7.  fpga-sim keeps min–max
# (the engine computes on the codes): a backend's own default.
DEFAULT_STANDARDIZE = "zscore"
# A sparse source defaults to min–max: z-scoring scales a column seen in one row of n by about
# √n, and on Zipf click data (100,000 training rows, 2^20 columns, 10 epochs) its held-out
# log-loss was 4.83 against min–max's 0.47 (accuracy 0.68 against 0.77).
SPARSE_STANDARDIZE = "minmax"
# the options that choose what an any-precision format reads: what they apply to, the format,
# how CREATE INDEX names it
FIDELITY = {
    "precision": ("any-precision indexes (mlweaving)", "mlweaving", "mlweaving"),
    "scans": ("progressive image indexes (pcr)", "pcr", "pcr (image)"),
}


def standardize_for(opts: dict[str, Any], sparse: bool = False) -> str:
    """The standardisation a train uses: the asked one (or the backend's own, fpga-sim's
    min–max), else min–max for a sparse source, else z-score, on every format."""
    default = SPARSE_STANDARDIZE if sparse else DEFAULT_STANDARDIZE
    return opts["standardize"] or default


def _names_label(db: Any, info: IndexInfo, label: str) -> bool:
    """Whether the label a train names is index ``info``'s (``_names_column``)."""
    return _names_column(db, info, label, info.label)


def _named_columns(db: Any, info: IndexInfo, given: Any, built: Any) -> Any:
    """The 'features' a train gives, each spelled as the index's column it names
    (``_names_column``), or as given where it names none: compared with the index's after."""
    if not isinstance(given, list) or not isinstance(built, list) or len(given) != len(built):
        return given
    return [b if _names_column(db, info, g, b) else g for g, b in zip(given, built)]


def _names_column(db: Any, info: IndexInfo, name: Any, column: str) -> bool:
    """Whether ``name``, given to a train on index ``info``, names the index's ``column`` as
    a source's column is resolved (``store.source.resolve``): the column of that name, else,
    where the source has none, the one of that name in another case; DuckDB's names ignore
    case.  On PostgreSQL 'Y' is not an index's y where the table has a "Y" too."""
    if not isinstance(name, str):
        return False
    if db.fold_name(name) == db.fold_name(column):
        return True
    if name.lower() != column.lower():
        return False
    from loomdb.store.source import columns_of

    try:
        with db.as_role(info.owner):
            columns = columns_of(db, info.table)[1]
    except LoomError:  # a source that cannot be read: its staleness check says so
        return True
    return name not in columns


@dataclass
class Plan:
    given: dict[str, Any]
    opts: dict[str, Any]
    fmt: Format

    @property
    def loss(self) -> Loss:
        return LOSSES[self.opts["model"]]

    @property
    def layout_options(self) -> dict[str, Any]:
        """The layout options of a train without an index."""
        return {k: self.opts[k] for k in layout.options_of(self.fmt).names()}

    @property
    def cache_bytes(self) -> int:
        """What the train keeps in memory between epochs: nothing on a distributed train's
        driver (``cache_mb`` is refused there: the workers keep the partitions)."""
        if self.opts["cluster"] is not None:
            return 0
        return int(self.opts["cache_mb"]) * budget.MB

    @property
    def lr_schedule(self) -> str:
        """As given; else constant for the automatic step, inverse-t for a given lr."""
        given = self.opts["lr_schedule"]
        return given or ("constant" if self.opts["lr"] is None else "inverse-t")

    @property
    def lr_decay(self) -> float:
        decay = self.opts["lr_decay"]
        return DEFAULT_DECAY[self.lr_schedule] if decay is None else float(decay)

    def fidelity(self, fmt: Format) -> int | str:
        """What the train reads of ``fmt`` (a bound format): its option's value, else all."""
        value = self.opts[fmt.fidelity] if fmt.fidelity else None
        return fmt.top() if value is None else value

    def default_lr(self, safe: float | None) -> float:
        """The step when no ``lr`` is given; ``safe`` the automatic one, None where the rows'
        norms are beyond double precision (refused then: no step keeps training finite)."""
        if self.opts["optimizer"] not in AUTOMATIC_STEP:
            return DEFAULT_LR[self.opts["optimizer"]]
        if safe is None:
            raise LoomDivergedError(
                "the rows' squared norms are beyond double precision (features near 1e308 left "
                "unstandardized): no step size keeps training finite",
                hint='standardize the features ({"standardize": "zscore"}) or rescale them',
            )
        return safe

    def check_index(self, info: IndexInfo, source: str | None, label: str | None, db: Any) -> None:
        if source and not catalog.same_source(db, source, info.table):
            raise LoomOptionError(
                f"index '{info.name}' was built on {info.table!r}, not {source!r}",
                hint="pass the index's source (or NULL) as the source argument",
            )
        if label and not _names_label(db, info, label):
            raise LoomOptionError(
                f"index '{info.name}' has label '{info.label}', not '{label}'",
                hint=f"pass '{info.label}' (or NULL) as the label, or train on an index "
                f"built WITH (label = {label})",
            )
        built = {**info.options, "features": layout.feature_columns(info)}
        for key in layout.options_of(formats.get(info.format)).names():
            given, had = self.given.get(key), built.get(key)
            if isinstance(given, dict) and isinstance(had, dict):  # sparse: the keys given
                had = {k: had.get(k) for k in given}
            if key == "features" and key in self.given:  # named as a source's columns are
                given = _named_columns(db, info, given, had)
            if key in self.given and given != had:
                raise LoomOptionError(
                    f"index '{info.name}' was built with {key} = {built.get(key)!r}; "
                    f"this train asks for {self.given[key]!r}",
                    hint=f"leave '{key}' out, or train on an index built with the {key} you "
                    "want (loom_create_index; loom_reindex keeps an index's options)",
                )

    def check_layout(self, laid: layout.Layout) -> None:
        fmt = laid.fmt
        for option, (what, name, using) in FIDELITY.items():
            if self.opts[option] is not None and fmt.fidelity != option:
                raise LoomOptionError(
                    f"'{option}' applies to {what}; this is {fmt.name}",
                    hint=f'build one with {{"format": "{name}"}} or CREATE INDEX … USING {using}',
                )
        value = self.opts[fmt.fidelity] if fmt.fidelity else None
        if isinstance(value, int) and value > fmt.top():
            where = f"index '{laid.info.name}'" if laid.info.name else "the layout"
            raise LoomOptionError(
                f"'{fmt.fidelity}' is {value}, but {where} holds {fmt.top()}",
                hint=f"ask for 1 … {fmt.top()}, or leave '{fmt.fidelity}' out to read all",
            )
        backend = registry.get(self.opts["backend"])
        if not backend.supports(fmt.name):
            raise LoomOptionError(
                f"backend '{backend.name}' cannot train on the {fmt.name} format",
                hint="choose another backend or format; see loom_backends()",
            )
        check_index = getattr(backend, "check_index", None)  # a backend's limits on a layout
        if check_index is not None:
            check_index(laid.info)
        self.check_skip(laid, backend)

    @property
    def skip(self) -> str | None:
        """The skip policy asked for (None: every row of every minibatch)."""
        return None if self.opts["skip"] in (None, "none") else self.opts["skip"]

    def check_skip(self, laid: layout.Layout, backend: Any) -> None:
        """Skipping is honoured on a grouped layout with a step-by-step backend, else refused;
        its options apply to the policies that use them only."""
        where = f"index '{laid.info.name}'" if laid.info.name else "this layout"
        if laid.grouped and hasattr(backend, "run_epoch"):
            raise LoomOptionError(
                f"backend '{backend.name}' runs whole epochs and cannot read a SlimML layout "
                "group by group",
                hint="train on the cpu backend, or on an index built without slimml",
            )
        if self.skip and not laid.grouped:
            raise LoomOptionError(
                f"'skip' needs a layout in SlimML groups; {where} was built without slimml",
                hint="build one with CREATE INDEX … WITH (slimml = true) or "
                "{\"slimml\": true}, or leave 'skip' out",
            )
        baselines = ("random", "coreset", "importance")
        uses: dict[str, tuple[str, ...]] = {
            "epsilon": ("slimml",),
            "effect_l2": ("slimml",),
            "slimml_oracle": ("slimml",),
            "skip_fraction": baselines,
            "read_ahead": ("slimml", *baselines),
        }
        for key, policies in uses.items():
            if self.given.get(key) is not None and self.skip not in policies:
                raise LoomOptionError(
                    f"'{key}' applies to skip {' or '.join(repr(p) for p in policies)}; this "
                    f"train skips {self.skip or 'nothing'}",
                    hint=f"leave '{key}' out, or ask for that skip",
                )
        if self.skip in ("random", "importance") and self.opts["skip_fraction"] is None:
            raise LoomOptionError(
                f"skip '{self.skip}' removes a given share of rows: it needs 'skip_fraction'",
                hint='e.g. {"skip": "random", "skip_fraction": 0.5}',
            )

    def check_backend(self, k: int) -> None:
        backend = registry.get(self.opts["backend"])
        check = getattr(backend, "check", None)
        if check is not None:
            check(self.opts, k)

    def class_weights(
        self, counts: dict[float, int], cls: list[float], names: list[str] | None = None
    ) -> np.ndarray | None:
        """Each class's weight, in ``cls``'s order; ``names``: a text label's classes (by
        code), which an object's keys name as the user sees them."""
        cw = self.opts["class_weight"]
        if cw == "none":
            return None
        if cw == "balanced":
            n = np.array([counts[c] for c in cls], dtype=np.float64)
            return n.sum() / (len(cls) * n)
        weights = np.ones(len(cls))
        named: dict[int, str] = {}  # a class's place: the key that named it
        for key, w in cw.items():
            at = _class_at(key, cls, names)
            if at in named:
                raise LoomOptionError(
                    f"class_weight names class {class_shown(cls[at], names)} twice: as "
                    f"{named[at]!r} and as {key!r}",
                    hint="name each class once",
                )
            named[at] = key
            weights[at] = float(w)
        if not (weights > 0).any():  # every row would weigh 0: a model trained on nothing
            raise LoomOptionError(
                "class_weight gives every class a weight of 0, so no row would train the model",
                hint="give at least one class a positive weight (a class left out weighs 1)",
            )
        return weights

    def used(self, info: IndexInfo) -> dict[str, Any]:
        """Every option with the value this train used (layout ones from the layout)."""
        out = {k: v for k, v in self.opts.items() if v is not None}
        out.update({k: v for k, v in info.options.items() if v is not None})
        out["lr_decay"] = self.lr_decay
        out["lr_schedule"] = self.lr_schedule
        out.pop("features", None)
        if out.get("cluster") is not None:  # refused there: the workers keep partitions whole
            out.pop("cache_mb", None)
        return out


def class_shown(c: float, names: list[str] | None) -> str:
    """A class as the user sees it: a text label's name, else the number."""
    return repr(names[int(c)]) if names is not None else class_text(c)


def _class_at(key: str, cls: list[float], names: list[str] | None) -> int:
    """The place among ``cls`` of the class a class_weight key names: a text label's class
    by its name, a number's by its value ("1" and "1.0" name the same class)."""
    try:
        return names.index(key) if names is not None else cls.index(float(key))
    except ValueError:
        raise LoomOptionError(
            f"class_weight names label {key!r}, which is not a class of the source",
            hint=f"classes: {', '.join(class_shown(c, names) for c in cls)}",
        ) from None


def plan(given: dict[str, Any]) -> Plan:
    fmt = formats.get(given.get("format") if isinstance(given.get("format"), str) else None)
    opts = (TRAIN + layout.options_of(fmt)).parse(given)
    backend = registry.get(opts["backend"])
    for key, value in getattr(backend, "defaults", {}).items():
        if key not in given:
            opts[key] = value
    if opts["class_weight"] != "none" and not LOSSES[opts["model"]].classifier:
        raise LoomOptionError(
            f"'class_weight' weighs a classifier's classes; a {opts['model']} model learns a "
            "number and has none",
            hint="leave 'class_weight' out, or train a classifier "
            '({"model": "logistic"} or "svm")',
        )
    p = Plan(given, opts, fmt)
    if opts["lr_decay"] is not None and p.lr_schedule == "constant":  # it would change nothing
        why = "" if opts["lr_schedule"] else " (the default with the automatic step size)"
        raise LoomOptionError(
            "'lr_decay' sets how the inverse-t and exponential schedules lower the step; this "
            f"train's schedule is constant{why}",
            hint='give it with {"lr_schedule": "inverse-t"} or "exponential", or leave '
            "'lr_decay' out",
        )
    decay = opts["lr_decay"]
    if p.lr_schedule == "exponential" and decay is not None and not 0 < decay < 1:
        raise LoomOptionError(  # lr·decay^epoch: 0 stops after the first epoch, > 1 grows
            f"'lr_decay' of the exponential schedule multiplies the step by it every epoch: it "
            f"must be above 0 and below 1; got {decay:g}",
            hint='e.g. {"lr_decay": 0.9} (the default), or {"lr_schedule": "constant"} to keep '
            "the step",
        )
    return p
