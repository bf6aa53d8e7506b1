"""The gpu backend: skipped with its reason without a GPU; parity with cpu with one (the same code
on numpy, everywhere: tests/unit/test_device_steps.py)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from loomdb.accel import registry
from loomdb.accel.cpu import CpuBackend
from loomdb.accel.gpu import GpuBackend
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch
from support.arrays import ArraySource, KeptSource, glm_data, problem

usable, why = GpuBackend().available()
needs_gpu = pytest.mark.skipif(not usable, reason=f"gpu backend unavailable: {why}")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="no CUDA compiler (nvcc) on this machine")
def test_the_step_kernels_compile(tmp_path):
    """The kernels' CUDA C compiles wherever a CUDA compiler is, GPU or not (CuPy compiles the
    same source at a GPU's first train)."""
    from loomdb.accel import cuda_kernels

    (tmp_path / "step.cu").write_text(cuda_kernels.source())
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "step.cu"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_listed_with_its_reason():
    entry = next(b for b in registry.describe() if b["name"] == "gpu")
    assert entry["available"] == usable
    assert usable or entry["reason"]


@needs_gpu
def test_products_match_cpu():
    rng = np.random.default_rng(0)
    batch = Batch(rng.normal(size=(100, 37)), np.zeros(100))
    W, R = rng.normal(size=(37, 3)), rng.normal(size=(100, 3))
    gpu, cpu = GpuBackend(), CpuBackend()
    assert np.allclose(gpu.margins(batch, W), cpu.margins(batch, W), rtol=1e-12, atol=1e-12)
    assert np.allclose(gpu.gradient(batch, R), cpu.gradient(batch, R), rtol=1e-12, atol=1e-12)


@needs_gpu
@pytest.mark.parametrize("kind", ["linear", "logistic", "svm"])
def test_training_matches_cpu(kind):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(512, 20))
    y = (X @ rng.normal(size=20) > 0).astype(float) if kind != "linear" else X[:, 0] * 2.0
    classes = [0.0, 1.0] if kind != "linear" else []
    task = problem(X, classes, y=y)
    cfg = TrainConfig(kind=kind, epochs=5, lr=0.05)
    on_gpu, _ = fit(ArraySource(X, y, 64), task, cfg, GpuBackend())
    on_cpu, _ = fit(ArraySource(X, y, 64), task, cfg, CpuBackend())
    # parity tolerance: float64 on both; only summation order differs
    assert np.allclose(on_gpu.W, on_cpu.W, rtol=1e-9, atol=1e-9)
    assert np.allclose(on_gpu.b, on_cpu.b, rtol=1e-9, atol=1e-9)


def _step_inputs(rng, n: int, m: int, K: int, momentum: bool):
    from loomdb.accel.device_arrays import Model

    X, T = rng.normal(size=(n, m)), (rng.random((n, K)) > 0.5) * 1.0
    sw = rng.uniform(0.5, 2.0, n)
    state = [rng.normal(size=s) for s in ((m, K), (m, K), (K,), (K,))] if momentum else [None] * 4
    vW, sW, vb, sb = state
    model = Model(rng.normal(size=(m, K)), rng.normal(size=K), vW, sW, vb, sb,
                  rng.uniform(0.5, 2.0, m), rng.normal(size=m))  # fmt: skip
    return X, T, sw, model


@needs_gpu
@pytest.mark.parametrize("kind", ["linear", "logistic", "svm"])
@pytest.mark.parametrize(
    "n,m,K,momentum,intercept,l1",
    [(1000, 300, 1, True, True, 0.0), (130, 33, 3, False, True, 1e-2),
     (64, 4097, 2, True, False, 1e-3), (1, 1, 1, False, False, 0.0)],
)  # fmt: skip
def test_the_cuda_step_is_numpys_step(kind, n, m, K, momentum, intercept, l1):
    """``cuda_kernels``' three launches against ``NumpyDevice.step`` on the same inputs: rows
    and columns around the kernels' block and slice sizes, one class and several, both
    optimisers, with and without an intercept and an L1 step."""
    import dataclasses

    from loomdb.accel.device_arrays import CupyDevice, NumpyDevice, Step

    rng = np.random.default_rng(n + m + K)
    X, T, sw, model = _step_inputs(rng, n, m, K, momentum)
    step = Step(kind, float(n + 7), 1e-3, 0.05, 0.4 if momentum else 0.0, momentum, intercept, l1)
    device = CupyDevice()
    with device.computing():
        on_gpu = dataclasses.replace(
            model, **{f.name: None if (a := getattr(model, f.name)) is None else device.upload(a)
                      for f in dataclasses.fields(model)}
        )  # fmt: skip
        loss = device.xp.full(n, np.nan)
        device.step(*(device.upload(a) for a in (X, T, sw)), on_gpu, step, loss)
        got = {f.name: device.host(getattr(on_gpu, f.name)) for f in dataclasses.fields(model)
               if getattr(model, f.name) is not None}  # fmt: skip
        got_loss = device.host(loss)
        device.synchronize()
    want_loss = np.full(n, np.nan)
    NumpyDevice().step(X, T, sw, model, step, want_loss)
    assert np.allclose(got_loss, want_loss, rtol=1e-12, atol=1e-12)
    for name, value in got.items():
        assert np.allclose(value, getattr(model, name), rtol=1e-11, atol=1e-13), name


@needs_gpu
@pytest.mark.parametrize("payload", ["dense", "toc", "mlweaving"])
def test_payloads_decode_on_the_gpu_to_toarray(payload):
    from loomdb.accel import device_decode
    from loomdb.accel.device_arrays import CupyDevice

    X, y, _ = glm_data(2, rows=200, features=70)
    device = CupyDevice()
    for batch in KeptSource(X, y, batch_size=64, payload=payload).batches:
        with device.computing():
            out = device.host(device_decode.dense(device, batch.X))
            device.synchronize()
        host = batch.X if payload == "dense" else batch.X.toarray()
        assert np.array_equal(out, host)


@needs_gpu
@pytest.mark.parametrize("payload", ["dense", "toc", "mlweaving"])
@pytest.mark.parametrize("optimizer", ["sgd", "nesterov", "adam"])
def test_device_steps_train_what_the_cpu_trains(payload, optimizer):
    X, y, labels = glm_data(3)
    cfg = TrainConfig(kind="logistic", epochs=4, optimizer=optimizer, lr=0.02, l1=1e-4)
    task = problem(X, labels, "zscore", y)
    on_gpu, h1 = fit(KeptSource(X, y, payload=payload), task, cfg, GpuBackend())
    on_cpu, h2 = fit(KeptSource(X, y, payload=payload), task, cfg, CpuBackend())
    assert np.allclose(on_gpu.W, on_cpu.W, rtol=1e-9, atol=1e-12)
    assert np.allclose(on_gpu.b, on_cpu.b, rtol=1e-9, atol=1e-12)
    assert np.allclose([e["loss"] for e in h1], [e["loss"] for e in h2], rtol=1e-10)


@needs_gpu
def test_sql_training_on_gpu_matches_cpu():
    import json

    import loomdb
    from loomdb.bench.tables import load_duckdb

    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 50))
    y = (X @ rng.normal(size=50) > 0).astype(float)
    con = loomdb.connect()
    load_duckdb(con.duckdb, "t", X, y)
    for backend in ("cpu", "gpu"):
        con.execute(
            f"SELECT loom_train('m_{backend}', 't', 'y', "
            f'\'{{"backend": "{backend}", "epochs": 3}}\')'
        )
    rows = dict(con.execute("SELECT backend, coefficients FROM loom.models").fetchall())
    assert set(rows) == {"cpu", "gpu"}
    assert np.allclose(json.loads(rows["gpu"]), json.loads(rows["cpu"]), rtol=1e-9, atol=1e-9)
    con.close()


@needs_gpu
@pytest.mark.parametrize("payload", ["dense", "toc", "mlweaving"])
def test_an_adopted_minibatch_lives_on_the_gpu_as_long_as_its_stand_in(payload):
    """``DeviceCache.adopt`` (an epoch too large for ``cache_mb``, ``store/epochs``): the
    stand-in's matrix is the payload's, and the device memory leaves with the stand-in."""
    import gc

    from loomdb.accel.device_arrays import CupyDevice
    from loomdb.accel.device_cache import DeviceCache, Resident

    X, y, _ = glm_data(2, rows=200, features=70)
    device = CupyDevice()
    cache = DeviceCache(device)
    batches = KeptSource(X, y, batch_size=64, payload=payload).batches
    adopted = [cache.adopt(b) for b in batches]
    assert all(a is not None and isinstance(a.X, Resident) for a in adopted)
    for batch, resident in zip(batches, adopted):
        with device.computing():
            out = device.host(cache.matrix(resident.X))
            device.synchronize()
        host = batch.X if payload == "dense" else batch.X.toarray()
        assert np.array_equal(out, host)
    assert cache.held == sum(8 * a.X.shape[0] * a.X.shape[1] for a in adopted)
    del adopted, resident
    gc.collect()
    assert cache.held == 0 and not cache.entries
