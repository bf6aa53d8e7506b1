"""What BigQuery ML and MADlib users expect, on both engines: the confusion matrix and per-class
metrics of ``loom_evaluate``, and the table functions ``loom_roc_curve``, ``loom_weights`` and
``loom_training_info`` (same SQL on both), checked against scikit-learn and loom_predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support, roc_curve

import loomdb

pytestmark = pytest.mark.postgres

SCALES = np.array([1.0, 10.0, 0.1, 100.0])  # standardisation matters: weights differ by units
OFFSETS = np.array([0.0, 5.0, -1.0, 300.0])


def data(n: int = 240, classes: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 4))
    if classes == 2:
        y = (Z @ [1.0, -2.0, 0.5, 0.0] + rng.normal(size=n) > 0).astype(float)
    else:  # 3 classes, one label the model will rarely predict well
        y = np.digitize(Z[:, 0] + 0.5 * Z[:, 1] + 0.7 * rng.normal(size=n), [-0.5, 0.6])
        y = y.astype(float)
    return Z * SCALES + OFFSETS, y


def train(engine, name: str, table: str, options: dict) -> dict:
    return json.loads(
        engine.scalar(f"SELECT loom_train('{name}', '{table}', 'y', '{json.dumps(options)}')")
    )


def features(engine) -> str:
    return engine.array(["x0", "x1", "x2", "x3"])


def scored(engine, model: str, table: str, what: str = "loom_predict") -> tuple[np.ndarray, ...]:
    """Rows of ``table`` (features, label) with ``what``(model, features), in one order."""
    rows = engine.rows(
        f"SELECT x0, x1, x2, x3, y, {what}('{model}', {features(engine)}) FROM {table}"
    )
    a = np.array(rows, dtype=np.float64)
    return a[:, :4], a[:, 4], a[:, 5]


def error_of(engine, sql: str) -> tuple[str, str]:
    """The message and the hint of the error ``sql`` raises, on either engine."""
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    e = info.value
    if isinstance(e, loomdb.LoomError):
        return e.message, e.hint or ""
    return str(e), getattr(e.diag, "message_hint", None) or ""


def test_evaluate_adds_the_confusion_matrix_and_per_class_metrics(engine):
    X, y = data(classes=3)
    engine.load("t3", X, y)
    train(engine, "ovr", "t3", {"epochs": 30})
    result = json.loads(engine.scalar("SELECT loom_evaluate('ovr', 't3')"))
    _, truth, pred = scored(engine, "ovr", "t3")
    labels = [0.0, 1.0, 2.0]
    assert result["confusion_matrix"] == {
        "labels": labels,
        "matrix": confusion_matrix(truth, pred, labels=labels).tolist(),
    }
    p, r, f, support = precision_recall_fscore_support(truth, pred, labels=labels, zero_division=0)
    per_class = result["per_class"]
    assert [c["class"] for c in per_class] == labels
    assert [c["support"] for c in per_class] == support.tolist()
    np.testing.assert_allclose([c["precision"] for c in per_class], p, rtol=1e-12)
    np.testing.assert_allclose([c["recall"] for c in per_class], r, rtol=1e-12)
    np.testing.assert_allclose([c["f1"] for c in per_class], f, rtol=1e-12)
    assert result["f1"] == pytest.approx(f.mean(), rel=1e-12)  # the macro average


def test_a_binary_confusion_matrix_counts_labels_the_model_never_saw(engine):
    X, y = data()
    engine.load("t", X, y)
    train(engine, "bin", "t", {"epochs": 20})
    y_new = y.copy()
    y_new[:7] = 5.0  # a label outside the model's classes: its own row, never predicted
    engine.load("t_new", X, y_new)
    result = json.loads(engine.scalar("SELECT loom_evaluate('bin', 't_new')"))
    _, truth, pred = scored(engine, "bin", "t_new")
    expected = confusion_matrix(truth, pred, labels=[0.0, 1.0, 5.0]).tolist()
    assert result["confusion_matrix"] == {"labels": [0.0, 1.0, 5.0], "matrix": expected}
    assert sum(map(sum, expected)) == len(y) and expected[2][2] == 0
    assert "per_class" not in result  # binary: precision/recall/f1 are the positive class's


@pytest.mark.parametrize("kind", ["logistic", "svm"])
def test_roc_curve_equals_scikit_learns(engine, kind):
    X, y = data()
    engine.load("t", X, y)
    train(engine, "m", "t", {"model": kind, "epochs": 20})
    curve = np.array(engine.rows("SELECT threshold, tpr, fpr FROM loom_roc_curve('m', 't')"))
    if kind == "logistic":
        _, truth, score = scored(engine, "m", "t", "loom_predict_proba")
    else:  # the margin: the original-unit weights over the raw rows
        weights = engine.rows("SELECT feature, weight FROM loom_weights('m')")
        w = dict(weights)
        Xs, truth, _ = scored(engine, "m", "t")
        score = Xs @ [w["x0"], w["x1"], w["x2"], w["x3"]] + w["(intercept)"]
    fpr, tpr, thresholds = roc_curve(truth == 1.0, score, drop_intermediate=False)
    assert len(curve) == len(thresholds)
    assert curve[0, 0] == np.inf and thresholds[0] == np.inf
    np.testing.assert_allclose(curve[1:, 0], thresholds[1:], rtol=1e-9)
    np.testing.assert_array_equal(curve[:, 1], tpr)
    np.testing.assert_array_equal(curve[:, 2], fpr)
    auc = json.loads(engine.scalar("SELECT loom_evaluate('m', 't')"))["roc_auc"]
    assert np.trapezoid(curve[:, 1], curve[:, 2]) == pytest.approx(auc, rel=1e-12)


def test_roc_curve_refuses_labels_that_are_neither_class(engine):
    """A row whose label is none of a binary model's classes is neither positive nor
    negative: the curve counted it as a negative (a source of classes 0, 1 and 5 drew a
    curve of 0 against 1 and 5; one of 0 and 1 for a model of 3 and 8 said it had 0 positive
    and 240 negative rows)."""
    X, y = data()
    engine.load("t", X, y)
    train(engine, "bin", "t", {"epochs": 5})
    y_new = y.copy()
    y_new[:7] = 5.0
    engine.load("t_new", X, y_new)
    message = error_of(engine, "SELECT * FROM loom_roc_curve('bin', 't_new')")[0]
    assert "5" in message and "neither of model 'bin''s classes 0, 1" in message, message
    engine.load("t38", X, np.where(y == 1.0, 8.0, 3.0))
    train(engine, "b38", "t38", {"epochs": 5})
    message = error_of(engine, "SELECT * FROM loom_roc_curve('b38', 't')")[0]
    assert "neither of model 'b38''s classes 3, 8" in message, message
    kept = "SELECT * FROM loom_roc_curve('bin', 'SELECT * FROM t_new WHERE y IN (0, 1)')"
    assert len(engine.rows(kept)) > 2


def weights_of(engine, model: str) -> dict[float | None, dict[str, tuple]]:
    """{class: {feature: (weight, weight_standardized, rank, odds_ratio)}}."""
    out: dict[float | None, dict[str, tuple]] = {}
    rows = engine.rows(f"SELECT * FROM loom_weights('{model}')")
    for feature, cls, w, ws, rank, odds, _ in rows:
        out.setdefault(cls, {})[feature] = (w, ws, rank, odds)
    return out


def margins(by_feature: dict[str, tuple], X: np.ndarray, column: int = 0) -> np.ndarray:
    w = np.array([by_feature[f"x{j}"][column] for j in range(4)])
    return X @ w + by_feature["(intercept)"][column]


def check_ranks(by_feature: dict[str, tuple]) -> None:
    size = {f: abs(v[1]) for f, v in by_feature.items() if f != "(intercept)"}
    for f, v in by_feature.items():
        if f == "(intercept)":
            assert v[2] is None
        else:  # SQL RANK(): one more than the features strictly larger
            assert v[2] == 1 + sum(s > size[f] for s in size.values())


@pytest.mark.parametrize("fmt", ["dense", "toc", "mlweaving"])
def test_weights_reproduce_predict_on_every_format(engine, fmt):
    X, y = data()
    engine.load("t", X, y)
    train(engine, "m", "t", {"format": fmt, "epochs": 15})
    by_class = weights_of(engine, "m")
    assert list(by_class) == [1.0]  # binary: the positive class's weights
    w = by_class[1.0]
    assert list(w) == ["x0", "x1", "x2", "x3", "(intercept)"]
    Xs, _, proba = scored(engine, "m", "t", "loom_predict_proba")
    np.testing.assert_allclose(1 / (1 + np.exp(-margins(w, Xs))), proba, rtol=1e-9)
    info = json.loads(engine.scalar("SELECT loom_model_info('m')"))["standardization"]
    standardized = (Xs - info["shift"]) * info["scale"]  # the scale the model was trained on
    np.testing.assert_allclose(margins(w, standardized, 1), margins(w, Xs), rtol=1e-9, atol=1e-9)
    for weight, _, _, odds in w.values():
        assert odds == pytest.approx(np.exp(weight), rel=1e-12)
    check_ranks(w)


def test_weights_of_a_sparse_model_are_its_columns(engine):
    """A sparse model's rows were named after the source's two array columns (indices,
    values) and paired with its first two stored coefficients: of columns 0, 5 and 9, column
    9's weight was missing and 0's and 5's were called 'indices' and 'values'."""
    X, y = data(n=120)
    engine.rows('CREATE TABLE sp (y double precision, ix integer[], "values" double precision[])')
    for (a, b, c, _), label in zip(X, y):
        engine.rows(f"INSERT INTO sp VALUES ({label}, ARRAY[0, 5, 9], ARRAY[{a}, {b}, {c}])")
    train(engine, "s", "sp", {"format": "toc", "epochs": 15})
    w = weights_of(engine, "s")[1.0]
    assert list(w) == ["0", "5", "9", "(intercept)"]
    rows = engine.rows('SELECT loom_predict_proba_sparse(\'s\', ix, "values"), "values" FROM sp')
    Xs = np.array([r[1] for r in rows], dtype=float)
    margin = Xs @ [w["0"][0], w["5"][0], w["9"][0]] + w["(intercept)"][0]
    np.testing.assert_allclose(1 / (1 + np.exp(-margin)), [r[0] for r in rows], rtol=1e-9)
    check_ranks(w)


@pytest.mark.parametrize("kind", ["linear", "svm", "ovr"])
def test_weights_of_every_kind(engine, kind):
    X, y = data(classes=3 if kind == "ovr" else 2)
    if kind == "linear":
        y = X @ [0.5, -0.1, 3.0, 0.01] + 2.0
    engine.load("t", X, y)
    train(engine, "m", "t", {"model": "logistic" if kind == "ovr" else kind, "epochs": 15})
    by_class = weights_of(engine, "m")
    Xs, _, predicted = scored(engine, "m", "t")
    if kind == "linear":
        assert list(by_class) == [None]
        np.testing.assert_allclose(margins(by_class[None], Xs), predicted, rtol=1e-9)
        assert all(v[3] is None for v in by_class[None].values())  # no odds ratios
    elif kind == "svm":
        assert list(by_class) == [1.0]
        np.testing.assert_array_equal(np.where(margins(by_class[1.0], Xs) > 0, 1.0, 0.0), predicted)
    else:
        assert list(by_class) == [0.0, 1.0, 2.0]
        Z = np.column_stack([margins(by_class[c], Xs) for c in (0.0, 1.0, 2.0)])
        np.testing.assert_array_equal(Z.argmax(axis=1).astype(float), predicted)
    for by_feature in by_class.values():
        check_ranks(by_feature)


def test_training_info_is_the_history_one_row_per_epoch(engine):
    X, y = data()
    engine.load("t", X, y)
    train(engine, "m", "t", {"epochs": 4, "tol": 0, "validation_fraction": 0.25, "batch_size": 60})
    rows = engine.rows("SELECT * FROM loom_training_info('m') ORDER BY epoch")
    history = json.loads(engine.scalar("SELECT loom_model_info('m')"))["history"]
    assert [r[0] for r in rows] == [1, 2, 3, 4] and len(history) == 4  # no restart here
    for (_, loss, val, precision, n, nbytes, seconds, lr), h in zip(rows, history):
        assert (loss, val, n, nbytes, seconds, lr) == (
            h["loss"],
            h["val_loss"],
            h["rows"],
            h["bytes_read"],
            h["seconds"],
            h["lr"],
        )
        assert precision is None  # dense stores one precision
        assert val is not None and n < len(y) and seconds >= 0
    assert rows[0][5] > 0  # the first epoch reads the stored batches


def test_training_info_reports_precision_and_skips_restarts(engine):
    X, y = data()
    engine.load("t", X, y)
    options = {"model": "linear", "format": "mlweaving", "precision": "adaptive", "lr": 1e6}
    summary = train(engine, "m", "t", {**options, "epochs": 6, "tol": 0})
    assert summary["restarts"] >= 1  # the guard restarted the diverging step
    rows = engine.rows("SELECT epoch, precision, bytes FROM loom_training_info('m') ORDER BY 1")
    assert [r[0] for r in rows] == list(range(1, summary["epochs"] + 1))
    assert all(1 <= r[1] <= 32 for r in rows)  # adaptive: the bits each epoch read
    assert all(r[2] >= 0 for r in rows)  # 0 once the decoded batches are cached (cache_mb)


def test_bad_input_is_a_clear_error(engine):
    X, y = data()
    engine.load("t", X, y)
    train(engine, "m", "t", {"epochs": 2})
    train(engine, "lin", "t", {"model": "linear", "epochs": 2})
    for sql in (
        "SELECT * FROM loom_weights('nope')",
        "SELECT * FROM loom_training_info('nope')",
        "SELECT * FROM loom_roc_curve('nope', 't')",
    ):
        message, hint = error_of(engine, sql)
        assert "model 'nope' does not exist" in message and "loom_train" in hint
    message, hint = error_of(engine, "SELECT * FROM loom_roc_curve('m', 'SELECT x0, y FROM t')")
    assert "has no column 'x1'" in message and "x0, x1, x2, x3" in hint
    message, hint = error_of(engine, "SELECT loom_evaluate('m', 'SELECT x0, x1, x2, x3 FROM t')")
    assert "has no label column 'y'" in message and "label y" in hint
    message, hint = error_of(engine, "SELECT * FROM loom_roc_curve('lin', 't')")
    assert "needs a binary classifier" in message and "regression" in hint
    message, hint = error_of(
        engine, "SELECT * FROM loom_roc_curve('m', 'SELECT * FROM t WHERE y = 1')"
    )
    assert "both classes" in message and hint
    assert engine.rows("SELECT * FROM loom_weights(NULL)") == []  # STRICT: no rows


def test_a_raw_duckdb_cursor_unnests_the_rows():
    con = loomdb.connect(progress=False)
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES (1.0, 0.0), (2.0, 1.0), (3.0, 1.0)) v(a, y)"
    )
    con.execute("SELECT loom_train('m', 't', 'y', '{\"epochs\": 2}')").fetchall()
    raw = con.duckdb.cursor()  # no loomdb macros: the public scalar returns the rows as a list
    rows = raw.execute(
        "SELECT * FROM (SELECT unnest(loom_weights('m'), max_depth := 2))"
    ).fetchall()
    assert rows == con.execute("SELECT * FROM loom_weights('m')").fetchall()
    assert [r[0] for r in rows] == ["a", "(intercept)"]
    con.close()


def test_a_feature_column_that_is_not_a_number_is_named(engine):
    """A source whose feature column is text, a date or a list was the engine's conversion
    error ("Could not convert string 'x' to DOUBLE", or a text of numbers silently cast),
    with no hint; loom_predict_row already names such a column."""
    X, y = data()
    engine.load("t", X, y)
    train(engine, "m", "t", {"epochs": 5})
    for column in ("'x'", "CAST(x2 AS VARCHAR(40))", "CURRENT_DATE"):
        source = f"SELECT x0, x1, {column} AS x2, x3, y FROM t".replace("'", "''")
        for sql in (
            f"SELECT loom_evaluate('m', '{source}')",
            f"SELECT * FROM loom_roc_curve('m', '{source}')",
        ):
            message, hint = error_of(engine, sql)
            assert "feature column 'x2'" in message and "not a number" in message, message
            assert "CAST" in hint, hint


def test_evaluate_scores_auc_and_log_loss_over_the_models_two_classes(engine):
    """A row whose label is neither of a binary model's classes is neither positive nor
    negative: loom_evaluate's roc_auc and log_loss counted it as a negative (its AUC moved with
    the rows of label 5); now they are those of the rows of classes 0 and 1, the rows of other
    labels are counted, and accuracy still counts them as mislabelled."""
    X, y = data()
    engine.load("t", X, y)
    train(engine, "bin", "t", {"epochs": 5})
    y_new = y.copy()
    y_new[:30] = 5.0
    engine.load("t_new", X, y_new)
    engine.load("t_kept", X[30:], y[30:])
    mixed = json.loads(engine.scalar("SELECT loom_evaluate('bin', 't_new')"))
    kept = json.loads(engine.scalar("SELECT loom_evaluate('bin', 't_kept')"))
    assert mixed["roc_auc"] == pytest.approx(kept["roc_auc"], rel=1e-12)
    assert mixed["log_loss"] == pytest.approx(kept["log_loss"], rel=1e-12)
    assert mixed["other_label_rows"] == 30 and "other_label_rows" not in kept
    assert mixed["accuracy"] == pytest.approx(kept["accuracy"] * 210 / 240, rel=1e-12)
