"""The fpga-sim backend: bit-exact arithmetic, the performance model, and SQL on both engines.

Fixed-point tolerance: each bit-serial product truncates s terms, each by less than one unit
of the 27-fraction-bit accumulator, so a dot product is off by less than M·s·2⁻²⁷ and the model
drifts from float SGD by a small multiple of λ·that per update; 1e-4 on weights of order 0.1
bounds it for these jobs with a wide margin.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.accel.fpga_sim import Engine, Job, epoch_bytes, reference_sgd, simulate
from loomdb.accel.fpga_sim.engine import least_squares_loss, to_float
from loomdb.codecs import weave
from loomdb.errors import LoomOptionError

TOLERANCE = 1e-4


def data(n=1024, m=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, m))
    y = (X[:, :5].sum(axis=1) > 2.5).astype(float)
    return weave.quantize(X, *weave.column_ranges(X)), y


def train(U, y, job, epochs=1):
    model = np.zeros(U.shape[1], dtype=np.int64)
    for _ in range(epochs):
        model = Engine(job).run_epoch(weave.truncate(U, job.bits), y, model)
    return to_float(model)


def test_sync_at_32_bits_matches_float_minibatch_sgd():
    U, y = data()
    job = Job(samples=len(y), dimension=U.shape[1], bits=32, mini_batch=16, step_shift=6)
    fixed = train(U, y, job, epochs=3)
    ref = reference_sgd(weave.dequantize(U), y, job, epochs=3)
    assert np.abs(fixed - ref).max() < TOLERANCE
    assert np.abs(ref).max() > 0.05  # the comparison is not between two near-zero models


def test_async_reads_a_model_at_most_8_samples_stale():
    U, y = data()
    sync = Job(samples=len(y), dimension=U.shape[1], mini_batch=64, step_shift=6)
    asyn = Job(samples=len(y), dimension=U.shape[1], mini_batch=64, step_shift=6, mode="async")
    a, s = train(U, y, asyn), train(U, y, sync)
    assert not np.array_equal(a, s)
    # async = updates every 8 samples with the same step: float SGD with batches of 8, λ/64
    vals, lam = weave.dequantize(U), 2.0**-6 / 64
    w = np.zeros(U.shape[1])
    for start in range(0, len(y), 8):
        X, b = vals[start : start + 8], y[start : start + 8]
        w -= lam * ((X @ w - b) @ X)
    assert np.abs(a - w).max() < TOLERANCE


def test_chaining_changes_time_not_results():
    U, y = data(n=256)
    on = Job(samples=256, dimension=U.shape[1], bits=8, mini_batch=8, chaining=True)
    off = Job(samples=256, dimension=U.shape[1], bits=8, mini_batch=8, chaining=False)
    assert np.array_equal(train(U, y, on), train(U, y, off))
    assert simulate(on)["compute_cycles"] < simulate(off)["compute_cycles"]


def test_low_precision_converges_close_to_32_bits():
    U, y = data(n=2048)
    vals = weave.dequantize(U)
    loss = {}
    for s in (1, 4, 32):
        job = Job(samples=len(y), dimension=U.shape[1], bits=s, mini_batch=16, step_shift=6)
        loss[s] = least_squares_loss(vals, y, train(U, y, job, epochs=10))
    assert abs(loss[4] - loss[32]) < 0.1 * loss[32] and loss[1] > 1.5 * loss[32]


@pytest.mark.parametrize("s", [1, 2, 3, 4, 8, 16, 32])
@pytest.mark.parametrize(("n", "m"), [(40_000, 2_000), (10_000, 784), (16_281, 123)])
def test_bytes_per_epoch_are_eq4(n, m, s):
    job = Job(samples=n, dimension=m, bits=s)
    assert epoch_bytes(job) == weave.epoch_bytes(n, m, s)
    assert simulate(job)["bytes_per_epoch"] * 8 == -(-n // 8) * 8 * (s * -(-m // 64) * 64 + 32)


def epsilon(s):
    return simulate(Job(samples=40_000, dimension=2_000, bits=s))


def test_epsilon_shaped_job_takes_about_2_06_ms_per_epoch():
    report = epsilon(3)
    assert report["bits_per_sample"] == 6176 and report["bytes_per_epoch"] == 30_880_000
    assert report["seconds_per_epoch"] == pytest.approx(2.06e-3, rel=0.10)


def test_memory_bound_at_every_precision_with_defaults():
    assert all(epsilon(s)["bound"] == "memory" for s in range(1, 33))


def test_time_is_proportional_to_s_above_4_and_sublinear_below():
    t = {s: epsilon(s)["seconds_per_epoch"] for s in (1, 2, 4, 8, 16, 32)}
    for lo, hi in ((4, 8), (8, 16), (16, 32)):
        assert t[hi] / t[lo] == pytest.approx(2.0, rel=0.10)
    assert t[2] / t[1] < 2.0 and t[32] / t[1] < 32


def test_job_validation():
    with pytest.raises(LoomOptionError, match="dimension"):
        Job(samples=10, dimension=40_000)
    with pytest.raises(LoomOptionError, match="mini_batch"):
        Job(samples=10, dimension=10, mini_batch=24)
    with pytest.raises(LoomOptionError, match="bits"):
        Job(samples=10, dimension=10, bits=0)


# ---- through SQL, on both engines ----


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
            "progress": False,
        }
        name = backend.replace("-", "_")
        woven.scalar(f"SELECT loom_train('{name}', NULL, 'y', '{json.dumps(opts)}')")
    rows = dict(woven.rows("SELECT backend, coefficients FROM loom.models"))
    cpu, sim = (np.asarray(json.loads(rows[b])) for b in ("cpu", "fpga-sim"))
    assert np.abs(cpu - sim).max() < TOLERANCE
    info = json.loads(woven.scalar("SELECT loom_model_info('fpga_sim')"))
    assert len(info["report"]["epochs"]) == 3
    assert info["history"][0]["simulated_seconds"] > 0
    with pytest.raises(woven.errors, match="least squares"):
        woven.scalar(
            "SELECT loom_train('x', NULL, 'y', "
            '\'{"index": "sw", "backend": "fpga-sim", "model": "logistic"}\')'
        )
    with pytest.raises(woven.errors, match="cannot train on the dense format"):
        woven.scalar("SELECT loom_train('x', 'sim_t', 'y', '{\"backend\": \"fpga-sim\"}')")
