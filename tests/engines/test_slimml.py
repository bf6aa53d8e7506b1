"""SlimML on both engines and every format: the grouped layout, skipping groups that are never
read (bytes counted from what the engine returned), the oracle, the baselines, refusals."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from loomdb.engines.duckdb.database import DuckDatabase
from loomdb.engines.postgres.client import PsycopgDatabase
from loomdb.errors import LoomFormatError
from loomdb.store import layout

pytestmark = pytest.mark.postgres

FORMATS = ["dense", "toc", "mlweaving"]
PARTS = {"dense": 1, "toc": 1, "mlweaving": 32}


@pytest.fixture
def separable(engine):
    """Two classes 6 standard deviations apart along x0: most rows soon stop mattering."""
    rng = np.random.default_rng(0)
    y = (rng.random(4096) < 0.5).astype(float)
    X = rng.normal(size=(4096, 6))
    X[:, 0] += 3.0 * (2 * y - 1)
    engine.load("sl_t", X, y)
    return engine


def _index(engine, name, **options):
    opts = json.dumps({"slimml": True, "batch_size": 512, **options})
    return json.loads(engine.scalar(f"SELECT loom_create_index('{name}', 'sl_t', 'y', '{opts}')"))


def _train(engine, name, **options):
    opts = json.dumps({"epochs": 4, "tol": 0, "replace": True, **options})
    engine.scalar(f"SELECT loom_train('{name}', NULL, 'y', '{opts}')")
    return json.loads(engine.scalar(f"SELECT history FROM loom.models WHERE name = '{name}'"))


def _accuracy(engine, model):
    return json.loads(engine.scalar(f"SELECT loom_evaluate('{model}', 'sl_t')"))["accuracy"]


def test_a_slimml_index_stores_groups_and_their_points(separable):
    info = _index(separable, "sl_g", aggregation_ratio=100)
    groups = info["slimml"]
    assert groups["groups"] == 64 and info["batches"] == 64  # ⌈log2(4096/100)⌉ = 6 levels
    assert groups["min_rows"] == groups["max_rows"] == 64 and groups["groups_per_batch"] == 8
    counts = separable.rows("SELECT part, count(*) FROM loom_data.sl_g GROUP BY part ORDER BY part")
    assert counts == [(-1, 64), (0, 64), (1, 64)]  # a point, the labels, the values per group


@pytest.mark.parametrize("fmt", FORMATS)
def test_skipped_groups_are_not_read_on_every_format(separable, fmt):
    _index(separable, "sl_i", format=fmt)
    parts = PARTS[fmt]
    stored = separable.scalar(
        f"SELECT sum(octet_length(payload)) FROM loom_data.sl_i WHERE part >= 0 AND part <= {parts}"
    )
    history = _train(separable, "sl_m", index="sl_i", model="svm", skip="slimml", cache_mb=0)
    for epoch in history:  # every stored byte of the epoch is either returned or skipped
        assert epoch["bytes_read"] + epoch["bytes_skipped"] == stored
        assert epoch["skip"] == "slimml"
    assert history[-1]["removed"] > 0.2 and history[-1]["bytes_skipped"] > 0
    assert history[-1]["rows"] == round(4096 * (1 - history[-1]["removed"]))
    plain_history = _train(separable, "sl_p", index="sl_i", model="svm")
    assert "removed" not in plain_history[-1]
    assert _accuracy(separable, "sl_m") >= _accuracy(separable, "sl_p") - 0.01


def test_warm_epochs_read_only_groups_never_read_before(separable):
    _index(separable, "sl_w")
    history = _train(separable, "sl_m", index="sl_w", model="svm", skip="slimml", epochs=6)
    total = sum(e["bytes_read"] for e in history)
    stored = separable.scalar(
        "SELECT sum(octet_length(payload)) FROM loom_data.sl_w WHERE part >= 0"
    )
    assert history[0]["bytes_read"] > 0 and total <= stored  # each group read at most once


def test_the_oracle_finds_slimmls_removed_rows_mostly_non_critical(separable):
    """At ε = 1% on a margin-separable task (SVM), most rows SlimML removes, judged on mixed-label
    groups' points, are non-critical by their exact effects (the paper: 55–87%)."""
    _index(separable, "sl_o")
    history = _train(
        separable, "sl_m", index="sl_o", model="svm", skip="slimml", slimml_oracle=True, epochs=5
    )
    later = history[1:]
    assert all(e["removed"] > 0.2 for e in later)
    assert np.mean([e["noncritical_share"] for e in later]) >= 0.8
    assert all(0.0 <= e["noncritical_rows"] <= 1.0 for e in later)
    alone = _train(separable, "sl_n", index="sl_o", model="svm", skip="slimml", epochs=5)
    # the same training (up to the order of float sums with the removed rows weighing 0)
    assert np.allclose([e["removed"] for e in alone], [e["removed"] for e in history], atol=0.03)


def test_keeping_every_group_trains_as_without_skipping(separable):
    _index(separable, "sl_k")
    _train(separable, "sl_a", index="sl_k", model="logistic", cache_mb=0)
    _train(separable, "sl_b", index="sl_k", model="logistic", skip="random", skip_fraction=0.0)
    a, b = (
        json.loads(separable.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{m}'"))
        for m in ("sl_a", "sl_b")
    )
    # the same steps; without skipping they run fused (learn/fused_steps), whose products add
    # row by row where the skipping path's BLAS adds in its own order: equal to the last bits
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)


def test_a_train_whose_skipping_leaves_no_row_is_refused_and_not_stored(separable):
    """ε = 1 lets SlimML remove every group: the epochs trained on nothing, and a zero model
    was stored with a loss of 0."""
    _index(separable, "sl_n")
    with pytest.raises(separable.errors, match="trained on no row"):
        _train(separable, "sl_none", index="sl_n", skip="slimml", epsilon=1.0)
    assert separable.scalar("SELECT count(*) FROM loom.models WHERE name = 'sl_none'") == 0


def test_a_tune_candidate_that_trains_on_no_row_is_a_failed_trial(separable):
    _index(separable, "sl_tu")

    def tune(name, epsilons):
        opts = json.dumps({"index": "sl_tu", "skip": "slimml", "epsilon": epsilons, "epochs": 2})
        return json.loads(separable.scalar(f"SELECT loom_tune('{name}', NULL, 'y', '{opts}')"))

    summary = tune("sl_tuned", [1.0, 0.01])
    assert summary["failed"] == 1 and summary["best_options"] == {"epsilon": 0.01}
    rows = separable.rows("SELECT status, error FROM loom_trials('sl_tuned') ORDER BY trial")
    assert [r[0] for r in rows] == ["failed", "ok"] and "trained on no row" in rows[0][1]
    with pytest.raises(separable.errors, match="every trial .* failed: the first epoch trained"):
        tune("sl_none", [1.0])
    assert separable.scalar("SELECT count(*) FROM loom.models WHERE name = 'sl_none'") == 0


@pytest.mark.parametrize("skip", ["random", "coreset", "importance"])
def test_baselines_remove_the_share_asked(separable, skip):
    _index(separable, "sl_b")
    history = _train(
        separable, "sl_m", index="sl_b", model="logistic", skip=skip, skip_fraction=0.5
    )
    assert all(abs(e["removed"] - 0.5) < 0.05 for e in history)
    if skip == "importance":  # it reads every row to know their losses
        assert all(e["bytes_skipped"] == 0 for e in history)
    else:
        assert all(e["bytes_skipped"] > 0 for e in history)


def test_the_random_baseline_removes_the_share_asked_from_minibatches_of_one_group(separable):
    info = _index(separable, "sl_one", batch_size=64)
    assert info["slimml"]["groups_per_batch"] == 1  # a group is dropped whole, or kept
    history = _train(separable, "sl_m", index="sl_one", skip="random", skip_fraction=0.3)
    removed = [e["removed"] for e in history]
    assert all(0.1 < r < 0.5 for r in removed) and abs(np.mean(removed) - 0.3) < 0.1


REFUSED = [
    ("sl_plain", {"skip": "slimml"}, "was built without slimml"),
    ("sl_r", {"epsilon": 0.02}, "'epsilon' applies to skip 'slimml'"),
    ("sl_r", {"skip": "random"}, "needs 'skip_fraction'"),
    ("sl_r", {"skip": "slimml", "skip_fraction": 0.3}, "'skip_fraction' applies"),
]


@pytest.mark.parametrize("index, options, message", REFUSED)
def test_skipping_is_honoured_or_refused(separable, index, options, message):
    separable.scalar("SELECT loom_create_index('sl_plain', 'sl_t', 'y')")
    _index(separable, "sl_r")
    with pytest.raises(separable.errors, match=message):
        _train(separable, "sl_m", index=index, **options)


def test_fpga_sim_refuses_a_grouped_layout(separable):
    _index(separable, "sl_f", format="mlweaving")
    with pytest.raises(separable.errors, match="group by group"):
        _train(separable, "sl_m", index="sl_f", model="linear", backend="fpga-sim", precision=4)


def test_grouping_options_need_slimml(separable):
    with pytest.raises(separable.errors, match="SlimML layouts only"):
        separable.scalar("SELECT loom_create_index('sl_x', 'sl_t', 'y', '{\"stratify\": true}')")


def _database(engine):
    """loomdb's Database over the engine, from this process (the same SQL the server runs)."""
    if engine.name == "duckdb":
        return DuckDatabase(engine.con.duckdb.cursor(), engine.con.state)
    db = PsycopgDatabase(engine.conn)
    db.as_role = lambda role: contextlib.nullcontext()  # type: ignore[attr-defined]
    return db


def test_a_damaged_group_outside_the_read_is_never_returned(separable):
    _index(separable, "sl_d")
    separable.rows(
        "UPDATE loom_data.sl_d SET payload = payload || payload WHERE batch = 5 AND part = 1"
    )
    laid = layout.open_index(_database(separable), "sl_d", allow_stale=True)
    wanted = [0, 1, 7, 9]
    batches = list(laid.groups(wanted, 32))
    sizes = separable.rows(
        "SELECT batch, sum(octet_length(payload)) FROM loom_data.sl_d "
        "WHERE part >= 0 GROUP BY batch ORDER BY batch"
    )
    assert [b.number for b in batches] == wanted
    assert [b.nbytes for b in batches] == [dict(sizes)[i] for i in wanted]
    with pytest.raises(LoomFormatError, match="group|minibatch 5"):
        list(laid.groups([4, 5, 6], 32))
    with pytest.raises(separable.errors, match="damaged"):
        _train(separable, "sl_m", index="sl_d", model="svm", cache_mb=0)
    rebuilt = json.loads(separable.scalar("SELECT loom_reindex('sl_d')"))
    assert rebuilt["slimml"]["groups"] == 64  # rebuilt in groups, as it was built
    assert _train(separable, "sl_m", index="sl_d", model="svm", skip="slimml")[-1]["removed"] > 0


def test_read_ahead_reads_several_minibatches_per_query(separable):
    _index(separable, "sl_a")
    stored = separable.scalar(
        "SELECT sum(octet_length(payload)) FROM loom_data.sl_a WHERE part >= 0"
    )
    history = _train(
        separable, "sl_m", index="sl_a", model="svm", skip="slimml", read_ahead=4, cache_mb=0
    )
    assert all(e["bytes_read"] + e["bytes_skipped"] == stored for e in history)
    assert history[-1]["removed"] > 0.2


@pytest.mark.parametrize("cache_mb", [256, 0])
def test_a_train_without_an_index_lays_its_source_out_in_groups(separable, cache_mb):
    """In memory, or in a temporary keyed table when the rows do not fit ``cache_mb``."""
    opts = json.dumps(
        {"slimml": True, "skip": "slimml", "model": "svm", "epochs": 3, "batch_size": 512,
         "cache_mb": cache_mb}
    )  # fmt: skip
    summary = json.loads(separable.scalar(f"SELECT loom_train('sl_s', 'sl_t', 'y', '{opts}')"))
    assert summary["rows"] == 4096
    history = json.loads(separable.scalar("SELECT history FROM loom.models WHERE name = 'sl_s'"))
    assert history[-1]["removed"] > 0.2 and history[-1]["bytes_skipped"] > 0


GROUP_DAMAGE = {
    "missing part": ("DELETE FROM loom_data.sl_c WHERE batch = 1 AND part = 1", {}),
    "missing group": ("DELETE FROM loom_data.sl_c WHERE batch = 2 AND part >= 0", {}),
    "swapped": (
        "UPDATE loom_data.sl_c SET payload = (SELECT payload FROM loom_data.sl_c "
        "WHERE batch = 2 AND part = 1) WHERE batch = 1 AND part = 1",
        {},
    ),
    "fewer rows": ("UPDATE loom_data.sl_c SET rows = rows - 1 WHERE batch = 1", {}),
    "altered point": (
        "UPDATE loom_data.sl_c SET payload = payload || payload WHERE batch = 3 AND part = -1",
        {"skip": "slimml"},
    ),
    "missing point": (
        "DELETE FROM loom_data.sl_c WHERE batch = 3 AND part = -1",
        {"skip": "slimml"},
    ),
}


@pytest.mark.parametrize("damage", list(GROUP_DAMAGE))
def test_a_damaged_slimml_index_is_refused_with_the_fix(separable, damage):
    _index(separable, "sl_c")
    sql, options = GROUP_DAMAGE[damage]
    separable.rows(sql)
    with pytest.raises(separable.errors) as info:
        _train(separable, "sl_m", index="sl_c", model="svm", cache_mb=0, epochs=1, **options)
    assert "index 'sl_c' is damaged" in str(info.value)
    assert "loom_reindex('sl_c')" in str(info.value)
