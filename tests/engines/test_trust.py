"""Nothing wrong passes silently, on both engines: non-finite features predict NULL in every
predict path, options are honoured or refused and the catalog records what was used, messages
name the user's objects, a diverging step is backed off and recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.accel import registry
from loomdb.errors import LoomOptionError

pytestmark = pytest.mark.postgres

NAN = "CAST('NaN' AS DOUBLE PRECISION)"
INF = "CAST('Infinity' AS DOUBLE PRECISION)"


@pytest.fixture
def trained(engine):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    engine.load("tr", X, (X @ [1.0, -2.0, 0.5] > 0).astype(float), columns=["a", "b", "c"])
    engine.scalar("SELECT loom_train('m', 'tr', 'y', '{\"epochs\": 5}')")
    return engine


def test_non_finite_features_predict_null_in_every_predict_path(trained):
    engine = trained
    for bad in (NAN, INF, f"-{INF}"):
        engine.rows("DROP TABLE IF EXISTS odd")
        engine.rows(f"CREATE TABLE odd AS SELECT {bad} AS a, 1.0 AS b, 2.0 AS c")
        arr = engine.array(["a", "b", "c"])
        label, proba = engine.rows(
            f"SELECT loom_predict('m', {arr}), loom_predict_proba('m', {arr}) FROM odd"
        )[0]
        compiled = engine.scalar("SELECT loom_predict_sql('m')")
        compiled_proba = engine.scalar("SELECT loom_predict_proba_sql('m')")
        sql_label, sql_proba = engine.rows(f"SELECT {compiled}, {compiled_proba} FROM odd")[0]
        assert (label, proba, sql_label, sql_proba) == (None, None, None, None), bad


def test_boolean_labels_and_features_are_numbers(engine):
    engine.rows(
        "CREATE TABLE flags AS SELECT CAST(i AS DOUBLE PRECISION) AS x, (i % 3 = 0) AS f, "
        "(i > 50) AS y FROM (SELECT * FROM generate_series(1, 100)) AS g(i)"
    )
    summary = json.loads(engine.scalar("SELECT loom_train('fl', 'flags', 'y')"))
    assert summary["classes"] == [0.0, 1.0] and summary["features"] == 2
    assert engine.scalar("SELECT loom_predict('fl', ARRAY[90.0, 0.0])") == 1.0


@pytest.mark.parametrize("fmt", ["dense", "toc", "mlweaving"])
@pytest.mark.parametrize("standardize", ["zscore", "minmax"])
def test_a_constant_column_however_large_changes_nothing(engine, fmt, standardize):
    """A column without spread (a load timestamp in nanoseconds) has no weight: the model is
    the one trained without it (scale 0, see learn/scaling.py), not one whose margins drown in
    the rounding of x·w − shift·w."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(800, 2))
    y = (X @ [1.5, -1.0] + 0.2 * rng.normal(size=800) > 0).astype(float)
    stamped = np.column_stack([np.full(800, 1.7e18), X])
    engine.load("stamped", stamped, y, columns=["loaded_at", "a", "b"])
    options = {"epochs": 8, "format": fmt, "standardize": standardize}
    engine.scalar(f"SELECT loom_train('all', 'stamped', 'y', '{json.dumps(options)}')")
    options["features"] = ["a", "b"]
    engine.scalar(f"SELECT loom_train('two', 'stamped', 'y', '{json.dumps(options)}')")
    every = json.loads(engine.scalar("SELECT loom_model_info('all')"))
    assert every["coefficients"][0] == [0.0]
    two = json.loads(engine.scalar("SELECT loom_model_info('two')"))
    # (not the same bits: the step size's power iteration starts from a vector one longer)
    assert np.allclose(every["coefficients"][1:], two["coefficients"], rtol=0.01)
    accuracy = [
        json.loads(engine.scalar(f"SELECT loom_evaluate('{m}', 'stamped')"))["accuracy"]
        for m in ("all", "two")
    ]
    assert accuracy[0] > 0.9 and abs(accuracy[0] - accuracy[1]) <= 0.005


@pytest.mark.parametrize("fmt", ["dense", "mlweaving"])
def test_huge_finite_features_are_standardised_not_neutralised(engine, fmt):
    """A column of values near 1e300: its squares overflow a double, so its std was infinite
    (DuckDB; the column then had scale ~0 and no weight, r2 0.15) or the train failed with
    PostgreSQL's "value out of range: overflow".  Its mean and std are the column's."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-1.0, 1.0, size=(500, 2))
    y = 2.0 * X[:, 0] + X[:, 1]
    X[:, 0] *= 1e300
    engine.load("huge", X, y, columns=["big", "small"])
    options = json.dumps({"model": "linear", "format": fmt, "epochs": 50, "progress": False})
    engine.scalar(f"SELECT loom_train('hg', 'huge', 'y', '{options}')")
    scaling = json.loads(engine.scalar("SELECT loom_model_info('hg')"))["standardization"]
    assert scaling["method"] == "zscore"
    mean, std = np.mean(X[:, 0] / 1e300), np.std(X[:, 0] / 1e300)  # numpy's overflow too
    assert np.allclose([scaling["shift"][0] / 1e300, scaling["scale"][0] * 1e300], [mean, 1 / std])
    assert json.loads(engine.scalar("SELECT loom_evaluate('hg', 'huge')"))["r2"] > 0.999
    # a range beyond a double's (max − min overflows): refused, naming the column
    engine.load("wide", np.array([[-1e308], [1e308], [0.0]]), np.arange(3.0), columns=["w"])
    with pytest.raises(engine.errors, match=r"w of \S*wide span more than a double"):
        engine.scalar("SELECT loom_train('wd', 'wide', 'y', '{\"model\": \"linear\"}')")


@pytest.mark.parametrize("fmt", ["dense", "mlweaving"])
def test_tiny_finite_features_are_standardised_not_neutralised(engine, fmt):
    """A column of values near 1e-300: the squares of its deviations underflow to 0, so its
    std was 0 and the column, read as constant, got scale 0 and no weight (r2 0.2).  Its mean
    and std are the column's, from its values scaled by a power of two."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-1.0, 1.0, size=(500, 2))
    y = 2.0 * X[:, 0] + X[:, 1]
    X[:, 0] *= 1e-300
    engine.load("tiny", X, y, columns=["small", "other"])
    options = json.dumps({"model": "linear", "format": fmt, "epochs": 50, "progress": False})
    engine.scalar(f"SELECT loom_train('tn', 'tiny', 'y', '{options}')")
    scaling = json.loads(engine.scalar("SELECT loom_model_info('tn')"))["standardization"]
    mean, std = np.mean(X[:, 0] * 1e300), np.std(X[:, 0] * 1e300)  # numpy's underflow too
    got = [scaling["shift"][0] * 1e300, scaling["scale"][0] / 1e300]
    assert np.allclose(got, [mean, 1 / std], rtol=1e-6, atol=1e-7)  # settled: 2^-24 of std
    assert json.loads(engine.scalar("SELECT loom_evaluate('tn', 'tiny')"))["r2"] > 0.999


def test_r2_of_a_label_of_tiny_values_is_its_fit(engine):
    """A linear model of a label of 1e-300s fits it (mae 0.4% of the label's), but the squares
    of its residuals and deviations underflow to 0, and loom_evaluate said r2 = 0."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 2))
    y = (X @ [1.0, 2.0]) * 1e-300
    engine.load("faint_label", X, y, columns=["a", "b"])
    options = '{"model": "linear", "epochs": 30, "progress": false}'
    engine.scalar(f"SELECT loom_train('fl', 'faint_label', 'y', '{options}')")
    scored = json.loads(engine.scalar("SELECT loom_evaluate('fl', 'faint_label')"))
    assert scored["mae"] < 0.01 * np.mean(np.abs(y))  # the fit is close ...
    assert scored["r2"] > 0.999  # ... and r2 says so


def test_subnormal_features_are_refused_naming_them(engine):
    """Values of 1e-310 (subnormal) differ by less than any scale can stretch: 1 / their
    spread overflows, and the train failed with a step-size error blaming values near 1e308
    (or, with their std underflowing to 0, dropped the column).  Refused, naming it."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(float)
    X[:, 0] *= 1e-310
    engine.load("subn", X, y, columns=["faint", "plain"])
    for method in ("zscore", "minmax"):
        options = json.dumps({"standardize": method, "epochs": 2, "progress": False})
        with pytest.raises(engine.errors, match=r"faint of \S*subn vary by less than 2\^-1000"):
            engine.scalar(f"SELECT loom_train('sn', 'subn', 'y', '{options}')")
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'sn'") == 0


def test_float32_refuses_a_column_it_would_flush_to_zero(engine):
    """dtype float32 stored a column of 1e-300s as zeros: the train succeeded with the column
    silently gone (accuracy 0.73 where float64 gives 0.93).  Refused like a column beyond
    float32's range, naming it; a column of zeros and ordinary values is stored as ever."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(float)
    X[:, 0] *= 1e-300
    X[::3, 1] = 0.0
    engine.load("flush", X, y, columns=["faint", "plain"])
    before = engine.rows("SELECT name FROM loom.models ORDER BY name")
    options = '{"dtype": "float32", "epochs": 3, "progress": false}'
    with pytest.raises(engine.errors, match="faint hold only values below float32"):
        engine.scalar(f"SELECT loom_train('f32', 'flush', 'y', '{options}')")
    assert engine.rows("SELECT name FROM loom.models ORDER BY name") == before
    plain = '{"dtype": "float32", "epochs": 3, "progress": false, "features": ["plain"]}'
    engine.scalar(f"SELECT loom_train('f32', 'flush', 'y', '{plain}')")
    engine.scalar("SELECT loom_train('f64', 'flush', 'y', '{\"epochs\": 20}')")
    assert json.loads(engine.scalar("SELECT loom_evaluate('f64', 'flush')"))["accuracy"] > 0.9


def test_options_the_index_was_built_with_are_accepted_and_conflicts_refused(trained):
    engine = trained
    engine.scalar("SELECT loom_create_index('ix', 'tr', 'y', '{\"batch_size\": 64, \"seed\": 7}')")
    same = {"index": "ix", "batch_size": 64, "seed": 7, "features": ["a", "b", "c"], "epochs": 1}
    engine.scalar(f"SELECT loom_train('same', NULL, 'y', '{json.dumps(same)}')")
    with pytest.raises(engine.errors, match="built with batch_size = 64; this train asks for 32"):
        engine.scalar(
            "SELECT loom_train('other', NULL, 'y', '{\"index\": \"ix\", \"batch_size\": 32}')"
        )


def test_the_catalog_records_the_options_used(trained):
    engine = trained
    summary = json.loads(engine.scalar("SELECT loom_model_info('m')"))
    used = summary["options"]
    assert used["lr"] > 0 and used["lr"] == summary["history"][-1]["lr"]
    assert used["batch_size"] == 256 and used["standardize"] == "zscore"
    assert used["lr_schedule"] == "constant" and used["format"] == "dense"
    engine.scalar("SELECT loom_create_index('w', 'tr', 'y', '{\"format\": \"mlweaving\"}')")
    engine.scalar("SELECT loom_train('mw', NULL, 'y', '{\"index\": \"w\", \"epochs\": 2}')")
    weave = json.loads(engine.scalar("SELECT loom_model_info('mw')"))
    assert weave["options"]["standardize"] == "zscore"  # as every format, folded over its codes
    engine.scalar(
        "SELECT loom_train('mz', NULL, 'y', "
        '\'{"index": "w", "epochs": 2, "standardize": "zscore"}\')'
    )
    zscored = json.loads(engine.scalar("SELECT loom_model_info('mz')"))
    assert zscored["options"]["standardize"] == zscored["standardization"]["method"] == "zscore"


def test_fpga_sim_honours_the_intercept_and_refuses_what_it_cannot_do(engine):
    rng = np.random.default_rng(1)
    X = rng.random((2048, 8))
    engine.load("fp", X, 5.0 + X @ np.linspace(0.5, 2.0, 8))
    built = json.dumps({"format": "mlweaving", "batch_size": 64})
    engine.scalar(f"SELECT loom_create_index('fw', 'fp', 'y', '{built}')")
    r2 = {}
    for backend in ("cpu", "fpga-sim"):
        name = backend.replace("-", "_")
        opts = {
            "index": "fw",
            "model": "linear",
            "backend": backend,
            "epochs": 20,
            "standardize": "minmax",
            "l2": 0.0,
            "progress": False,
        }
        engine.scalar(f"SELECT loom_train('{name}', NULL, 'y', '{json.dumps(opts)}')")
        r2[backend] = json.loads(engine.scalar(f"SELECT loom_evaluate('{name}', 'fp')"))["r2"]
    intercept = json.loads(
        engine.scalar("SELECT intercept FROM loom.models WHERE name = 'fpga_sim'")
    )
    assert intercept[0] > 1.0 and r2["fpga-sim"] > r2["cpu"] - 0.05, r2
    for refused, match in (
        ('"l2": 0.01', "cannot honour"),
        ('"standardize": "zscore"', "cannot honour"),
        ('"class_weight": "balanced"', "weighs a classifier"),  # on any backend (a regression)
    ):
        with pytest.raises(engine.errors, match=match):
            engine.scalar(
                f'SELECT loom_train(\'x\', NULL, \'y\', \'{{"index": "fw", "backend": '
                f'"fpga-sim", "model": "linear", {refused}}}\')'
            )
    with pytest.raises(LoomOptionError, match="cannot honour class_weight"):  # a classifier's
        registry.get("fpga-sim").check({"class_weight": "balanced"}, 1)


def test_messages_name_the_users_objects_not_loomdbs_sql(engine):
    engine.rows("CREATE TABLE real_t AS SELECT 1.0 AS x, 0.0 AS y")
    for sql in (
        "SELECT loom_train('m', 'missing_table', 'y')",
        "SELECT loom_train('m', 'SELECT nosuchcolumn, y FROM real_t', 'y')",
        "SELECT loom_evaluate('nosuchmodel', 'real_t')",
    ):
        with pytest.raises(engine.errors) as info:
            engine.rows(sql)
        message = str(info.value).split("CONTEXT")[0]
        for internal in ("DESCRIBE", "array_send", "string_agg", "loom_rn", "hashtext", "LIMIT 0"):
            assert internal not in message, f"{sql}: {message}"
    with pytest.raises(engine.errors, match="missing_table"):
        engine.rows("SELECT loom_train('m', 'missing_table', 'y')")


def test_a_diverging_step_is_backed_off_and_recorded(trained):
    engine = trained
    engine.scalar("SELECT loom_train('big', 'tr', 'y', '{\"lr\": 1e308, \"epochs\": 5}')")
    history = json.loads(engine.scalar("SELECT history FROM loom.models WHERE name = 'big'"))
    assert history[0]["restart"] == 1 and history[0]["lr"] == 1e308
    coef = json.loads(engine.scalar("SELECT coefficients FROM loom.models WHERE name = 'big'"))
    assert np.isfinite(coef).all()
    kept = [h for h in history if "restart" in h][-1]["next_lr"]  # the run that was kept
    first_epoch = next(h for h in history if h.get("epoch") == 1)
    summary = json.loads(engine.scalar("SELECT loom_model_info('big')"))
    assert summary["options"]["lr"] == kept == first_epoch["lr"] < 1e308


def test_class_weight_is_for_classifiers_and_names_each_class_once(trained):
    engine = trained
    linear = {"model": "linear", "epochs": 2, "class_weight": {"7": 3}}
    with pytest.raises(engine.errors, match="a linear model learns a number") as e:
        engine.scalar(f"SELECT loom_train('cw', 'tr', 'y', '{json.dumps(linear)}')")
    assert "train a classifier" in str(e.value)
    balanced = {"model": "linear", "epochs": 2, "class_weight": "balanced"}
    with pytest.raises(engine.errors, match="'class_weight' weighs a classifier"):
        engine.scalar(f"SELECT loom_train('cw', 'tr', 'y', '{json.dumps(balanced)}')")
    twice = {"epochs": 2, "class_weight": {"1": 3, "1.0": 5}}
    with pytest.raises(engine.errors, match="names class 1 twice") as e:
        engine.scalar(f"SELECT loom_train('cw', 'tr', 'y', '{json.dumps(twice)}')")
    assert "name each class once" in str(e.value)
    nothing = {"class_weight": {"0": 0, "1": 0}}  # every row would weigh 0
    with pytest.raises(engine.errors, match="every class a weight of 0"):
        engine.scalar(f"SELECT loom_train('cw', 'tr', 'y', '{json.dumps(nothing)}')")
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'cw'") == 0


def test_warm_start_continues_the_models_standardisation_and_intercept(trained):
    engine = trained

    def train(name: str, **options) -> dict:
        text = json.dumps({"epochs": 2, **options})
        engine.scalar(f"SELECT loom_train('{name}', 'tr', 'y', '{text}')")
        return json.loads(engine.scalar(f"SELECT loom_model_info('{name}')"))

    before = engine.scalar("SELECT count(*) FROM loom.model_versions WHERE name = 'm'")
    for asked, match in (
        ({"standardize": "minmax"}, "standardize = 'minmax'.*'zscore'-standardised"),
        ({"fit_intercept": False}, "fit_intercept = false: it has a fitted intercept"),
    ):
        with pytest.raises(engine.errors, match=match) as e:
            train("m", warm_start=True, **asked)
        assert "leave '" in str(e.value) and '"replace": true' in str(e.value)
    after = engine.scalar("SELECT count(*) FROM loom.model_versions WHERE name = 'm'")
    assert after == before  # nothing was trained
    same = train("m", warm_start=True, standardize="zscore", fit_intercept=True)
    assert same["options"]["standardize"] == same["standardization"]["method"] == "zscore"
    bare = train("bare", standardize="minmax", fit_intercept=False)
    assert bare["intercept"] == [0.0]
    kept = train("bare", warm_start=True)  # left out: the model's own, recorded as used
    assert kept["options"]["standardize"] == kept["standardization"]["method"] == "minmax"
    assert kept["options"]["fit_intercept"] is False and kept["intercept"] == [0.0]
    fitted = train("bare", warm_start=True, fit_intercept=True)  # honoured: from 0
    assert fitted["options"]["fit_intercept"] is True and fitted["intercept"] != [0.0]


@pytest.mark.parametrize("fmt", ["dense", "mlweaving"])
def test_warm_start_on_shifted_rows_keeps_the_models_own_map(engine, fmt):
    """A warm start on rows of other statistics (a feature rescaled) took the new rows' mean
    and std while keeping the coefficients learnt over the old ones: a step of 1e-12 moved
    every prediction (the first feature's raw weight divided by 3).  The model's map carries
    on, so such a step leaves its predictions where they were."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(float)
    engine.load("old", X, y, columns=["a", "b"])
    moved = X.copy()
    moved[:, 0] = 3.0 * moved[:, 0] + 10.0
    engine.load("moved", moved, y, columns=["a", "b"])
    engine.scalar("SELECT loom_train('ws', 'old', 'y', '{\"epochs\": 5}')")
    probe = "SELECT loom_predict_proba('ws', ARRAY[CAST(0.5 AS DOUBLE PRECISION), -0.25])"
    before = engine.scalar(probe)
    first = json.loads(engine.scalar("SELECT loom_model_info('ws')"))["standardization"]
    tiny = {"warm_start": True, "format": fmt, "epochs": 1, "lr": 1e-12, "tol": 0}
    engine.scalar(f"SELECT loom_train('ws', 'moved', 'y', '{json.dumps(tiny)}')")
    info = json.loads(engine.scalar("SELECT loom_model_info('ws')"))
    assert info["standardization"]["method"] == first["method"] == "zscore"
    assert np.allclose(info["standardization"]["shift"], first["shift"], rtol=1e-9)
    assert np.allclose(info["standardization"]["scale"], first["scale"], rtol=1e-9)
    assert engine.scalar(probe) == pytest.approx(before, rel=1e-6)


def test_lr_decay_needs_a_schedule_that_decays(trained):
    engine = trained
    with pytest.raises(engine.errors, match="'lr_decay' sets how") as e:
        engine.scalar("SELECT loom_train('d', 'tr', 'y', '{\"epochs\": 3, \"lr_decay\": 0.9}')")
    assert "lr_schedule" in str(e.value)
    options = json.dumps({"epochs": 3, "tol": 0, "lr_decay": 0.5, "lr_schedule": "exponential"})
    engine.scalar(f"SELECT loom_train('d', 'tr', 'y', '{options}')")
    info = json.loads(engine.scalar("SELECT loom_model_info('d')"))
    assert info["options"]["lr_decay"] == 0.5
    rates = [h["lr"] for h in info["history"]]
    assert rates[1] == pytest.approx(rates[0] * 0.5) and rates[2] == pytest.approx(rates[0] / 4)


@pytest.mark.parametrize(
    "options, match",
    [
        ('{"l2": Infinity}', "may not hold Infinity"),
        ('{"lr": NaN}', "may not hold NaN"),
        ('{"seed": 100000000000000000000000}', "'seed' option must be an integer"),
        ('{"a": ' * 30 + "1" + "}" * 30, "nested more than"),
        ('{"batch_size": 1.5}', "'batch_size' option must be an integer"),
    ],
)
def test_hostile_options_are_loom_errors(trained, options, match):
    engine = trained
    with pytest.raises(engine.errors, match=match):
        engine.scalar(f"SELECT loom_train('h', 'tr', 'y', '{options}')")
