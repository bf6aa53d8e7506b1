"""fpga-sim through SQL on both engines: ``loom_simulate`` and training with backend "fpga-sim".

The engine and performance model themselves are tested in ``test_fpga_sim.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.codecs import weave

# cpu vs fpga-sim at 32 bits: observed ~1e-5; fpga_sim.engine.tolerance derives a looser bound
TOLERANCE = 1e-4


@pytest.fixture
def woven(engine):
    rng = np.random.default_rng(0)
    X = rng.random((1024, 100))  # whole mini-batches: the engine pads a short last one
    engine.load("sim_t", X, (X[:, :5].sum(axis=1) > 2.5).astype(float))
    engine.scalar(
        "SELECT loom_create_index('sw', 'sim_t', 'y', "
        '\'{"format": "mlweaving", "batch_size": 64}\')'
    )
    return engine


@pytest.mark.postgres
def test_loom_simulate_from_sql(woven):
    report = json.loads(woven.scalar("SELECT loom_simulate('sw', '{\"precision\": 4}')"))
    assert report["bytes_per_epoch"] == weave.epoch_bytes(1024, 100, 4)
    assert report["job"]["mini_batch"] == 64 and report["cycles_per_epoch"] > 0
    with pytest.raises(woven.errors, match="precision"):
        woven.scalar("SELECT loom_simulate('sw', '{\"precision\": 40}')")


@pytest.mark.postgres
def test_training_on_the_simulator_matches_cpu_and_keeps_its_report(woven):
    for backend in ("cpu", "fpga-sim"):
        opts = {
            "index": "sw",
            "precision": 32,
            "epochs": 3,
            "model": "linear",
            "backend": backend,
            "lr": 2**-6,
            "lr_schedule": "constant",
            "l2": 0.0,
            "fit_intercept": False,
            "standardize": "minmax",
            "optimizer": "sgd",  # the engine's: plain SGD (cpu's default accelerates)
            "progress": False,
        }
        name = backend.replace("-", "_")
        woven.scalar(f"SELECT loom_train('{name}', NULL, 'y', '{json.dumps(opts)}')")
    rows = dict(woven.rows("SELECT backend, coefficients FROM loom.models"))
    cpu, sim = (np.asarray(json.loads(rows[b])) for b in ("cpu", "fpga-sim"))
    assert np.abs(cpu - sim).max() < TOLERANCE
    info = json.loads(woven.scalar("SELECT loom_model_info('fpga_sim')"))
    assert len(info["report"]["simulated_seconds"]) == 3
    assert info["history"][0]["simulated_seconds"] > 0
    # logistic: loomdb's extension of the engine's serial part, trained from SQL too
    woven.scalar(
        'SELECT loom_train(\'lg\', NULL, \'y\', \'{"index": "sw", "backend": "fpga-sim", '
        '"model": "logistic", "precision": 8, "epochs": 10, "lr": 0.5}\')'
    )
    assert json.loads(woven.scalar("SELECT loom_evaluate('lg', 'sim_t')"))["accuracy"] > 0.8
    with pytest.raises(woven.errors, match="cannot train on the dense format"):
        woven.scalar("SELECT loom_train('x', 'sim_t', 'y', '{\"backend\": \"fpga-sim\"}')")


@pytest.mark.postgres
def test_an_intercept_the_q8_23_model_cannot_hold_is_refused(engine):
    # the intercept's weight is twice the intercept: beyond ±128 the model register wrapped and
    # a broken model was stored (labels ~140: r2 = -1253, intercept 122)
    a = (np.arange(400) % 10).astype(float)
    opts = {"backend": "fpga-sim", "model": "linear", "epochs": 200}
    for level in (100, 140, 200):
        engine.load(f"lv{level}", a.reshape(-1, 1), level + 0.1 * a)
        engine.scalar(
            f"SELECT loom_create_index('w{level}', 'lv{level}', 'y', "
            '\'{"format": "mlweaving", "batch_size": 64}\')'
        )
        train = json.dumps({**opts, "index": f"w{level}"})
        sql = f"SELECT loom_train('f{level}', NULL, 'y', '{train}')"
        if level == 100:
            engine.scalar(sql)
            report = json.loads(engine.scalar(f"SELECT loom_evaluate('f{level}', 'lv{level}')"))
            assert report["r2"] > 0.99
        else:
            with pytest.raises(engine.errors, match=r"overflowed[\s\S]*center the label"):
                engine.scalar(sql)
    assert engine.rows("SELECT name FROM loom.models WHERE name IN ('f140', 'f200')") == []


@pytest.mark.postgres
def test_a_batch_size_the_engine_cannot_run_is_refused_by_train_and_simulate(engine):
    # batch_size 24 trained as mini_batch 32 (each block's gradient divided by 32) while
    # loom_simulate refused it with a hint naming the job's mini_batch, a field never given
    a = np.arange(200, dtype=float)
    engine.load("b24", a.reshape(-1, 1), 0.5 * a)
    for size in (24, 32):
        engine.scalar(
            f"SELECT loom_create_index('w{size}', 'b24', 'y', "
            f'\'{{"format": "mlweaving", "batch_size": {size}}}\')'
        )
    opts = '{"index": "w%d", "backend": "fpga-sim", "model": "linear", "epochs": 2}'
    refused = r"index 'w24' has batch_size = 24[\s\S]*power of two[\s\S]*batch_size = 32"
    with pytest.raises(engine.errors, match=refused):
        engine.scalar(f"SELECT loom_train('f24', NULL, 'y', '{opts % 24}')")
    with pytest.raises(engine.errors, match=refused):
        engine.scalar("SELECT loom_simulate('w24')")
    with pytest.raises(engine.errors, match="this simulation has batch_size = 24"):
        engine.scalar("SELECT loom_simulate('w32', '{\"batch_size\": 24}')")
    assert engine.rows("SELECT name FROM loom.models WHERE name = 'f24'") == []
    engine.scalar(f"SELECT loom_train('f32', NULL, 'y', '{opts % 32}')")  # a power of two: runs
    assert json.loads(engine.scalar("SELECT loom_simulate('w32')"))["job"]["mini_batch"] == 32
    # the cpu backend honours any batch_size
    engine.scalar(
        'SELECT loom_train(\'c24\', NULL, \'y\', \'{"index": "w24", "model": "linear"}\')'
    )


@pytest.mark.postgres
def test_a_short_last_block_is_averaged_over_the_mini_batch(engine):
    """The engine's average is a fixed shift by log2 B (MLWeaving §5: B in the job descriptor):
    a short last block's gradient sum is divided by B, its missing rows padding.  264 rows at
    B = 256: the last block's 8 rows were divided by 8, a 32x step, and the model after one
    epoch from zero was about twice mini-batch SGD's.  With λ small, one epoch from zero is
    (λ/B)·Σ yᵢ·x̃ᵢ over every row, whatever the order of the blocks, up to O(λ²)."""
    rng = np.random.default_rng(4)
    X = rng.random((264, 3))
    y = 100.0 * (0.5 + X[:, 0])
    engine.load("short", X, y)
    built = json.dumps({"format": "mlweaving", "batch_size": 256})
    engine.scalar(f"SELECT loom_create_index('sb', 'short', 'y', '{built}')")
    lam = 2.0**-12
    opts = {"index": "sb", "backend": "fpga-sim", "model": "linear", "epochs": 1}
    opts |= {"lr": lam, "fit_intercept": False, "tol": 0, "progress": False}
    engine.scalar(f"SELECT loom_train('sb1', NULL, 'y', '{json.dumps(opts)}')")
    unit = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))  # the index's min–max map
    expected = unit @ (lam / 256 * (y @ unit))
    got = np.asarray(
        [
            r[0]
            for r in engine.rows(
                f"SELECT loom_predict('sb1', {engine.array(['x0', 'x1', 'x2'])}) FROM short"
            )
        ]
    )
    assert np.allclose(got, expected, rtol=0.01), np.abs(got / expected - 1).max()
