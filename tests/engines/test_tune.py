"""``loom_tune`` on both engines: every grid combination once, the best trial kept as the
model (and reproducible with ``loom_train``), random search drawn with a seed, bad candidates
refused before any trial, a diverging candidate recorded and passed over."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

BASE = {"model": "logistic", "batch_size": 50, "epochs": 5}
DIVERGES = {"1": 1e300}  # a class weight no step survives: the weighted loss overflows


@pytest.fixture
def points(engine):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3))
    X[:, 2] *= 1e150  # unstandardised, this column makes training diverge
    y = (X[:, 0] - 2 * X[:, 1] + 0.3 * rng.normal(size=600) > 0).astype(float)
    engine.load("pts", X, y, columns=["a", "b", "c"])
    return engine


def tune(engine, name: str, **options) -> dict:
    text = json.dumps({**BASE, **options})
    return json.loads(engine.scalar(f"SELECT loom_tune('{name}', 'pts', 'y', '{text}')"))


def trials(engine, name: str) -> list[tuple]:
    return engine.rows(
        f"SELECT trial, status, score, options, error FROM loom_trials('{name}') ORDER BY trial"
    )


def test_a_grid_runs_every_combination_once_and_keeps_the_best(points):
    engine = points
    lrs, l2s = [0.01, 0.1, 1.0], [0.0, 0.001]
    summary = tune(engine, "g", lr=lrs, l2=l2s)
    rows = trials(engine, "g")
    assert summary["trials"] == len(rows) == len(lrs) * len(l2s)
    tried = sorted((json.loads(r[3])["lr"], json.loads(r[3])["l2"]) for r in rows)
    assert tried == sorted(itertools.product(lrs, l2s))
    assert all(r[1] == "ok" for r in rows)
    best = min(rows, key=lambda r: r[2])
    assert summary["best_trial"] == best[0] and summary["best_score"] == best[2]
    info = json.loads(engine.scalar("SELECT loom_model_info('g')"))
    assert info["options"]["tuned"]["trial"] == best[0]
    chosen = json.loads(best[3])
    assert info["options"]["lr"] == chosen["lr"] and info["options"]["l2"] == chosen["l2"]
    engine.scalar(f"SELECT loom_train('again', 'pts', 'y', '{best[3]}')")
    same = engine.rows(
        "SELECT loom_predict_proba('g', ARRAY[a, b, c]) - loom_predict_proba('again', "
        "ARRAY[a, b, c]) FROM pts"
    )
    assert np.allclose([r[0] for r in same], 0.0, atol=1e-12)


def test_random_search_is_reproducible_and_draws_from_the_lists(points):
    engine = points
    lrs, l2s, batches = [0.01, 0.03, 0.1, 0.3], [0.0, 0.001, 0.01], [50, 100]
    options = {"lr": lrs, "l2": l2s, "batch_size": batches, "search": "random", "trials": 5}
    first = tune(engine, "r1", search_seed=7, **options)
    second = tune(engine, "r2", search_seed=7, **options)
    drawn = [json.loads(r[3]) for r in trials(engine, "r1")]
    assert first["trials"] == len(drawn) == 5
    assert [json.loads(r[3]) for r in trials(engine, "r2")] == drawn
    assert first["best_options"] == second["best_options"]
    picks = [(d["lr"], d["l2"], d["batch_size"]) for d in drawn]
    assert len(set(picks)) == len(picks)
    assert all(lr in lrs and l2 in l2s and b in batches for lr, l2, b in picks)
    other = tune(engine, "r3", search_seed=8, **options)
    assert other["trials"] == 5


@pytest.mark.parametrize(
    "options, match",
    [
        ({"lr": [0.1, -1]}, "'lr' option must be a number > 0; got -1"),
        ({"lr": [0.1], "colour": [1, 2]}, "unknown loom_train option 'colour'"),
        ({"model": ["logistic", "svm"]}, "'model' cannot be a list"),
        ({"lr": []}, "'lr' is an empty list"),
        ({"lr": [0.1, 0.1]}, "'lr' lists 0.1 twice"),
        ({"l2": [0, 0.0]}, "'l2' lists 0.0 twice"),  # one value: it ran two identical trials
        # a SlimML layout validates on other rows: slimml won on an easier validation set
        ({"slimml": [True, False]}, "'slimml' cannot be a list of candidates: a SlimML layout"),
        ({"slimml": True, "aggregation_ratio": [10, 100]}, "'aggregation_ratio' cannot be a"),
        ({"progress": [True, False]}, "'progress' cannot be a list of candidates"),
        ({"epochs": [3, 3.0]}, "'epochs' lists 3.0 twice"),
        ({"lr": [0.1, 0.2], "trials": 2}, "'trials' applies to random search"),
        ({"lr": [0.1, 0.2], "search_seed": 7}, "'search_seed' applies to random search"),
        (
            {"lr": [0.001 * i for i in range(1, 10)], "l2": [0.0] + [10.0**-i for i in range(8)]},
            "the grid holds 81 combinations",
        ),
        ({"validation_fraction": 0}, "validation_fraction cannot be 0"),
        ({"warm_start": True}, "does not take 'warm_start'"),
    ],
)
def test_bad_candidates_are_refused_before_any_trial(points, options, match):
    engine = points
    with pytest.raises(engine.errors, match=match):
        tune(engine, "bad", **options)
    assert engine.scalar("SELECT count(*) FROM loom.trials WHERE model = 'bad'") == 0
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'bad'") == 0


def test_warm_start_is_refused_with_a_hint(points):
    """The refusal said why but not what to do instead (no HINT, against the house rule)."""
    engine = points
    with pytest.raises(engine.errors) as info:
        tune(engine, "w", lr=[0.1, 0.3], warm_start=True)
    diag = getattr(info.value, "diag", None)
    hint = diag.message_hint if diag is not None else getattr(info.value, "hint", None)
    assert hint and "warm_start" in hint and "loom_train" in hint


def test_a_diverging_candidate_is_recorded_as_failed_and_never_chosen(points):
    engine = points
    summary = tune(engine, "d", class_weight=[DIVERGES, "balanced"])
    failed, ok = trials(engine, "d")
    assert failed[1] == "failed" and "diverged" in failed[4] and failed[2] is None
    assert json.loads(failed[3])["class_weight"] == DIVERGES
    assert ok[1] == "ok" and summary["failed"] == 1 and summary["best_trial"] == 2
    assert summary["best_options"] == {"class_weight": "balanced"}
    info = json.loads(engine.scalar("SELECT loom_model_info('d')"))
    assert info["options"]["class_weight"] == "balanced"


def test_a_failed_tune_leaves_the_previous_model_and_trials(points):
    engine = points
    tune(engine, "p", lr=[0.1, 0.3])
    before = trials(engine, "p")
    with pytest.raises(engine.errors, match="every trial"):
        tune(engine, "p", class_weight=[DIVERGES], replace=True)
    assert trials(engine, "p") == before
    with pytest.raises(engine.errors, match="already exists"):
        tune(engine, "p", lr=[0.1])
    tune(engine, "p", lr=[0.1], replace=True)
    assert len(trials(engine, "p")) == 1


def test_dropping_the_model_drops_its_trials(points):
    engine = points
    tune(engine, "x", l2=[0.0, 0.01])
    engine.scalar("SELECT loom_drop_model('x')")
    assert engine.scalar("SELECT count(*) FROM loom.trials WHERE model = 'x'") == 0
    with pytest.raises(engine.errors, match="does not exist"):
        engine.rows("SELECT * FROM loom_trials('x')")
    engine.scalar("SELECT loom_train('plain', 'pts', 'y', '{\"batch_size\": 50, \"epochs\": 2}')")
    assert engine.rows("SELECT * FROM loom_trials('plain')") == []


def test_trials_are_the_current_versions_search(points):
    """loom_trials lists the search that made the current version: a loom_train of the name
    (replace) listed the earlier tune's trials as if they had made it, and so did a rollback
    from a tuned version to a trained one, or the dropped tuned version's."""
    engine = points
    tune(engine, "v", lr=[0.1, 0.3])
    searched = trials(engine, "v")
    options = json.dumps({**BASE, "replace": True})
    engine.scalar(f"SELECT loom_train('v', 'pts', 'y', '{options}')")
    assert trials(engine, "v") == []
    engine.scalar("SELECT loom_deploy('v', '{\"version\": 1}')")
    assert trials(engine, "v") == searched
    engine.scalar("SELECT loom_deploy('v', '{\"version\": 2}')")
    engine.scalar("SELECT loom_drop_model('v', 1)")
    assert trials(engine, "v") == []
    assert engine.scalar("SELECT count(*) FROM loom.trials WHERE model = 'v'") == 0
    engine.scalar(f"SELECT loom_train('w', 'pts', 'y', '{options}')")
    tune(engine, "w", lr=[0.1, 0.3], replace=True)
    assert len(trials(engine, "w")) == 2
    engine.scalar("SELECT loom_rollback('w')")
    assert trials(engine, "w") == []


@pytest.mark.parametrize("extra", [{}, {"parallel": 2}])
def test_trials_share_one_layout_that_a_failed_trial_leaves_standing(points, extra):
    """``"cache_mb": 0`` lays the source out in a table (``parallel`` 2 on PostgreSQL: one its
    workers can read), made before the first trial's subtransaction: the diverging first trial
    rolls back without it, the second trains on it, and the tune drops it at the end."""
    engine = points
    options = {"cache_mb": 0, "class_weight": [DIVERGES, "balanced"], **extra}
    summary = tune(engine, "s", **options)
    failed, ok = trials(engine, "s")
    assert failed[1] == "failed" and ok[1] == "ok" and summary["best_trial"] == 2
    chosen = {**BASE, **json.loads(ok[3])}
    engine.scalar(f"SELECT loom_train('alone', 'pts', 'y', '{json.dumps(chosen)}')")
    same = engine.rows(
        "SELECT loom_predict_proba('s', ARRAY[a, b, c]) - loom_predict_proba('alone', "
        "ARRAY[a, b, c]) FROM pts"
    )
    assert np.allclose([r[0] for r in same], 0.0, atol=1e-12)
    left = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'loom_data'"
    assert engine.scalar(left) == 0


def test_a_tune_lays_out_once_per_layout_its_trials_share(monkeypatch):
    """Every trial reads the same minibatches, so consecutive trials whose options lay out
    the same rows share one layout (an index: opened, and checked fresh, once)."""
    import loomdb
    from loomdb.store import layout

    made: list[str] = []
    for name in ("scratch", "open_index"):
        real = getattr(layout, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            made.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(layout, name, counted)
    con = loomdb.connect(progress=False)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] > 0).astype(float)
    con.execute("CREATE TABLE pts AS SELECT * FROM (VALUES (0.0, 0.0, 0.0)) v(a, b, y) LIMIT 0")
    con.executemany("INSERT INTO pts VALUES (?, ?, ?)", [(*x, t) for x, t in zip(X, y)])

    def run(source: str, **options) -> None:
        text = json.dumps({"epochs": 2, "batch_size": 20, "replace": True, **options})
        con.execute(f"SELECT loom_tune('t', {source}, 'y', '{text}')").fetchall()

    run("'pts'", lr=[0.01, 0.1, 1.0], l2=[0.0, 0.01])
    assert made == ["scratch"]
    made.clear()
    run("'pts'", batch_size=[20, 40], lr=[0.01, 0.1])  # the grid varies lr fastest
    assert made == ["scratch", "scratch"]
    made.clear()
    run("'pts'", lr=[0.01, 0.1], format=["dense", "toc"])  # format fastest: trials regrouped
    assert made == ["scratch", "scratch"]
    ran = con.execute("SELECT trial, options FROM loom_trials('t') ORDER BY trial").fetchall()
    order = [(json.loads(o)["format"], json.loads(o)["lr"]) for _, o in ran]
    assert order == [("dense", 0.01), ("dense", 0.1), ("toc", 0.01), ("toc", 0.1)]
    con.execute("""SELECT loom_create_index('ix', 'pts', 'y', '{"batch_size": 20}')""").fetchall()
    made.clear()
    run("NULL", index="ix", lr=[0.01, 0.1, 1.0])
    assert made == ["open_index"]
    con.close()
