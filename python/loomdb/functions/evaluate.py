"""``loom_evaluate`` on a source and ``loom_evaluate_index`` on an index's stored form.

A model trained on images (a pcr index) is evaluated on the source's image column, read at
``{"scans": k}`` scan groups or as stored (``functions/predict_image.py``); one trained on a
sparse source, on its indices/values columns read as CSR chunks.

No paper section for the metrics (BigQuery ML's ML.EVALUATE set with its confusion matrix, and
``loom_roc_curve``, ML.ROC_CURVE's rows: ``learn/metrics.py``);
``loom_evaluate_index`` computes A·w on the stored form by a backend (TOC §4: on compressed
blobs; MLWeaving: on the woven planes at 32 bits) without decompressing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from loomdb.accel import registry
from loomdb.codecs.jpeg_scans import MAX_SCANS
from loomdb.errors import LoomDataError, LoomNotFoundError, LoomOptionError, LoomStateError
from loomdb.functions import model_cache
from loomdb.functions.predict_image import features as image_features
from loomdb.functions.predict_image import image_inputs
from loomdb.learn import metrics
from loomdb.learn.model import LinearModel, class_text
from loomdb.learn.scaling import Scaling
from loomdb.learn.sparse_model import SparseLinearModel
from loomdb.options import Choices, Interval, Option, Options, parse_json
from loomdb.store import catalog, layout
from loomdb.store import encoding as encodings
from loomdb.store.image_source import IMAGE
from loomdb.store.names import check_name, quote_ident
from loomdb.store.source import columns_of, complete_rows, label_value, number
from loomdb.store.split import PARTS, Split

EVAL_CHUNK = 65536
IMAGE_CHUNK = 256
EVALUATE = Options(
    "loom_evaluate",
    Option("scans", Interval(True, 1, MAX_SCANS), None, "read a model's images at k scan groups"),
    Option(
        "split",
        Choices(list(PARTS)),
        None,
        "evaluate on the source's rows of this part of the model's split (default: every row)",
    ),
)


NO_ROWS = "no rows with finite, non-NULL features and label to evaluate on"


def _json(result: dict[str, Any]) -> str:
    """JSON text with an undefined metric (NaN: roc_auc of one class…) as null, never NaN."""
    clean = {
        k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in result.items()
    }
    return json.dumps(clean)


def _metrics(model: LinearModel, Z: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    pred = model.labels(Z)
    if not model.classifier:
        return metrics.regression(y, pred)
    binary = Z.shape[1] == 1
    score = Z[:, 0] if binary else None
    proba = model.probabilities(Z) if binary and model.kind == "logistic" else None
    return _named(model, metrics.classification(y, pred, model.classes, score, proba))


def _named(model: LinearModel, result: dict[str, Any]) -> dict[str, Any]:
    """A text label's class names where the metrics name classes by code."""
    if not model.class_names:
        return result
    matrix = result["confusion_matrix"]
    matrix["labels"] = model.names_of(np.asarray(matrix["labels"]))
    for each in result.get("per_class", []):
        each["class"] = model.names_of(np.asarray([each["class"]]))[0]
    return result


def scored(
    db: Any, name: str, source: str, scans: int | None = None, part: str | None = None
) -> tuple[LinearModel, np.ndarray, np.ndarray, int]:
    """Model ``name``, the margins and labels of ``source``'s usable rows (finite, non-NULL
    features and label; of ``part`` of the model's split where given) and how many rows were
    skipped; a clear error for a missing column."""
    model = model_cache.load(db, name)
    record = catalog.get_model(db, name)
    label = record.label
    rel, kinds = columns_of(db, source)
    if part is not None:
        rel = _part(db, name, record.options, source, rel, kinds, part)
    if model.inputs:
        Z, y = _image_margins(db, name, model, label, source, rel, kinds, scans)
    elif scans is not None:
        raise LoomOptionError(
            f"'scans' applies to models trained on images (pcr); '{name}' learnt from columns",
            hint="leave 'scans' out",
        )
    else:
        Z, y = _margins(db, name, model, label, source, rel, kinds)
    total = int(db.query(f"SELECT count(*) FROM {rel}")[0][0])
    ok = np.isfinite(Z).all(axis=1) & np.isfinite(y)
    return model, Z[ok], y[ok], total - int(ok.sum())


def _part(db, name, used, source, rel, kinds, part) -> str:
    """``rel`` narrowed to ``part`` of model ``name``'s split, recomputed from its recorded
    options; refused when the source no longer holds as many test rows as the train saw."""
    split = Split.recorded(name, used)
    narrowed = split.restrict(db, rel, kinds, source, part)
    rows = used["split"].get("rows")
    held = rows.get("test") if isinstance(rows, dict) else None
    if part == "test" and isinstance(held, int):
        now = int(db.query(f"SELECT count(*) AS n FROM {narrowed}")[0][0])
        if now != held:
            raise LoomStateError(
                f"model '{name}' held out {held} test rows; {source} now gives {now}",
                hint="evaluate on the source the model was trained on, as it was (the split "
                "follows the rows' order); a split_column keeps a split fixed",
            )
    return narrowed


def evaluate(db: Any, name: str, source: str, options: str | None = None) -> str:
    opts = EVALUATE.parse(parse_json(options))
    scans, part = opts["scans"], opts["split"]
    model, Z, y, skipped = scored(db, name, source, scans, part)
    result: dict[str, Any] = {"model": name, "rows": len(y), "skipped": skipped}
    if scans is not None:
        result["scans"] = scans
    if part is not None:
        result["split"] = part
    if not len(y):
        return _json(result | {"error": NO_ROWS})
    return _json(result | _metrics(model, Z, y))


def roc_curve(db: Any, name: str, source: str) -> list[tuple[float, float, float]]:
    """``loom_roc_curve``: (threshold, tpr, fpr) rows of a binary classifier on ``source``;
    thresholds on loom_predict_proba's scale (logistic) or the margin's (svm)."""
    model = model_cache.load(db, name)
    if not model.classifier or len(model.classes) != 2:
        what = "a linear regression" if not model.classifier else "one-vs-rest"
        raise LoomOptionError(
            f"loom_roc_curve needs a binary classifier; model '{name}' is {what}",
            hint="loom_evaluate reports mse, mae and r2 for regression, and each class's "
            "precision, recall and f1 (per_class) and the confusion matrix for one-vs-rest",
        )
    model, Z, y, _ = scored(db, name, source)
    _two_classes(model, name, source, y, catalog.get_model(db, name).label)
    positive = y == model.classes[1]
    if positive.all() or not positive.any():
        raise LoomDataError(
            f"a ROC curve needs rows of both classes; source {source!r} has "
            f"{int(positive.sum())} positive and {int((~positive).sum())} negative usable rows",
            hint="evaluate on rows holding both classes (finite, non-NULL features and label)",
        )
    score = model.probabilities(Z) if model.kind == "logistic" else Z[:, 0]
    points = metrics.roc_curve(positive, score)
    return list(zip(*(p.tolist() for p in points), strict=True))


def _two_classes(model: LinearModel, name: str, source: str, y: np.ndarray, label: str) -> None:
    """Refuse labels that are neither of a binary model's classes: such a row is neither
    positive nor negative, so no curve counts it (a text label's other values never get here:
    they read as NULL, and are skipped)."""
    other = np.unique(y[~np.isin(y, model.classes)])
    if len(other):
        shown = ", ".join(map(class_text, other[:5])) + (", …" if len(other) > 5 else "")
        classes = ", ".join(map(class_text, model.classes))
        raise LoomDataError(
            f"source {source!r} holds rows labelled {shown}, neither of model '{name}''s "
            f"classes {classes}: such a row is neither positive nor negative",
            hint=f"draw the curve on the rows of those two classes (a SELECT source: … WHERE "
            f"{quote_ident(label)} IN ({classes})), or check that the source is the model's",
        )


def _require(source: str, name: str, kinds: dict, columns: list[str], reads: str) -> None:
    missing = [c for c in columns if c not in kinds]
    if missing:
        label = missing[0] == columns[-1]
        raise LoomNotFoundError(
            f"source {source!r} has no {'label column' if label else 'column'} {missing[0]!r} "
            f"of model '{name}'",
            hint=f"the model reads {reads}",
        )


def _margins(db, name, model, label, source, rel, kinds) -> tuple[np.ndarray, np.ndarray]:
    encoding = encodings.load(model.encoding)
    if encoding is not None:  # the source columns, encoded as the layout did
        cols = [*encodings.columns(encoding), label]
        _require(source, name, kinds, cols, f"{', '.join(cols[:10])} and its label {label}")
        double = db.type("double")
        rel, buckets = encodings.with_buckets(rel, encoding, db.dialect, kinds)
        y = _label(model, label, kinds, double)
        values = [*encodings.codes_sql(encoding, double, db.dialect, buckets), y]
        where = _classed(model, complete_rows([*encodings.strict(encoding), label]), y)
        return _read_margins(db, model, rel, values, where, encodings.expander(encoding))
    cols = [*model.features, label]
    _require(source, name, kinds, cols, f"{', '.join(model.features[:10])} and its label {label}")
    where = complete_rows(cols)
    if isinstance(model, SparseLinearModel):
        y = number(label, kinds[label], db.type("double"))
        return _sparse_margins(db, model, rel, y, where)
    double = db.type("double")
    _numeric(source, name, kinds, model.features)
    y = _label(model, label, kinds, double)
    values = [*(number(c, kinds[c], double) for c in model.features), y]
    return _read_margins(
        db, model, rel, values, _classed(model, where, y), encodings.expander(None)
    )


def _numeric(source: str, name: str, kinds: dict[str, str], features: list[str]) -> None:
    """Refuse a feature column that is not a number (text, a date, a list…), naming it, as
    loom_predict_row does: the engine's cast failed on it, or read a text of digits."""
    bad = next((c for c in features if kinds[c] not in ("numeric", "boolean")), None)
    if bad is not None:
        raise LoomDataError(
            f"the feature column {bad!r} of source {source!r} is not a number "
            f"({kinds[bad]}), and model '{name}' learnt it as one",
            hint=f"cast it in a SELECT source: SELECT …, CAST({quote_ident(bad)} AS DOUBLE "
            f"PRECISION) AS {quote_ident(bad)} FROM …",
        )


def _classed(model: LinearModel, where: str, label: str) -> str:
    """``where`` and, for a model whose classes are text, that the label (``label``: its SQL)
    names one: its other rows are skipped and counted, not read (PostgreSQL's packed rows hold
    no NULL)."""
    return f"{where} AND {label} IS NOT NULL" if model.class_names else where


def _label(model: LinearModel, label: str, kinds: dict[str, str], double: str) -> str:
    """The label as the model's classes are numbered: a text label by its class code (a value
    that is none of the model's classes reads as NULL: the row is skipped, and counted).  A
    label column of another type on a model whose classes are text is matched to them: a
    number to the class whose text is that number (1 and 1.0 to '1': the same on both
    engines, whose texts of a double differ), anything else by its text (true to 'true');
    read as a number, 1 would be class code 1 (the second class) and 2 past the classes."""
    kind, names = kinds[label], model.class_names
    if not names and kind == "text":  # read as numbers, 'ants' failed in the engine's cast
        learnt = (
            "numbers"
            if model.kind == "linear"
            else "numeric classes " + ", ".join(map(class_text, model.classes))
        )
        raise LoomDataError(
            f"the label column {label!r} is text, and the model was trained on {learnt}",
            hint=f"evaluate with the label it was trained on, a number (SELECT …, CAST("
            f"{quote_ident(label)} AS DOUBLE PRECISION) AS {quote_ident(label)} for text "
            "holding numbers); a model learns text classes from a text label",
        )
    if not names or kind == "text":
        return label_value(label, kind, names, double)
    if kind == "numeric":
        return _number_codes(label, names, double)
    return encodings.class_codes(label, names, double)  # by CAST(… AS TEXT)


NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _number_codes(column: str, classes: list[str], double: str) -> str:
    """SQL for a numeric column as the code of the class (among text ``classes``) whose text
    is that number ('1', '1.0', '1e0' all name 1), a ``double``; NULL for a number no class
    names.  Two classes naming one number ('1' and '1.0') leave a number ambiguous: refused."""
    codes: dict[float, int] = {}
    for code, name in enumerate(classes):
        if NUMBER_TEXT.fullmatch(name) is None or not np.isfinite(named := float(name)):
            continue
        if named in codes:
            raise LoomDataError(
                f"the label is a number, and the model's classes {classes[codes[named]]!r} and "
                f"{name!r} both name {named:g}",
                hint="cast the label to text in a SELECT source to match the classes by their "
                "text: SELECT …, CAST(label AS TEXT) AS label FROM …",
            )
        codes[named] = code
    if not codes:
        return f"CAST(NULL AS {double})"
    value = f"CAST({quote_ident(column)} AS {double})"
    whens = "".join(
        f"WHEN CAST({encodings.number_literal(v)} AS {double}) THEN {code} "
        for v, code in codes.items()
    )
    return f"CAST(CASE {value} {whens}ELSE NULL END AS {double})"


def _read_margins(db, model, rel, values, where, expand) -> tuple[np.ndarray, np.ndarray]:
    """Margins and labels of the rows ``values`` reads (``expand``: what makes the features
    and the label of them, ``encoding.expander``)."""
    chunks = [expand(c) for c in db.read_matrix(rel, values, where, None, EVAL_CHUNK)]
    data = np.concatenate(chunks) if chunks else np.empty((0, len(model.features) + 1))
    Z = model.margins(data[:, :-1]) if len(data) else np.empty((0, 1))
    return Z, data[:, -1]


def _sparse_margins(
    db: Any, model: SparseLinearModel, rel: str, label: str, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """Margins and labels of a sparse source's complete rows, read as CSR chunks."""
    indices, values = (quote_ident(c) for c in model.features)
    scores, labels = [np.empty((0, len(model.b)))], [np.empty(0)]
    for y, rows in db.read_sparse(rel, label, indices, values, where, None, EVAL_CHUNK, 2**31):
        scores.append(model.margins(rows))
        labels.append(y)
    return np.concatenate(scores), np.concatenate(labels)


def _image_margins(db, name, model, label, source, rel, kinds, scans):
    """Margins of a model trained on images, on a source's image column read at ``scans``."""
    spec = image_inputs(model, name)
    column = spec["column"]
    _require(source, name, kinds, [column, label], f"images from {column} and its label {label}")
    if kinds[column] != IMAGE:
        raise LoomDataError(
            f"column {column!r} of {source} is {kinds[column]}, not bytea/BLOB: model '{name}' "
            "reads JPEG images from it",
            hint=f"evaluate on a source whose {column} column holds each image's file bytes",
        )
    values = [quote_ident(column), number(label, kinds[label], db.type("double"))]
    Z, y = [np.empty((0, model.W.shape[1]))], [np.empty(0)]
    for rows in db.read_rows(rel, values, complete_rows([column, label]), None, IMAGE_CHUNK):
        db.check_interrupt()
        Z.append(model.margins(image_features([r[0] for r in rows], spec, scans)))
        y.append(np.array([r[1] for r in rows], dtype=np.float64))
    return np.concatenate(Z), np.concatenate(y)


def _check_features(model: Any, name: str, laid: Any, index: str) -> None:
    """Refuse an index whose stored features are not the model's, saying how they differ: an
    image model's by the image's size and colour, a model of columns by its columns."""
    inputs = laid.fmt.inputs(laid.info.options)
    learnt = model.inputs if (model.inputs or {}).get("kind") == "image" else None
    if inputs is None and learnt is None:
        if laid.fmt.features(laid.info) != model.features:
            raise LoomOptionError(
                f"index '{index}' holds columns {laid.info.columns[:5]}…, not the model's features",
                hint="evaluate on an index built over the model's features",
            )
        return
    if inputs is None or learnt is None:
        what = "images (a pcr index)" if inputs is not None else f"columns {laid.info.columns[:5]}"
        raise LoomOptionError(
            f"index '{index}' holds {what}; model '{name}' learnt from "
            + ("images" if learnt is not None else "feature columns"),
            hint=f"evaluate on an index of what the model learnt from, or use "
            f"loom_evaluate('{name}', source)",
        )
    got, want = (_image_shape(d) for d in (inputs, learnt))
    if got != want:
        raise LoomOptionError(
            f"index '{index}' lays its images out at {got}; model '{name}' learnt from "
            f"{want} images, so their features do not line up",
            hint=f"evaluate on a pcr index built WITH (image_size = {learnt['size']}, color = "
            f"'{learnt['color']}'), or use loom_evaluate('{name}', source), which decodes the "
            "images at the model's own size",
        )


def _image_shape(inputs: dict[str, Any]) -> str:
    return f"{inputs['size']} × {inputs['size']} {inputs['color']}"


def _index_labels(
    model: LinearModel, name: str, index: str, names: list[str] | None, y: np.ndarray
) -> np.ndarray:
    """An index's labels as the model's classes: a text label is stored as the code of the
    index's own classes (``names``), which are the model's codes only where both hold the
    same classes, so each is read by its name; a text label and numeric classes (or the
    reverse) are refused, as are classes the model never learnt."""
    learnt = model.class_names
    if not names and not learnt:
        return y
    if not names or not learnt:
        got = "numbers" if not names else "a text label"
        want = (
            f"text classes {', '.join(learnt)}"
            if learnt
            else "numbers"
            if model.kind == "linear"
            else "numeric classes " + ", ".join(map(class_text, model.classes))
        )
        raise LoomDataError(
            f"index '{index}' holds {got}; model '{name}' learnt {want}",
            hint="evaluate on an index built over the label the model learnt from",
        )
    unknown = [c for c in names if c not in learnt]
    if unknown:
        raise LoomDataError(
            f"index '{index}' holds the classes {', '.join(map(repr, unknown[:5]))}, which "
            f"model '{name}' never learnt (its classes: {', '.join(map(repr, learnt[:10]))})",
            hint=f"use loom_evaluate('{name}', source), which skips and counts such rows, or "
            "build the index on the rows of the model's classes",
        )
    codes = np.array([learnt.index(c) for c in names], dtype=np.float64)
    return codes[y.astype(np.int64)]


def evaluate_index(db: Any, name: str, index: str, backend: str | None) -> str:
    model = model_cache.load(db, name)
    laid = layout.open_index(db, check_name(index, "index"), allow_stale=True)
    # the stored rows are the source's as it was: refused once it changed (no allow_stale
    # here), as loom_train refuses them — metrics of rows that are no longer there mislead
    layout.check_fresh(db, laid.info, stale_option=False)
    label = catalog.get_model(db, name).label
    if label is not None and db.fold_name(label) != db.fold_name(laid.info.label):
        raise LoomOptionError(
            f"index '{index}' holds the label {laid.info.label!r}, not model '{name}''s "
            f"label {label!r}: its metrics would score the model against another column",
            hint=f"evaluate on an index built WITH (label = {label}), or use "
            f"loom_evaluate('{name}', source)",
        )
    _check_features(model, name, laid, index)
    engine = registry.get(backend or "cpu")
    W, b = model.folded()
    if isinstance(model, SparseLinearModel):  # over the index's observed columns
        W, b = model.folded_over(np.asarray(laid.info.stats["columns"]))
    if laid.fmt.value_map == "minmax":  # stored values u = (x − min)/spread: fold that map in
        unit = Scaling.over_minmax("none", laid.info.stats)
        W, b = W * unit.scale[:, None], b - unit.shift @ (W * unit.scale[:, None])
    scores, labels = [], []
    for batch in laid.batches(0, laid.info.batches, laid.fmt.top()):
        scores.append(engine.margins(batch, W) + b)
        labels.append(batch.y)
    Z, y = np.concatenate(scores), np.concatenate(labels)
    y = _index_labels(model, name, index, laid.info.stats.get("label_classes"), y)
    result = {"model": name, "index": index, "rows": len(y), "backend": engine.name}
    return _json(result | _metrics(model, Z, y))
