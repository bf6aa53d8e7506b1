"""Model versions: each train of a name adds one, loom_deploy chooses one (a number, 'latest',
'best'), loom_rollback goes back one, loom_drop_model(model, version) drops an old one."""

from __future__ import annotations

import json

import numpy as np
import pytest

# three trainings of 'm' that learn differently (few epochs, small steps: they stay apart)
OPTIONS = [
    {
        "epochs": 2,
        "lr": 0.05,
        "l2": 0.0,
        "validation_fraction": 0.2,
        "batch_size": 40,
        "progress": False,
    },
    {
        "epochs": 1,
        "lr": 0.001,
        "l2": 0.5,
        "validation_fraction": 0.2,
        "batch_size": 40,
        "progress": False,
    },
    {
        "epochs": 4,
        "lr": 0.2,
        "l2": 0.01,
        "validation_fraction": 0.2,
        "batch_size": 40,
        "progress": False,
    },
]


def _load(engine):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] - 0.5 * X[:, 2] + 0.3 * rng.normal(size=400) > 0).astype(float)
    engine.load("d", X, y, ["a", "b", "c"])


def _train(engine, options):
    text = json.dumps({**options, "replace": True})
    return json.loads(engine.scalar(f"SELECT loom_train('m', 'd', 'y', '{text}')"))


def _probabilities(engine, udf="loom_predict_proba"):
    features = engine.array(["a", "b", "c"])
    return [r[0] for r in engine.rows(f"SELECT {udf}('m', {features}) FROM d ORDER BY a")]


def _versions(engine):
    rows = engine.rows("SELECT * FROM loom_model_versions('m')")
    keys = ("version", "current", "created_at", "options", "loss", "validation_loss", "epochs")
    return [dict(zip(keys, r)) for r in rows]


def _current(engine):
    return json.loads(engine.scalar("SELECT loom_model_info('m')"))["version"]


@pytest.fixture
def three(engine):
    """'m' trained three times; the probabilities each version predicted."""
    _load(engine)
    predicted = []
    for options in OPTIONS:
        _train(engine, options)
        predicted.append(_probabilities(engine))
    return predicted


def test_each_train_adds_a_version_and_keeps_the_old_ones(engine, three):
    listed = _versions(engine)
    assert [v["version"] for v in listed] == [1, 2, 3]
    assert [v["current"] for v in listed] == [False, False, True]
    for row, options in zip(listed, OPTIONS):
        kept = json.loads(row["options"])
        assert {k: kept[k] for k in ("epochs", "lr", "l2")} == {
            k: options[k] for k in ("epochs", "lr", "l2")
        }
        assert row["epochs"] == options["epochs"] and row["validation_loss"] is not None
    assert _current(engine) == 3
    assert three[0] != three[1] != three[2]


def test_deploy_a_version_predicts_what_it_predicted(engine, three):
    made = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"version": 1}')"""))
    assert made["version"] == 1 and _current(engine) == 1
    assert _probabilities(engine) == three[0]
    assert [v["current"] for v in _versions(engine)] == [True, False, False]
    # the deployed function and the compiled expression follow the chosen version
    labels = _probabilities(engine, "loom_predict")
    deployed = [r[0] for r in engine.rows("SELECT predict_m(a, b, c) FROM d ORDER BY a")]
    assert deployed == labels
    expression = engine.scalar("SELECT loom_predict_sql('m')")
    compiled = [r[0] for r in engine.rows(f"SELECT {expression} FROM d ORDER BY a")]
    assert compiled == labels
    engine.scalar("""SELECT loom_deploy('m', '{"version": "latest"}')""")
    assert _current(engine) == 3 and _probabilities(engine) == three[2]
    assert [r[0] for r in engine.rows("SELECT predict_m(a, b, c) FROM d ORDER BY a")] == (
        _probabilities(engine, "loom_predict")
    )


def test_best_is_the_lowest_final_validation_loss(engine, three):
    listed = _versions(engine)
    expected = min(listed, key=lambda v: (v["validation_loss"], v["version"]))["version"]
    made = json.loads(engine.scalar("""SELECT loom_deploy('m', '{"version": "best"}')"""))
    assert made["version"] == expected == _current(engine)
    assert _probabilities(engine) == three[expected - 1]


def test_rollback_goes_back_one_version(engine, three):
    assert _probabilities(engine) == three[2]  # version 3 cached, then rolled back
    rolled = json.loads(engine.scalar("SELECT loom_rollback('m')"))
    assert (rolled["version"], rolled["previous"]) == (2, 3)
    assert _probabilities(engine) == three[1]
    engine.scalar("SELECT loom_rollback('m')")
    assert _probabilities(engine) == three[0]
    with pytest.raises(engine.errors, match="no version before version 1"):
        engine.scalar("SELECT loom_rollback('m')")
    _train(engine, OPTIONS[1])  # a train after a rollback is the newest version
    assert [v["version"] for v in _versions(engine)] == [1, 2, 3, 4]
    assert _current(engine) == 4


def test_drop_one_old_version_but_never_the_current_one(engine, three):
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('m', 2)"))
    assert dropped == {"model": "m", "dropped_version": 2}
    assert [v["version"] for v in _versions(engine)] == [1, 3]
    with pytest.raises(engine.errors, match="version 3 is the current version"):
        engine.scalar("SELECT loom_drop_model('m', 3)")
    with pytest.raises(engine.errors, match="has no version 2"):
        engine.scalar("""SELECT loom_deploy('m', '{"version": 2}')""")
    assert engine.scalar("SELECT loom_rollback('m')") is not None  # skips the dropped one
    assert _current(engine) == 1 and _probabilities(engine) == three[0]
    engine.scalar("SELECT loom_drop_model('m')")
    assert engine.scalar("SELECT count(*) FROM loom.model_versions WHERE name = 'm'") == 0


def test_a_version_number_is_never_given_twice(engine, three):
    """Versions 1-3, back to 2, 3 dropped: the next train was numbered 3 again."""
    engine.scalar("SELECT loom_rollback('m')")
    engine.scalar("SELECT loom_drop_model('m', 3)")
    _train(engine, OPTIONS[0])
    assert [(v["version"], v["current"]) for v in _versions(engine)] == [
        (1, False),
        (2, False),
        (4, True),
    ]
    # the row that remembered 3 (version 2) and the newest one (4) dropped in turn
    engine.scalar("""SELECT loom_deploy('m', '{"version": 1}')""")
    engine.scalar("SELECT loom_drop_model('m', 4)")
    engine.scalar("SELECT loom_drop_model('m', 2)")
    _train(engine, OPTIONS[0])
    assert [v["version"] for v in _versions(engine)] == [1, 5]
    assert _current(engine) == 5


def test_a_null_never_widens_what_is_dropped(engine):
    """loom_drop_model(m, NULL) — a subquery that found no old version — dropped the whole
    model and its functions; a 'drop' naming one function dropped them all."""
    _load(engine)
    _train(engine, OPTIONS[0])
    engine.scalar("SELECT loom_deploy('m')")
    oldest = "SELECT min(version) FROM loom_model_versions('m') WHERE NOT current"
    for sql in ("SELECT loom_drop_model('m', NULL)", f"SELECT loom_drop_model('m', ({oldest}))"):
        with pytest.raises(
            engine.errors, match=r"(?s)version to drop is NULL.*loom_drop_model\('m'\)"
        ):
            engine.scalar(sql)
    with pytest.raises(engine.errors, match="'name' does not go with it"):
        engine.scalar("""SELECT loom_deploy('m', '{"drop": true, "name": "other"}')""")
    assert _current(engine) == 1 and len(_probabilities(engine)) == 400
    assert engine.scalar("SELECT count(predict_m(a, b, c)) FROM d") == 400
    assert engine.scalar("SELECT count(*) FROM loom.deployments") == 1
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('m')"))  # left out: the model
    assert dropped["dropped"] == "m" and len(dropped["functions"]) == 1


def test_bad_version_choices_are_refused(engine, three):
    for bad in ('{"version": 0}', '{"version": "newest"}', '{"version": 1, "drop": true}'):
        with pytest.raises(engine.errors, match="version"):
            engine.scalar(f"SELECT loom_deploy('m', '{bad}')")
    with pytest.raises(engine.errors, match="does not exist"):
        engine.scalar("SELECT * FROM loom_model_versions('nope')")


def test_a_version_number_beyond_the_catalogs_is_refused_as_an_option(engine, three):
    """A version past the catalog's integer was PostgreSQL's SystemError "value … is out of
    range for type bigint" (DuckDB: "no version 99999999999999999999")."""
    for number in (99999999999999999999, 2**31):
        with pytest.raises(engine.errors, match="'version' option must be an integer from 1 to"):
            engine.scalar(f"SELECT loom_deploy('m', '{{\"version\": {number}}}')")
    assert _current(engine) == 3
