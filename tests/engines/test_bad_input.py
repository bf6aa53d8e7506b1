"""Bad input gets a clear error on both engines, and a failed train changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

X = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 4.0], [4.0, 3.0], [5.0, 6.0], [6.0, 5.0]])
Y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])


def error_of(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    return str(info.value)


def catalog_state(engine):
    models = engine.rows("SELECT name, uid FROM loom.models ORDER BY name")
    indexes = engine.rows("SELECT name FROM loom.indexes ORDER BY name")
    return models, indexes


@pytest.fixture
def good(engine):
    engine.load("good", X, Y)
    engine.scalar("SELECT loom_train('keep', 'good', 'y', '{\"epochs\": 2}')")
    return engine


def train_error(engine, source: str, options: str = "{}", label: str = "y", name: str = "m"):
    before = catalog_state(engine)
    message = error_of(engine, f"SELECT loom_train('{name}', '{source}', '{label}', '{options}')")
    assert catalog_state(engine) == before, "a failed train must leave the catalog as it was"
    return message


def test_null_features_and_labels(good):
    Xn = X.copy()
    Xn[2, 1] = np.nan  # loaded as NULL
    good.load("nulls", Xn, Y)
    msg = train_error(good, "nulls")
    assert "NULL" in msg and "1 of 6 rows" in msg and "skip" in msg
    good.scalar("SELECT loom_train('m', 'nulls', 'y', '{\"nulls\": \"skip\", \"epochs\": 1}')")
    assert good.rows("SELECT rows_processed, rows_skipped FROM loom.models WHERE name = 'm'") == [
        (5, 1)
    ]


def test_nan_and_infinity(good):
    good.rows("CREATE TABLE weird AS SELECT x0, x1, y FROM good")
    good.rows("UPDATE weird SET x0 = CAST('NaN' AS DOUBLE PRECISION) WHERE y = 1 AND x0 = 2")
    assert "NaN or infinite" in train_error(good, "weird")
    good.rows("UPDATE weird SET x0 = CAST('Infinity' AS DOUBLE PRECISION) WHERE x0 <> x0")
    assert "x0" in train_error(good, "weird")


def test_non_numeric_features(good):
    good.rows(
        "CREATE TABLE texty AS SELECT x0, CAST(x1 AS VARCHAR(10)) AS name, "
        "CAST('2020-01-01' AS DATE) AS day, y FROM good"
    )
    msg = train_error(good, "texty", '{"features": ["x0", "day"]}')
    assert "not numeric or text" in msg and "day" in msg
    # by default only numeric columns are features (a listed text one is one-hot encoded)
    good.scalar("SELECT loom_train('m', 'texty', 'y', '{\"epochs\": 1}')")
    assert "x0" in good.scalar("SELECT feature_names FROM loom.models WHERE name = 'm'")


def test_empty_source_and_single_class(good):
    assert "empty" in train_error(good, "SELECT * FROM good WHERE x0 > 100")
    _, hint = hint_of(good, "SELECT loom_train('m', 'SELECT * FROM good WHERE x0 > 100', 'y')")
    assert "train on a source with rows" in hint and "dbt --empty" in hint
    msg = train_error(good, "SELECT * FROM good WHERE y = 1")
    assert "single class" in msg


def test_integer_classes_beyond_2_53_are_refused_not_merged(good):
    good.rows(
        "CREATE TABLE big AS SELECT x0, x1, CAST(CASE WHEN x0 <= 2 THEN 5 WHEN x0 <= 4 "
        "THEN 9007199254740992 ELSE 9007199254740993 END AS BIGINT) AS y FROM good"
    )
    msg = train_error(good, "big")  # read as doubles, the last two classes were one
    assert "2^53 or more in magnitude" in msg and "cast it to text" in msg
    good.rows("CREATE TABLE negative AS SELECT x0, x1, -y AS y FROM big")
    assert "2^53 or more" in train_error(good, "negative", '{"model": "svm"}')
    good.scalar("SELECT loom_train('reg', 'big', 'y', '{\"model\": \"linear\", \"epochs\": 1}')")
    as_text = "SELECT x0, x1, CAST(y AS VARCHAR(20)) AS y FROM big"
    named = json.loads(good.scalar(f"SELECT loom_train('named', '{as_text}', 'y', '{{}}')"))
    assert named["class_names"] == ["5", "9007199254740992", "9007199254740993"]


def test_a_regression_label_whose_square_overflows_is_refused_naming_it(good):
    """A linear model of a label of 1e300s diverged at every step size, and the error's hint
    blamed the step size and the features; the label is named, with what to do."""
    good.rows(
        "CREATE TABLE vast AS SELECT x0, x1, y * CAST(1e300 AS DOUBLE PRECISION) AS v FROM good"
    )
    msg = train_error(good, "vast", '{"model": "linear"}', label="v")
    assert "label 'v' reaches 1e+300" in msg and "overflows" in msg and "divide it" in msg
    good.rows(
        "CREATE TABLE wide AS SELECT x0, x1, y * CAST(1e150 AS DOUBLE PRECISION) AS v FROM good"
    )
    good.scalar("SELECT loom_train('w', 'wide', 'v', '{\"model\": \"linear\"}')")  # trains


def test_unknown_options_models_and_values(good):
    msg = train_error(good, "good", '{"epoch": 3}')
    assert "unknown loom_train option 'epoch'" in msg and "epochs" in msg
    assert "'model' option must be" in train_error(good, "good", '{"model": "forest"}')
    assert "'epochs' option must be" in train_error(good, "good", '{"epochs": -1}')
    assert "JSON" in train_error(good, "good", "not json")
    assert "already exists" in train_error(good, "good", "{}", name="keep")
    assert "not a column" in train_error(good, "good", "{}", label="nope")


def test_predict_errors(good):
    msg = error_of(good, "SELECT loom_predict('keep', ARRAY[1.0, 2.0, 3.0])")
    assert "expects 2 features" in msg
    msg = error_of(good, "SELECT loom_predict('nosuch', ARRAY[1.0, 2.0])")
    assert "model 'nosuch' does not exist" in msg
    assert "does not exist" in error_of(good, "SELECT loom_model_info('nosuch')")
    assert "does not exist" in error_of(good, "SELECT loom_drop_model('nosuch')")
    assert "no probabilities" not in error_of(
        good, "SELECT loom_predict_proba('nosuch', ARRAY[1.0])"
    )


def hint_of(engine, sql: str) -> tuple[str, str]:
    """The message and hint of the error ``sql`` raises: PostgreSQL's HINT field, or the
    LoomError's (its str holds the hint too)."""
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    diag = getattr(info.value, "diag", None)
    hint = diag.message_hint if diag is not None else getattr(info.value, "hint", None)
    return str(info.value), hint or ""


def test_an_array_of_arrays_as_features_is_refused_with_a_hint(good):
    """A 2-D float8[] reached numpy as nested lists: "ValueError: shape mismatch", no HINT."""
    calls = ["loom_predict('keep', {})", "loom_predict_class('keep', {})"]
    if good.name == "postgres":  # DuckDB binds these to DOUBLE[] only, and refuses at bind
        calls += ["loom_predict_proba('keep', {})", "loom._predict_python('keep', {})"]
    for array in ("ARRAY[[1.0, 2.0, 3.0]]", "ARRAY[[1.0, 2.0], [3.0, 4.0]]"):
        for call in calls:
            sql = "SELECT " + call.format(f"CAST({array} AS DOUBLE PRECISION[])")
            if good.name == "duckdb":
                sql = "SELECT " + call.format(array)
            message, hint = hint_of(good, sql)
            assert "one-dimensional array" in message and "2-dimensional" in message, sql
            assert "flat array" in hint, sql


def test_svm_has_no_probabilities(good):
    good.scalar("SELECT loom_train('s', 'good', 'y', '{\"model\": \"svm\", \"epochs\": 1}')")
    assert "no probabilities" in error_of(good, "SELECT loom_predict_proba('s', ARRAY[1.0, 2.0])")


def test_null_feature_rows_predict_null(good):
    no_array = "CAST(NULL AS DOUBLE PRECISION[])"  # an untyped NULL could also be a row
    rows = good.rows(
        f"SELECT loom_predict('keep', ARRAY[1.0, NULL]), loom_predict('keep', {no_array})"
    )
    assert rows == [(None, None)]


@pytest.mark.parametrize(
    "name",
    [
        "x'; DROP TABLE good; --",
        'a"b',
        "1abc",
        "",
        "a" * 64,
        "robert'); DELETE FROM loom.models;--",
    ],
)
def test_injection_attempts_in_names(good, name):
    quoted = name.replace("'", "''")
    before = catalog_state(good)
    assert "invalid model name" in error_of(
        good, f"SELECT loom_train('{quoted}', 'good', 'y', '{{}}')"
    )
    assert "invalid index name" in error_of(
        good, f"SELECT loom_create_index('{quoted}', 'good', 'y', '{{}}')"
    )
    assert catalog_state(good) == before
    assert good.scalar("SELECT count(*) FROM good") == 6


@pytest.mark.parametrize(
    "source",
    ["good; DROP TABLE good", "good WHERE 1=1; DELETE FROM loom.models", "SELECT 1; SELECT 2"],
)
def test_injection_attempts_in_sources(good, source):
    quoted = source.replace("'", "''")
    before = catalog_state(good)
    with pytest.raises(good.errors):
        good.rows(f"SELECT loom_train('m', '{quoted}', 'y', '{{}}')")
    assert catalog_state(good) == before
    assert good.scalar("SELECT count(*) FROM good") == 6


def test_reindex_of_a_source_now_with_nulls_hints_at_the_index_option(good):
    good.rows("CREATE TABLE later AS SELECT x0, x1, y FROM good")
    good.scalar("SELECT loom_create_index('later_ix', 'later', 'y')")
    good.rows("UPDATE later SET x1 = NULL WHERE x0 = 3")
    message, hint = hint_of(good, "SELECT loom_reindex('later_ix')")
    assert "1 of 6 rows" in message and 'loom_create_index with {"nulls": "skip"}' in hint
    assert "SET (nulls = skip)" in hint and "pass" not in hint  # loom_reindex takes no options
    assert good.rows("SELECT name FROM loom.indexes WHERE name = 'later_ix'") == [("later_ix",)]
    good.scalar("SELECT loom_drop_index('later_ix')")
    good.scalar("SELECT loom_create_index('later_ix', 'later', 'y', '{\"nulls\": \"skip\"}')")
    good.scalar("SELECT loom_reindex('later_ix')")  # the hint's way works, and lasts
    assert good.rows("SELECT rows, skipped FROM loom.indexes WHERE name = 'later_ix'") == [(5, 1)]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_automatic_step_on_features_near_the_largest_double(good):
    """Standardised, features near 1e308 are the same problem as the features at their own
    scale: the automatic step's estimate overflowed (NaN) and the step fell back to 1.0. Left
    unstandardised, no step is finite: refused up front (it diverged five times), and no numpy
    RuntimeWarning escapes on the way (DuckDB runs the train in this process)."""
    rng = np.random.default_rng(3)
    Xs = rng.uniform(1.0, 1.7, size=(200, 2))
    Ys = (Xs[:, 0] > Xs[:, 1]).astype(float)
    good.load("small_scale", Xs, Ys)
    good.load("huge_scale", Xs * 1e307, Ys)
    for method in ("zscore", "minmax"):
        lrs = []
        for source in ("small_scale", "huge_scale"):
            opts = json.dumps({"standardize": method, "epochs": 2, "replace": True})
            out = json.loads(good.scalar(f"SELECT loom_train('m', '{source}', 'y', '{opts}')"))
            lrs.append(out["lr"])
        assert lrs[1] == pytest.approx(lrs[0], rel=1e-6), method
    message = train_error(good, "huge_scale", '{"standardize": "none"}', name="m_none")
    assert "beyond double precision" in message and "no step size" in message


@pytest.mark.parametrize(
    "sql, what",
    [
        ("SELECT loom_tune(NULL, 'good', 'y', '{\"lr\": [0.1, 0.2]}')", "model"),
        ("SELECT loom_evaluate_index('keep', NULL)", "index"),
        ("SELECT loom_evaluate_index(NULL, 'ix')", "model"),
        ("SELECT loom_simulate(NULL)", "index"),
        ("SELECT loom_deploy(NULL)", "model"),
    ],
)
def test_a_null_name_is_said_to_be_null(good, sql, what):
    """A NULL name was "invalid model name None": Python's word for SQL's NULL."""
    message = error_of(good, sql)
    assert f"the {what} name is NULL" in message and "None" not in message, message


HINTLESS = {  # calls whose errors said what was wrong but not what to do
    "a feature that is the label": "'good', 'y', '{\"features\": [\"x0\", \"y\"]}'",
    "an empty source": "'', 'y'",
    "an empty label": "'good', ''",
    "if_not_exists not a boolean": "'good', 'y', '{\"if_not_exists\": \"yes\"}'",
    "no feature besides the label": "'only_y', 'y'",
}


@pytest.mark.parametrize("case", list(HINTLESS))
def test_index_option_errors_say_what_to_do(good, case):
    good.rows("CREATE TABLE only_y AS SELECT y FROM good")
    before = catalog_state(good)
    message, hint = hint_of(good, f"SELECT loom_create_index('ix', {HINTLESS[case]})")
    assert hint.strip(), f"{case}: {message}"
    assert catalog_state(good) == before


@pytest.mark.parametrize(
    "call",
    [
        "loom_create_index('ro_ix', 'good', 'y')",
        "loom_reindex('ix')",
        "loom_drop_index('ix')",
        "loom_train('ro_m', NULL, 'y', '{\"index\": \"ix\", \"epochs\": 1}')",
    ],
)
def test_a_writing_call_in_a_read_only_transaction_says_so_with_a_hint(good, call):
    """PostgreSQL: in a READ ONLY transaction (or on a standby) a function that writes the
    catalog failed with the engine's bare 'cannot execute CREATE TABLE in a read-only
    transaction', as an internal error without a hint.  (DuckDB's read-only connection
    refuses these calls before they write.)"""
    if good.name == "duckdb":
        pytest.skip("DuckDB's transactions are never read-only; a read_only connection is")
    good.scalar("SELECT loom_create_index('ix', 'good', 'y')")
    before = catalog_state(good)
    good.rows("BEGIN READ ONLY")
    try:
        message, hint = hint_of(good, f"SELECT {call}")
    finally:
        good.rows("ROLLBACK")
    assert "read-only transaction" in message and "READ WRITE" in hint
    assert catalog_state(good) == before
