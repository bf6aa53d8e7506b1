"""The fpga-sim engine: bit-exact datapath, float agreement, timing model, convergence.

Bit-exactness is checked against ``_algorithm_1``, a literal, slow transcription of the
engine's arithmetic (Python integers, one bit-serial term at a time).  Agreement with float
mini-batch SGD at s = 32 uses the bound ``fpga_sim.engine.tolerance`` derives (truncation per
bit-serial term, per shift, per update, accumulated over all group updates); SQL-level tests
are in ``test_fpga_sim_sql.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.accel.fpga_sim import (
    Engine,
    Job,
    closed_form,
    epoch_bytes,
    loss,
    reference_sgd,
    simulate,
    to_float,
    tolerance,
    train,
)
from loomdb.accel.fpga_sim.fixed_point import dequantize
from loomdb.accel.fpga_sim.perf import read_versions
from loomdb.codecs import weave
from loomdb.errors import LoomDataError, LoomOptionError


def quantize(X: np.ndarray) -> np.ndarray:
    lo, hi = X.min(axis=0), X.max(axis=0)
    spread = np.where(hi > lo, hi - lo, 1.0)
    return np.floor(np.clip((X - lo) / spread, 0.0, 1.0) * (2**32 - 1)).astype(np.uint32)


def data(n=1024, m=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, m))
    return quantize(X), (X[:, :5].sum(axis=1) > 2.5).astype(float)


def _wrap(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half


def _algorithm_1(U, y, job, versions, model):
    """The engine's arithmetic written out literally (slow): returns the final working model."""
    s, m, per_batch = job.bits, job.dimension, job.mini_batch // 8
    shift = job.step_shift + job.batch_shift
    one = 1 << 27
    work = [int(w) for w in model]
    archs = [list(work)]
    for g in range(-(-len(y) // 8)):
        x = [archs[versions[g, k // 64]][k] for k in range(m)]  # versions per 64-weight chunk
        grad = [0] * m
        for r in range(8 * g, min(8 * g + 8, len(y))):
            a = [int(U[r, k]) >> (32 - s) for k in range(m)]
            dot = 0
            for k in range(m):
                for i in range(1, s + 1):
                    if (a[k] >> (s - i)) & 1:
                        dot += (x[k] << 4) >> i
            dot = _wrap(dot, 36)
            t = 1 if y[r] > 0.5 else -1
            if job.loss == "linear":
                diff = _wrap(dot - (round(y[r] * 2**23) << 4), 36)
            elif job.loss == "logistic":
                diff = int(np.floor(one / (1 + np.exp(-dot / one)))) - (one if t > 0 else 0)
            else:
                diff = -t * one if t * dot < one else 0
            scale = diff >> shift
            for k in range(m):
                for i in range(1, s + 1):
                    if (a[k] >> (s - i)) & 1:
                        grad[k] += scale >> i
        work = [_wrap(w - (_wrap(gk, 36) >> 4), 32) for w, gk in zip(work, grad)]
        if (g + 1) % per_batch == 0 or g == -(-len(y) // 8) - 1:
            archs.append(list(work))
    return np.array(work)


@pytest.mark.parametrize(
    ("s", "loss_kind", "mode", "m", "b"),
    [
        (1, "linear", "sync", 70, 16),
        (3, "linear", "async", 70, 16),  # compute-bound: reads up to 2 batches behind
        (4, "linear", "async", 200, 8),  # torn reads: old first chunks, new later ones
        (8, "logistic", "sync", 70, 16),
        (5, "svm", "sync", 70, 16),
        (32, "linear", "sync", 70, 16),
        (32, "linear", "async", 70, 16),
    ],
)
def test_engine_is_bit_exact_to_algorithm_1(s, loss_kind, mode, m, b):
    # N not a multiple of 8, M not a multiple of 64; a model that is not zero to start with
    U, y = data(n=45, m=m, seed=s)
    job = Job(45, m, bits=s, mini_batch=b, step_shift=2, loss=loss_kind, mode=mode)
    engine = Engine(job)
    first = engine.run_epoch(U, y, np.zeros(m, np.int32))
    assert np.abs(first).max() > 0
    versions, lag = read_versions(job)
    if mode == "async":
        assert lag >= 1  # really reads stale models
    if m == 200:
        assert (versions.min(axis=1) != versions.max(axis=1)).any()
    ours = engine.run_epoch(U, y, first)
    np.testing.assert_array_equal(ours, _algorithm_1(U, y, job, versions, first))


def test_sync_at_32_bits_matches_float_minibatch_sgd_within_the_derived_bound():
    U, y = data()
    job = Job(len(y), U.shape[1], bits=32, mini_batch=16, step_shift=6, epochs=3)
    fixed, _ = train(U, y, job)
    ref = reference_sgd(dequantize(U), y, job)
    assert np.abs(ref).max() > 0.05  # not two near-zero models
    assert np.abs(fixed - ref).max() <= tolerance(job)
    assert tolerance(job) < 0.1 * np.abs(ref).max()  # the bound is tight enough to mean something


def test_low_precision_matches_float_sgd_on_the_truncated_data():
    U, y = data()
    job = Job(len(y), U.shape[1], bits=3, mini_batch=16, step_shift=6, epochs=2)
    fixed, _ = train(U, y, job)
    assert np.abs(fixed - reference_sgd(dequantize(U, 3), y, job)).max() <= tolerance(job)
    assert np.abs(fixed - reference_sgd(dequantize(U), y, job)).max() > tolerance(job)


def test_chaining_changes_time_not_results():
    U, y = data(n=256)
    for mode in ("sync", "async"):
        on = Job(256, U.shape[1], bits=8, mini_batch=8, mode=mode, chaining=True)
        off = Job(256, U.shape[1], bits=8, mini_batch=8, mode=mode, chaining=False)
        zero = np.zeros(U.shape[1], np.int32)
        assert np.array_equal(Engine(on).run_epoch(U, y, zero), Engine(off).run_epoch(U, y, zero))
    epsilon_b8 = dict(samples=40_000, dimension=2_000, mini_batch=8)
    on_t = simulate(Job(**epsilon_b8, bits=2))["seconds_per_epoch"]
    off_t = simulate(Job(**epsilon_b8, bits=2, chaining=False))["seconds_per_epoch"]
    assert 1.2 < off_t / on_t < 1.6  # the paper: up to 1.4x at B = 8 (Fig. 9a)


def test_async_reads_the_model_the_schedule_says_was_written():
    job = Job(1024, 100, bits=8, mini_batch=16, step_shift=6, mode="async")
    versions, lag = read_versions(job)
    behind = (np.arange(128) // 2)[:, None] - versions
    assert behind.min() == 0 and lag == behind.max() == 1  # one update in flight at most
    slow = Job(1024, 100, bits=8, mini_batch=16, step_shift=6, mode="async", bandwidth_gbs=1e-3)
    assert read_versions(slow)[1] == 0  # slow memory: every update lands before the next read
    U, y = data()
    sync = Engine(Job(1024, 100, bits=8, mini_batch=16, step_shift=6))
    zero = np.zeros(100, np.int32)
    assert not np.array_equal(Engine(job).run_epoch(U, y, zero), sync.run_epoch(U, y, zero))
    assert np.array_equal(Engine(slow).run_epoch(U, y, zero), sync.run_epoch(U, y, zero))
    # sync ≈ async in time at B = 16, s = 8 (Fig. 10)
    shape = dict(samples=40_000, dimension=2_000, mini_batch=16, bits=8)
    sync_t = simulate(Job(**shape))["seconds_per_epoch"]
    assert simulate(Job(**shape, mode="async"))["seconds_per_epoch"] == pytest.approx(sync_t, 0.02)


@pytest.mark.parametrize("s", [1, 2, 3, 4, 8, 16, 32])
@pytest.mark.parametrize(("n", "m"), [(40_000, 2_000), (10_000, 784), (16_281, 123), (5, 1)])
def test_bytes_per_epoch_are_eq4(n, m, s):
    expected_bits = -(-n // 8) * 8 * (s * -(-m // 64) * 64 + 32)
    assert epoch_bytes(Job(n, m, bits=s)) * 8 == expected_bits
    assert simulate(Job(n, m, bits=s))["bytes_per_epoch"] * 8 == expected_bits


def epsilon(s, **kw):
    return simulate(Job(samples=40_000, dimension=2_000, bits=s, **kw))


def test_epsilon_shaped_job_takes_about_2_06_ms_per_epoch():
    report = epsilon(3)
    assert report["bits_per_sample"] == 6176 and report["bytes_per_epoch"] == 30_880_000
    assert report["seconds_per_epoch"] == pytest.approx(2.06e-3, rel=0.10)
    assert report["gb_per_second"] == pytest.approx(15.0, rel=0.01)
    json.dumps(report)  # serialisable as it is


def test_memory_bound_at_every_precision_with_defaults():
    assert all(epsilon(s)["bound"] == "memory" for s in range(1, 33))
    assert epsilon(1, mini_batch=8)["bound"] == "compute"  # latency-bound: small B, s = 1


def test_time_is_proportional_to_s_above_4_and_sublinear_below():
    t = {s: epsilon(s)["seconds_per_epoch"] for s in (1, 2, 4, 8, 16, 32)}
    for lo, hi in ((4, 8), (8, 16), (16, 32)):
        assert t[hi] / t[lo] == pytest.approx(2.0, rel=0.10)
    assert t[2] / t[1] < 2.0  # memory-bound: only the 32-bit label makes it sub-linear
    small = {s: epsilon(s, mini_batch=8)["seconds_per_epoch"] for s in (1, 2)}
    assert small[2] / small[1] < 1.8  # B = 8: the pipeline latency dominates at s = 1
    a9a = {s: simulate(Job(16_281, 123, bits=s))["seconds_per_epoch"] for s in (1, 2, 4, 8)}
    assert a9a[2] / a9a[1] < 1.5 and a9a[8] / a9a[4] == pytest.approx(2.0, rel=0.10)


@pytest.mark.parametrize("chaining", [True, False])
@pytest.mark.parametrize(("m", "s", "b"), [(2000, 3, 64), (2000, 1, 8), (123, 1, 8), (784, 32, 8)])
def test_event_schedule_agrees_with_the_closed_form(m, s, b, chaining):
    job = Job(40_000, m, bits=s, mini_batch=b, chaining=chaining)
    assert simulate(job)["seconds_per_epoch"] == pytest.approx(closed_form(job)["epoch_s"], 0.01)


def test_least_squares_on_01_labels_converges_and_4_bits_is_close_to_32():
    U, y = data(n=2048)
    losses = {}
    for s in (1, 4, 32):
        job = Job(len(y), U.shape[1], bits=s, mini_batch=16, step_shift=6, epochs=10)
        _, reports = train(U, y, job)
        losses[s] = [r["loss"] for r in reports]
        assert losses[s][-1] < losses[s][0]
    assert losses[32][-1] < 0.6 * losses[32][0]
    assert abs(losses[4][-1] - losses[32][-1]) < 0.1 * losses[32][-1]
    assert losses[1][-1] > 1.5 * losses[32][-1]


@pytest.mark.parametrize("kind", ["logistic", "svm"])
def test_extension_losses_decrease(kind):
    U, y = data(n=2048)
    job = Job(len(y), U.shape[1], bits=8, mini_batch=16, step_shift=4, epochs=5, loss=kind)
    w, reports = train(U, y, job)
    assert reports[-1]["loss"] < 0.8 * reports[0]["loss"]
    assert reports[0]["loss"] < loss(U, y, np.zeros(U.shape[1]), kind)


def test_train_reports_and_precision_schedule():
    U, y = data(n=256)
    job = Job(256, U.shape[1], mini_batch=16, step_shift=6, epochs=3)
    w, reports = train(U, y, job, precisions=[2, 3])
    assert [r["bits"] for r in reports] == [2, 3, 3]
    # the performance model's bytes, against the lines the woven layout really holds: s of
    # every 32 lines of 64 bytes, plus a 4-byte label per (padded) sample
    lines = weave.hardware_lines(U).shape[0]
    assert reports[0]["simulated_bytes"] == lines // 32 * 2 * 64 + 256 * 4
    assert reports[0]["simulated_seconds"] < reports[1]["simulated_seconds"]
    json.dumps(reports)
    assert loss(U, y, w) == pytest.approx(reports[-1]["loss"], rel=1e-6)
    w2, _ = train(U, y, job, init=w, precisions=[3])  # continues from a float model
    assert np.abs(w2 - w).max() < np.abs(w).max()
    assert to_float(np.array([1 << 23])) == 1.0


def test_job_validation():
    with pytest.raises(LoomOptionError, match="dimension"):
        Job(samples=10, dimension=32 * 1024 + 1)
    Job(samples=10, dimension=32 * 1024)
    with pytest.raises(LoomOptionError, match="mini_batch"):
        Job(samples=10, dimension=10, mini_batch=24)
    with pytest.raises(LoomOptionError, match="bits"):
        Job(samples=10, dimension=10, bits=33)
    with pytest.raises(LoomOptionError, match="loss"):
        Job(samples=10, dimension=10, loss="huber")
    with pytest.raises(LoomOptionError, match="mode"):
        Job(samples=10, dimension=10, mode="hogwild")


def test_data_validation():
    U, y = data(n=16, m=10)
    engine = Engine(Job(16, 10))
    zero = np.zeros(10, np.int32)
    with pytest.raises(LoomDataError, match="uint32"):
        engine.run_epoch(U.astype(np.int64), y, zero)
    with pytest.raises(LoomDataError, match=r"\(samples, 10\)"):
        engine.run_epoch(U[:, :5], y, zero)
    with pytest.raises(LoomDataError, match="labels"):
        engine.run_epoch(U, y[:3], zero)
    with pytest.raises(LoomDataError, match="outside"):
        engine.run_epoch(U, y * 1000, zero)
    with pytest.raises(LoomDataError, match="model"):
        engine.run_epoch(U, y, np.zeros(10))


def test_a_wrapped_model_register_is_counted():
    # labels near 140 need an intercept weight near 280 on the constant ½ feature: beyond Q8.23
    n = 256
    U = np.full((n, 1), np.uint32(1 << 31), dtype=np.uint32)
    job = Job(n, 1, bits=32, mini_batch=8, step_shift=1)
    engine = Engine(job)
    model = np.zeros(1, np.int32)
    for _ in range(20):
        model = engine.run_epoch(U, np.full(n, 100.0), model)
    assert engine.wraps == 0  # 100: weight 200 fits
    for _ in range(20):
        model = engine.run_epoch(U, np.full(n, 140.0), model)
        if engine.wraps:
            break
    assert engine.wraps > 0
