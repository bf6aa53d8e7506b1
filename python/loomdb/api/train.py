"""``loom_train``: validate options once, lay the source out (or use an index), fit, record.

Everything happens inside one (sub)transaction: a failed train leaves the catalog and the
tables exactly as they were.  A train without ``index`` lays the source out in a scratch index
that is dropped again before the model is written.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.api import index as index_api
from loomdb.api.train_options import LAYOUT, TRAIN
from loomdb.batch import Batch
from loomdb.errors import LoomOptionError, LoomStateError
from loomdb.learn.losses import LOSSES
from loomdb.learn.model import LinearModel, Scaling
from loomdb.learn.optimizers import DEFAULT_LR
from loomdb.learn.schedules import DEFAULT_DECAY
from loomdb.learn.trainer import Problem, TrainConfig, fit
from loomdb.options import parse_json, validate
from loomdb.store import catalog, formats
from loomdb.store.db import Database
from loomdb.store.names import check_name
from loomdb.store.source import SourceProfile, classes, profile_from_index


class IndexEpochs:
    """Feeds the trainer from an index: the first batches train, the last ones validate.

    Epoch 1 reads the stored batches; when they are at most ``cache_mb`` and the format reads
    the same bytes every epoch (not mlweaving, whose precision may change per epoch), later
    epochs reuse the decoded batches instead of reading them again (``bytes_read`` 0,
    ``cached`` true in the history).
    """

    def __init__(self, db: Database, info: dict[str, Any], validation_fraction: float, opts):
        self.db, self.info, self.opts = db, info, opts
        fmt = formats.get(info["format"])
        self.budget = 0 if getattr(fmt, "prescaled", None) else opts["cache_mb"] * 1_000_000
        self.cached: list[Batch] | None = None
        n = int(info["batches"])
        held = int(round(n * validation_fraction)) if validation_fraction else 0
        if validation_fraction and (held < 1 or held >= n):
            raise LoomOptionError(
                f"validation_fraction {validation_fraction} leaves no batch to "
                f"{'validate' if held < 1 else 'train'} on ({n} batches)",
                hint="use a smaller batch_size or a different validation_fraction",
            )
        self.train_stop = n - held

    def train_batches(self, epoch: int, history: list[dict[str, Any]]) -> Iterable[Batch]:
        if self.cached is not None:
            return [
                dataclasses.replace(b, nbytes=0, meta={**b.meta, "cached": True})
                for b in self.cached
            ]
        batches = index_api.read_batches(
            self.db,
            self.info,
            first=0,
            stop=self.train_stop,
            epoch=epoch,
            history=history,
            train_options=self.opts,
        )
        return self._keeping(batches) if self.budget else batches

    def _keeping(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        kept: list[Batch] | None = []
        size = 0
        for batch in batches:
            size += batch.nbytes
            if kept is not None and size <= self.budget:
                kept.append(batch)
            else:
                kept = None  # too large to keep: every epoch reads the index
            yield batch
        self.cached = kept

    def validation_batches(self) -> Iterable[Batch]:
        if self.train_stop >= int(self.info["batches"]):
            return ()
        return index_api.read_batches(
            self.db, self.info, first=self.train_stop, train_options=self.opts
        )


def _class_weights(
    opts: dict[str, Any], prof: SourceProfile, cls: list[float]
) -> np.ndarray | None:
    cw = opts["class_weight"]
    if cw == "none":
        return None
    if cw == "balanced":
        counts = np.array([prof.label_counts[c] for c in cls], dtype=np.float64)
        return counts.sum() / (len(cls) * counts)
    weights = np.ones(len(cls))
    for key, w in cw.items():
        try:
            weights[cls.index(float(key))] = float(w)
        except ValueError:
            raise LoomOptionError(
                f"class_weight names label {key!r}, which is not a class of the source",
                hint=f"classes: {', '.join(f'{c:g}' for c in cls)}",
            ) from None
    return weights


def _warm_start(db: Database, name: str, kind: str, features: list[str], cls) -> LinearModel:
    row = catalog.get_model(db, name)
    model = model_from_row(row)
    if model.kind != kind or model.features != features or model.classes != cls:
        raise LoomOptionError(
            f"cannot warm-start model '{name}': it is a {model.kind} model over "
            f"{len(model.features)} features and {len(model.classes)} classes",
            hint="warm_start needs the same model kind, features and classes",
        )
    return model


def model_from_row(row: dict[str, Any]) -> LinearModel:
    return LinearModel.from_dict(
        {
            "kind": row["kind"],
            "features": row["feature_names"],
            "coef": row["coefficients"],
            "intercept": row["intercept"],
            "scaling": row["standardization"],
            "classes": row["classes"],
        }
    )


def _config(opts: dict[str, Any]) -> TrainConfig:
    return TrainConfig(
        kind=opts["model"],
        epochs=opts["epochs"],
        tol=opts["tol"],
        lr=opts["lr"] if opts["lr"] is not None else DEFAULT_LR[opts["optimizer"]],
        lr_schedule=opts["lr_schedule"],
        lr_decay=(
            opts["lr_decay"] if opts["lr_decay"] is not None else DEFAULT_DECAY[opts["lr_schedule"]]
        ),
        optimizer=opts["optimizer"],
        l1=opts["l1"],
        l2=opts["l2"],
        fit_intercept=opts["fit_intercept"],
    )


def _scratch_name(model: str) -> str:
    """The layout of a train without an index: '$' keeps it apart from every name a user may
    give (check_name refuses it), so dropping a leftover can never drop a user's index."""
    return ("train$" + model)[:63]


def train(db: Database, name: str, source: str, label: str, options: str | None) -> str:
    check_name(name, "model")
    given = parse_json(options)
    fmt_name = given.get("format") or "dense"
    fmt = formats.get(fmt_name)
    opts = index_api.with_format_defaults(
        validate(given, [*TRAIN, *getattr(fmt, "OPTIONS", [])]), fmt
    )
    exists = catalog.model_exists(db, name)
    if exists and not (opts["warm_start"] or opts["replace"]):
        catalog.require_absent(db, name, "model")
    backend = registry.get(opts["backend"])
    started = time.perf_counter()
    with db.atomic():
        if opts["index"]:
            info = catalog.get_index(db, check_name(opts["index"], "index"))
            _check_index_matches(info, source, label, given)
            _check_backend(backend, info["format"])
            if not opts["allow_stale"]:
                _check_fresh(db, info)
        else:
            _check_backend(backend, opts["format"])
            layout = {k: opts[k] for k in (o.name for o in LAYOUT) if k in opts}
            layout.update({k: opts[k] for k in opts if k not in {o.name for o in TRAIN}})
            scratch = _scratch_name(name)
            if catalog.index_exists(db, scratch):
                index_api.drop(db, scratch)
            info = index_api.build(
                db, scratch, source, label, {**layout, "if_not_exists": False}, quiet=True
            )
        laid_out = time.perf_counter()
        prof = profile_from_index(info)
        kind = opts["model"]
        fmt = formats.get(info["format"])
        if opts["precision"] is not None and fmt.name != "mlweaving":
            raise LoomOptionError(
                f"'precision' applies to mlweaving indexes; this one is {fmt.name}",
                hint='build one with {"format": "mlweaving"} or CREATE INDEX … USING mlweaving',
            )
        prescaled = getattr(fmt, "prescaled", None)
        cls = classes(prof) if LOSSES[kind].classifier else []
        init = _warm_start(db, name, kind, prof.features, cls) if opts["warm_start"] else None
        problem = Problem(
            features=prof.features,
            # a prescaled format (mlweaving) already yields normalised values: train in that
            # space, then store the model with the format's scaling so it predicts on raw rows
            scaling=(
                Scaling.from_stats("none", prof.stats)
                if prescaled
                else init.scaling
                if init
                else Scaling.from_stats(opts["standardize"], prof.stats)
            ),
            classes=cls,
            class_weights=_class_weights(opts, prof, cls) if cls else None,
            init=init,
        )
        epochs = IndexEpochs(db, info, opts["validation_fraction"], opts)
        progress = _progress(db, name) if opts["progress"] else None
        model, history = fit(epochs, problem, _config(opts), backend, progress)
        if prescaled:
            model.scaling = Scaling.from_stats(prescaled, prof.stats)
        if not opts["index"]:
            index_api.drop(db, info["name"])
        finished = time.perf_counter()
        timings = {
            "layout_s": round(laid_out - started, 6),
            "train_s": round(finished - laid_out, 6),
            "total_s": round(finished - started, 6),
        }
        stored_opts = {k: v for k, v in opts.items() if v is not None and k != "features"}
        row = {
            "name": name,
            "uid": uuid.uuid4().hex,
            "kind": kind,
            "coefficients": model.W.tolist(),
            "intercept": model.b.tolist(),
            "feature_names": model.features,
            "classes": model.classes,
            "standardization": model.scaling.to_dict(),
            "options": stored_opts,
            "history": history,
            "rows_processed": prof.rows,
            "rows_skipped": prof.skipped,
            "timings": timings,
            "storage_format": info["format"],
            "backend": backend.name,
            "source": source if source else info["source"],
            "label": prof.label,
            "report": getattr(backend, "last_report", None),
        }
        catalog.put_model(db, row)
    return json.dumps(
        {
            "model": name,
            "kind": kind,
            "features": len(model.features),
            "classes": model.classes,
            "epochs": len(history),
            "loss": history[-1]["loss"] if history else None,
            "rows": prof.rows,
            "skipped": prof.skipped,
            "format": info["format"],
            "backend": backend.name,
            "seconds": timings["total_s"],
        }
    )


def _check_index_matches(info: dict[str, Any], source: str, label: str, given: dict) -> None:
    if source and source != info["source"]:
        raise LoomOptionError(
            f"index '{info['name']}' was built on {info['source']!r}, not {source!r}",
            hint="pass the index's source (or NULL) as the source argument",
        )
    if label and label.lower() != str(info["label"]).lower():
        raise LoomOptionError(
            f"index '{info['name']}' has label '{info['label']}', not '{label}'",
        )
    for key in ("features", "format", "batch_size", "seed", "nulls", "dtype"):
        if key in given:
            raise LoomOptionError(
                f"the '{key}' option belongs to the index, which is already built",
                hint=f"rebuild the index to change it, or drop '{key}' from the options",
            )


def _check_backend(backend: Any, fmt: str) -> None:
    if not backend.supports(fmt):
        raise LoomOptionError(
            f"backend '{backend.name}' cannot train on the {fmt} format",
            hint="choose another backend or format; see loom_backends()",
        )


def _check_fresh(db: Database, info: dict[str, Any]) -> None:
    from loomdb.store.names import quote_ident, relation

    cols = [quote_ident(c) for c in [*info["columns"], info["label"]]]
    rel = relation(info["source"], db.dialect)
    where = (
        None
        if info["options"].get("nulls") != "skip"
        else ("NOT (" + " OR ".join(f"{c} IS NULL" for c in cols) + ")")
    )
    if db.signature(rel, cols, where) != info["source_signature"]:
        raise LoomStateError(
            f"index '{info['name']}' is older than the last change to {info['source']}",
            hint=f"rebuild it with loom_reindex('{info['name']}'), "
            'or pass {"allow_stale": true} to train on it as it is',
        )


def _progress(db: Database, name: str):
    def report(e: dict[str, Any]) -> None:
        rate = f", {e['rows_per_s']:,.0f} rows/s" if e.get("rows_per_s") else ""
        val = f", validation loss {e['val_loss']:.6g}" if "val_loss" in e else ""
        extra = f", precision {e['precision']}" if "precision" in e else ""
        db.notice(
            f"loom_train {name}: epoch {e['epoch']}/{e['epochs']}, "
            f"loss {e['loss']:.6g}{val}{rate}{extra}"
        )

    return report
