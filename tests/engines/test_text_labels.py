"""Text labels: the classes kept as text, on both engines (BigQuery ML's STRING labels)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

RNG = np.random.default_rng(11)
N = 300
X = RNG.normal(size=(N, 2))
MARGINS = np.stack([X[:, 0], X[:, 1], -X[:, 0] - X[:, 1]], axis=1)
NAMES = np.array(["it's", "no", "yes"])  # sorted by code point; a quote to escape
CLASS3 = NAMES[np.argmax(MARGINS, axis=1)]
CLASS2 = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "spam", "ham")


@pytest.fixture
def labelled(engine):
    engine.rows("DROP TABLE IF EXISTS tl")
    engine.rows(
        "CREATE TABLE tl (id INTEGER, a DOUBLE PRECISION, b DOUBLE PRECISION, c TEXT, d TEXT)"
    )
    quoted = [c.replace("'", "''") for c in CLASS3]
    values = ", ".join(
        f"({i}, {float(X[i, 0])!r}, {float(X[i, 1])!r}, '{quoted[i]}', '{CLASS2[i]}')"
        for i in range(N)
    )
    engine.rows(f"INSERT INTO tl VALUES {values}")
    return engine


def _train(engine, model: str, label: str, kind: str) -> dict:
    options = json.dumps({"model": kind, "epochs": 40, "features": ["a", "b"]})
    return json.loads(engine.scalar(f"SELECT loom_train('{model}', 'tl', '{label}', '{options}')"))


def test_binary_text_label_predicts_its_classes_everywhere(labelled):
    summary = _train(labelled, "spam", "d", "logistic")
    assert summary["class_names"] == ["ham", "spam"]
    rows = labelled.rows(
        "SELECT loom_predict_class('spam', ARRAY[a, b]), loom_predict_class('spam', tl), d "
        "FROM tl ORDER BY id"
    )
    by_array, by_row, truth = zip(*rows)
    assert by_array == by_row
    assert set(by_array) == {"ham", "spam"}
    assert np.mean(np.array(by_array) == np.array(truth)) > 0.9
    compiled = labelled.scalar("SELECT loom_predict_sql('spam')")
    assert "'spam'" in compiled and "'ham'" in compiled
    labelled.scalar("SELECT loom_deploy('spam')")
    deployed = [r[0] for r in labelled.rows("SELECT predict_spam(a, b) FROM tl ORDER BY id")]
    assert tuple(deployed) == by_array
    result = json.loads(labelled.scalar("SELECT loom_evaluate('spam', 'tl')"))
    assert result["confusion_matrix"]["labels"] == ["ham", "spam"]
    predicted = np.array(by_array)
    expected = [
        [int(((np.array(truth) == t) & (predicted == p)).sum()) for p in ("ham", "spam")]
        for t in ("ham", "spam")
    ]
    assert result["confusion_matrix"]["matrix"] == expected


def test_one_vs_rest_text_label_and_per_class_names(labelled):
    summary = _train(labelled, "three", "c", "svm")
    assert summary["class_names"] == sorted(NAMES.tolist())
    predicted = [
        r[0] for r in labelled.rows("SELECT loom_predict_class('three', tl) FROM tl ORDER BY id")
    ]
    assert set(predicted) <= set(NAMES.tolist())
    assert np.mean(np.array(predicted) == CLASS3) > 0.8
    result = json.loads(labelled.scalar("SELECT loom_evaluate('three', 'tl')"))
    assert [c["class"] for c in result["per_class"]] == sorted(NAMES.tolist())
    named = labelled.rows("SELECT DISTINCT class, class_name FROM loom_weights('three')")
    assert sorted(named) == [(float(i), n) for i, n in enumerate(sorted(NAMES.tolist()))]
    info = json.loads(labelled.scalar("SELECT loom_model_info('three')"))
    assert info["class_names"] == sorted(NAMES.tolist())


def _error(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as raised:
        engine.rows(sql)
    return str(raised.value)


def test_numbers_where_classes_are_text_are_refused(labelled):
    _train(labelled, "spam", "d", "logistic")
    assert "loom_predict_class" in _error(
        labelled, "SELECT loom_predict('spam', ARRAY[a, b]) FROM tl"
    )
    options = json.dumps({"model": "linear", "features": ["a", "b"]})
    message = _error(labelled, f"SELECT loom_train('reg', 'tl', 'c', '{options}')")
    assert "is text" in message


@pytest.mark.parametrize(
    ("first", "second", "texts"),
    [
        (1000001, 1000002, ["1000001", "1000002"]),  # {:g} gave 1e+06 for both
        (1, 123456.789, ["1", "123456.789"]),  # {:g} gave 123457
        (1, 2.5, ["1", "2.5"]),
    ],
)
def test_a_numeric_class_reads_as_the_number_it_is(labelled, first, second, texts):
    labelled.rows("DROP TABLE IF EXISTS tc")
    labelled.rows(
        "CREATE TABLE tc AS SELECT a, b, CAST(CASE WHEN d = 'spam' THEN "
        f"{second!r} ELSE {first!r} END AS DOUBLE PRECISION) AS y FROM tl"
    )
    options = json.dumps({"model": "logistic", "epochs": 20})
    labelled.scalar(f"SELECT loom_train('big', 'tc', 'y', '{options}')")
    rows = labelled.rows(
        "SELECT DISTINCT loom_predict_class('big', ARRAY[a, b]), loom_predict('big', ARRAY[a, b])"
        " FROM tc ORDER BY 2"
    )
    assert rows == [(texts[0], float(first)), (texts[1], float(second))]
    named = labelled.rows("SELECT DISTINCT class, class_name FROM loom_weights('big')")
    assert named == [(float(second), texts[1])]  # a binary model's one margin: the second class


def test_numeric_classes_as_text(labelled):
    labelled.rows("DROP TABLE IF EXISTS tn")
    labelled.rows(
        "CREATE TABLE tn AS SELECT a, b, CASE WHEN d = 'spam' THEN 1 ELSE 0 END AS y FROM tl"
    )
    options = json.dumps({"model": "logistic", "epochs": 20})
    labelled.scalar(f"SELECT loom_train('num', 'tn', 'y', '{options}')")
    rows = labelled.rows(
        "SELECT loom_predict_class('num', ARRAY[a, b]), loom_predict('num', ARRAY[a, b]) FROM tn"
    )
    assert all(text == f"{number:g}" for text, number in rows)
    linear = json.dumps({"model": "linear", "epochs": 5})
    labelled.scalar(f"SELECT loom_train('lin', 'tn', 'y', '{linear}')")
    assert "predicts numbers" in _error(
        labelled, "SELECT loom_predict_class('lin', ARRAY[1.0, 2.0])"
    )


def test_class_weight_names_a_text_labels_classes(labelled):
    plain = _train(labelled, "plain", "d", "logistic")
    options = {"epochs": 40, "features": ["a", "b"], "class_weight": {"spam": 5}}
    labelled.scalar(f"SELECT loom_train('weighted', 'tl', 'd', '{json.dumps(options)}')")
    info = json.loads(labelled.scalar("SELECT loom_model_info('weighted')"))
    assert info["options"]["class_weight"] == {"spam": 5}
    assert info["class_names"] == plain["class_names"] == ["ham", "spam"]
    coef = json.loads(labelled.scalar("SELECT loom_model_info('plain')"))["coefficients"]
    assert coef != info["coefficients"]  # the weight was used
    spam = "SELECT count(*) FROM tl WHERE loom_predict_class('{}', tl) = 'spam'"
    assert labelled.scalar(spam.format("weighted")) > labelled.scalar(spam.format("plain"))
    for key in ("1", "0"):  # the codes are loomdb's, not the user's
        options["class_weight"] = {key: 3}
        message = _error(labelled, f"SELECT loom_train('w2', 'tl', 'd', '{json.dumps(options)}')")
        assert f"names label '{key}', which is not a class" in message
        assert "classes: 'ham', 'spam'" in message


def test_warm_start_needs_the_same_class_names(labelled):
    labelled.rows("DROP TABLE IF EXISTS coded")
    labelled.rows(
        "CREATE TABLE coded AS SELECT a, b, CASE WHEN d = 'spam' THEN 1 ELSE 0 END AS d, "
        "CASE WHEN d = 'spam' THEN 'yes' ELSE 'no' END AS e FROM tl"
    )
    _train(labelled, "spam", "d", "logistic")
    options = json.dumps({"epochs": 2, "features": ["a", "b"], "warm_start": True})
    for label, theirs in (("d", "0, 1"), ("e", "'no', 'yes'")):
        message = _error(labelled, f"SELECT loom_train('spam', 'coded', '{label}', '{options}')")
        assert f"its classes are 'ham', 'spam'; this source's are {theirs}" in message
        assert "same model kind, features and classes" in message
    assert labelled.scalar("SELECT loom_predict_class('spam', tl) FROM tl LIMIT 1") in (
        "ham",
        "spam",
    )
    labelled.scalar(f"SELECT loom_train('spam', 'tl', 'd', '{options}')")  # the same classes
    result = json.loads(labelled.scalar("SELECT loom_evaluate('spam', 'tl')"))
    assert result["confusion_matrix"]["labels"] == ["ham", "spam"]


def _evaluate(engine, model: str, source: str) -> dict:
    return json.loads(engine.scalar(f"SELECT loom_evaluate('{model}', '{source}')"))


def test_a_label_of_another_type_is_matched_to_the_text_classes(labelled):
    # an INTEGER label on classes '1' and '2' was read as class codes: 1 as the second class,
    # and 2 past the classes (IndexError: index 2 is out of bounds)
    labelled.rows(
        "CREATE TABLE t12 AS SELECT id, a, b, CASE WHEN d = 'spam' THEN '2' ELSE '1' END AS y, "
        "CASE WHEN d = 'spam' THEN 'true' ELSE 'false' END AS flag FROM tl"
    )
    options = json.dumps({"model": "logistic", "epochs": 40, "features": ["a", "b"]})
    labelled.scalar(f"SELECT loom_train('digits', 't12', 'y', '{options}')")
    labelled.scalar(f"SELECT loom_train('flags', 't12', 'flag', '{options}')")
    want = _evaluate(labelled, "digits", "t12")
    assert want["confusion_matrix"]["labels"] == ["1", "2"] and want["skipped"] == 0
    curve = "SELECT * FROM loom_roc_curve('digits', '{}') ORDER BY threshold, tpr, fpr"
    for kind in ("INTEGER", "DOUBLE PRECISION", "NUMERIC(4, 1)"):
        labelled.rows("DROP TABLE IF EXISTS held")
        labelled.rows(f"CREATE TABLE held AS SELECT a, b, CAST(y AS {kind}) AS y FROM t12")
        assert _evaluate(labelled, "digits", "held") == want, kind
        assert labelled.rows(curve.format("held")) == labelled.rows(curve.format("t12")), kind
    # a value that is none of the classes, a number or text, is skipped and counted (where
    # PostgreSQL read its NULL code into packed rows, which hold none: LoomFormatError)
    for other, kind in (("3", "INTEGER"), ("'3'", "TEXT")):
        labelled.rows("DROP TABLE IF EXISTS held3")
        labelled.rows(
            f"CREATE TABLE held3 AS SELECT a, b, CASE WHEN id < 50 THEN {other} "
            f"ELSE CAST(y AS {kind}) END AS y FROM t12"
        )
        three = _evaluate(labelled, "digits", "held3")
        assert (three["rows"], three["skipped"]) == (N - 50, 50), kind
    # a BOOLEAN label by its text, 'true' and 'false'
    labelled.rows("CREATE TABLE heldb AS SELECT a, b, flag = 'true' AS flag FROM t12")
    assert _evaluate(labelled, "flags", "heldb") == _evaluate(labelled, "flags", "t12")


def test_two_text_classes_naming_one_number_leave_a_number_ambiguous(labelled):
    labelled.rows(
        "CREATE TABLE tdup AS SELECT a, b, CASE WHEN d = 'spam' THEN '1.0' ELSE '1' END AS y "
        "FROM tl"
    )
    options = json.dumps({"model": "logistic", "epochs": 5, "features": ["a", "b"]})
    labelled.scalar(f"SELECT loom_train('dup', 'tdup', 'y', '{options}')")
    labelled.rows("CREATE TABLE dupn AS SELECT a, b, CAST(y AS DOUBLE PRECISION) AS y FROM tdup")
    message = _error(labelled, "SELECT loom_evaluate('dup', 'dupn')")
    assert "'1' and '1.0' both name 1" in message


def test_a_text_label_on_a_model_of_numeric_classes_is_refused_with_the_cast(labelled):
    # it was the engine's "Could not convert string 'ham' to DOUBLE", with no hint
    labelled.rows(
        "CREATE TABLE tnum AS SELECT a, b, CASE WHEN d = 'spam' THEN 1 ELSE 0 END AS y, d FROM tl"
    )
    options = json.dumps({"model": "logistic", "epochs": 5, "features": ["a", "b"]})
    labelled.scalar(f"SELECT loom_train('num', 'tnum', 'y', '{options}')")
    for sql in (
        "SELECT loom_evaluate('num', 'SELECT a, b, d AS y FROM tnum')",
        "SELECT * FROM loom_roc_curve('num', 'SELECT a, b, d AS y FROM tnum')",
    ):
        message = _error(labelled, sql)
        assert "label column 'y' is text, and the model was trained on numeric classes 0, 1" in (
            message
        ), message
        assert 'CAST("y" AS DOUBLE PRECISION)' in message, message
    casted = "SELECT a, b, CAST(CAST(y AS TEXT) AS DOUBLE PRECISION) AS y FROM tnum"
    assert _evaluate(labelled, "num", casted.replace("'", "''")) == _evaluate(
        labelled, "num", "tnum"
    )


def test_evaluate_index_reads_an_indexs_text_labels_by_name(labelled):
    """An index's text labels are codes of its own classes: evaluate_index compared them with
    the model's codes as they were, so an index of the classes 'it''s' and 'yes' (codes 0, 1)
    scored a model of 'it''s', 'no', 'yes' as if its rows were 'it''s' and 'no', and a model
    of numeric classes took the codes for its classes 0 and 1."""
    _train(labelled, "three", "c", "logistic")
    labelled.rows("CREATE TABLE tl2 AS SELECT a, b, c FROM tl WHERE c <> 'no'")
    labelled.scalar("SELECT loom_create_index('ix2', 'tl2', 'c', '{\"features\": [\"a\", \"b\"]}')")
    on_index = json.loads(labelled.scalar("SELECT loom_evaluate_index('three', 'ix2')"))
    on_rows = json.loads(labelled.scalar("SELECT loom_evaluate('three', 'tl2')"))
    assert on_index["rows"] == on_rows["rows"] == int(np.sum(CLASS3 != "no"))
    for key in ("accuracy", "confusion_matrix", "per_class"):
        assert on_index[key] == on_rows[key], key
    labelled.rows(
        "CREATE TABLE tn AS SELECT a, b, CASE WHEN d = 'spam' THEN 1 ELSE 0 END AS d FROM tl"
    )
    options = json.dumps({"epochs": 5, "features": ["a", "b"]})
    labelled.scalar(f"SELECT loom_train('num', 'tn', 'd', '{options}')")
    labelled.scalar("SELECT loom_create_index('ixd', 'tl', 'd', '{\"features\": [\"a\", \"b\"]}')")
    with pytest.raises(
        labelled.errors, match="holds a text label; model 'num' learnt numeric classes 0, 1"
    ):
        labelled.scalar("SELECT loom_evaluate_index('num', 'ixd')")
    labelled.rows(
        "CREATE TABLE tl4 AS SELECT a, b, CASE WHEN c = 'no' THEN 'maybe' ELSE c END AS c FROM tl"
    )
    labelled.scalar("SELECT loom_create_index('ix4', 'tl4', 'c', '{\"features\": [\"a\", \"b\"]}')")
    with pytest.raises(labelled.errors, match="'maybe'"):
        labelled.scalar("SELECT loom_evaluate_index('three', 'ix4')")
