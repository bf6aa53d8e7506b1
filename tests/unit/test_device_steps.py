"""The gpu backend's code (accel/device_*) run on numpy in place of CuPy: the decodes give
``toarray()``'s numbers, the device steps train what the cpu backend trains, the cache keeps a
minibatch once and lets it go with its payload.  The GPU itself: tests/unit/test_gpu_backend.py."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from loomdb.accel import device_decode
from loomdb.accel.cpu import CpuBackend
from loomdb.accel.device_arrays import NumpyDevice
from loomdb.accel.device_cache import DeviceCache
from loomdb.accel.gpu import GpuBackend
from loomdb.codecs import weave
from loomdb.codecs.toc import TocMatrix, encode
from loomdb.errors import LoomFormatError
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch
from support.arrays import KeptSource, assert_same_training, glm_data, problem

PAYLOADS = ["dense", "toc", "mlweaving"]


def _rows(seed: int, rows: int, cols: int) -> np.ndarray:
    """Rows with zeros, repeats (long TOC sequences), −0.0 and one empty row."""
    rng = np.random.default_rng(seed)
    X = rng.choice([0.0, 0.0, 1.0, -2.5, 3.0, -0.0], size=(rows, cols))
    X[rows // 2] = 0.0
    X[:, 0] = rng.normal(size=rows)  # one column of distinct values
    return X


@pytest.mark.parametrize("variant", ["sparse", "sparse_logical", "full"])
@pytest.mark.parametrize("shape", [(1, 1), (37, 5), (200, 70)])
def test_toc_decodes_on_the_device_to_toarray_exactly(variant, shape):
    X = _rows(sum(shape), *shape)
    toc = TocMatrix.from_bytes(encode(X, variant=variant))
    out = device_decode.dense(NumpyDevice(), toc)
    assert out.flags.c_contiguous and out.dtype == np.float64
    assert np.array_equal(out.view(np.uint64), toc.toarray().view(np.uint64))  # −0.0 too


@pytest.mark.parametrize("s", [1, 4, 13, 32])
@pytest.mark.parametrize("shape", [(3, 2), (17, 64), (40, 130)])
def test_woven_planes_decode_on_the_device_to_toarray_exactly(s, shape):
    X = np.random.default_rng(s).normal(size=shape)
    X[0] = 0.0
    planes = weave.weave_block(weave.quantize(X, *weave.column_ranges(X)))
    woven = weave.WovenMatrix([bytes(p) for p in planes], *shape, s)
    out = device_decode.dense(NumpyDevice(), woven)
    assert out.flags.c_contiguous
    assert np.array_equal(out, weave.WovenMatrix(planes, *shape, s).toarray())


def _fit(backend, payload, kind, classes, cfg, source=None):
    X, y, labels = glm_data(classes)
    source = source or KeptSource(X, y, payload=payload)
    return fit(source, problem(X, labels, "zscore", y), cfg, backend)


CASES = [
    ("logistic", 2, {}),
    ("logistic", 3, {"l1": 1e-3}),
    ("svm", 2, {"fit_intercept": False}),
    ("linear", 0, {"l2": 1e-2}),
]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("optimizer", ["sgd", "nesterov", "adam"])
@pytest.mark.parametrize("kind,classes,extra", CASES)
def test_the_device_trains_what_the_cpu_trains(
    monkeypatch, payload, optimizer, kind, classes, extra
):
    cfg = TrainConfig(kind=kind, epochs=5, optimizer=optimizer, lr=0.02, **extra)
    runs = []
    step = GpuBackend.steps
    monkeypatch.setattr(GpuBackend, "steps", lambda self, o: runs.append(o.name) or step(self, o))
    on_device = _fit(GpuBackend(NumpyDevice()), payload, kind, classes, cfg)
    on_cpu = _fit(CpuBackend(), payload, kind, classes, cfg)
    assert runs == [optimizer] * 5  # the device's steps are asked for every epoch
    # the products and sums add in another order (the device's against numba's or BLAS's)
    assert_same_training(on_device, on_cpu, rtol=1e-9, atol=1e-12, loss_rtol=1e-10)


def test_sgd_and_nesterov_step_on_the_device_and_adam_per_minibatch(monkeypatch):
    """Every minibatch of a served optimiser goes through the device's steps; Adam's through
    the two products."""
    stepped, products = [], []
    backend = GpuBackend(NumpyDevice())
    from loomdb.accel import device_steps

    step = device_steps.DeviceSteps.step
    monkeypatch.setattr(
        device_steps.DeviceSteps,
        "step",
        lambda s, k, run, *a: stepped.append(len(run)) or step(s, k, run, *a),
    )
    product = GpuBackend._product
    monkeypatch.setattr(
        GpuBackend, "_product", lambda s, *a, **k: products.append(1) or product(s, *a, **k)
    )
    for optimizer in ("sgd", "nesterov"):
        _fit(backend, "toc", "logistic", 2, TrainConfig(epochs=2, optimizer=optimizer))
    assert sum(stepped) == 2 * 2 * 10 and not products
    _fit(backend, "toc", "logistic", 2, TrainConfig(epochs=2, optimizer="adam"))
    assert len(products) == 2 * 2 * 10  # margins and gradient of each minibatch


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_kept_minibatch_is_decoded_once_and_freed_with_its_payload(monkeypatch, payload):
    decoded = []
    dense = device_decode.dense
    monkeypatch.setattr(device_decode, "dense", lambda d, X: decoded.append(id(X)) or dense(d, X))
    device = NumpyDevice()
    backend = GpuBackend(device)
    X, y, labels = glm_data(2)
    source = KeptSource(X, y, payload=payload)
    _fit(backend, payload, "logistic", 2, TrainConfig(epochs=3, optimizer="sgd"), source)
    assert len(decoded) == 10 == len(set(decoded))  # 10 minibatches, each once in 3 epochs
    cache = backend._shared()[1]
    assert len(cache.entries) == 10 and cache.held > 0
    del source
    gc.collect()
    assert not cache.entries and cache.held == 0


def test_without_room_every_minibatch_is_decoded_every_epoch_and_trains_the_same(monkeypatch):
    decoded = []
    dense = device_decode.dense
    monkeypatch.setattr(device_decode, "dense", lambda d, X: decoded.append(id(X)) or dense(d, X))
    cfg = TrainConfig(epochs=3, optimizer="nesterov", lr=0.05)
    roomy, _ = _fit(GpuBackend(NumpyDevice()), "toc", "logistic", 2, cfg)
    assert len(decoded) == 10
    backend = GpuBackend(NumpyDevice())
    backend._cache = DeviceCache(backend._device, budget=0)
    cramped, _ = _fit(backend, "toc", "logistic", 2, cfg)
    assert len(decoded) == 10 + 30 and backend._cache.held == 0
    assert np.array_equal(roomy.W, cramped.W) and np.array_equal(roomy.b, cramped.b)


def test_a_label_outside_the_classes_is_the_cpu_error():
    X, y, labels = glm_data(2)
    y = y.copy()
    y[100] = 7.0
    for payload in PAYLOADS:
        with pytest.raises(LoomFormatError, match="label 7.0 is not one of the classes"):
            fit(
                KeptSource(X, y, payload=payload),
                problem(X, labels, "zscore", y),
                TrainConfig(kind="logistic", epochs=1, optimizer="sgd"),
                GpuBackend(NumpyDevice()),
            )


def test_a_diverging_step_restarts_as_on_the_cpu():
    cfg = TrainConfig(kind="linear", epochs=3, optimizer="sgd", lr=300.0, l2=0.0)
    _, on_device = _fit(GpuBackend(NumpyDevice()), "dense", "linear", 0, cfg)
    _, on_cpu = _fit(CpuBackend(), "dense", "linear", 0, cfg)
    restarts = [e for e in on_device if "restart" in e]
    assert restarts and restarts == [e for e in on_cpu if "restart" in e]


def test_skipped_minibatches_step_one_at_a_time():
    """A minibatch a skip policy thinned (weights) is the per-minibatch path's."""
    from loomdb.accel import device_steps

    thinned = Batch(np.zeros((2, 3)), np.zeros(2), weights=np.ones(2))
    plain = Batch(np.zeros((2, 3)), np.zeros(2))
    grouped = list(device_steps.DeviceSteps(None, None).runs([plain, thinned, plain], 3))
    assert grouped == [(device_steps.DEVICE, [plain]), thinned, (device_steps.DEVICE, [plain])]


def test_bench_gpu_measures_both_backends_or_says_why_not(monkeypatch):
    from loomdb.accel import registry
    from loomdb.bench import gpu as bench
    from loomdb.errors import LoomStateError

    monkeypatch.setattr(bench, "SHAPES", ((300, 70, 64),))
    monkeypatch.setattr(bench, "STREAMED", (60_000, 30, 500))  # toc too beyond cache_mb 1
    monkeypatch.setattr(bench, "CACHE_MB", 1)
    real = registry.get
    on_numpy = GpuBackend(NumpyDevice())
    monkeypatch.setattr(
        registry, "get", lambda name=None: on_numpy if name == "gpu" else real(name)
    )
    table, streamed = bench.run()
    assert [row[2] for row in table.rows] == list(bench.FORMATS)
    assert all(0 <= row[-1] < 1e-9 for row in table.rows)  # the same training on both
    got = {(row[0], row[2]): row for row in streamed.rows}
    assert sorted(got) == [("dense", "cpu"), ("dense", "gpu"), ("toc", "cpu"), ("toc", "gpu")]
    for fmt in ("dense", "toc"):
        assert got[fmt, "cpu"][5] > 0 and got[fmt, "gpu"][5] == 0  # warm epochs read nothing
        assert got[fmt, "gpu"][-1] < 1e-9  # the same training

    def missing(name=None):
        raise LoomStateError("backend 'gpu' is not usable here: no GPU")

    monkeypatch.setattr(registry, "get", missing)
    [table] = bench.run()  # nothing measured, not even the streamed table
    assert (
        not table.rows
        and table.notes[-1] == "not measured: backend 'gpu' is not usable here: no GPU"
    )


def test_a_payload_without_weak_references_is_used_but_never_kept():
    class Rows:  # a payload whose freeing the cache cannot see
        __slots__ = ("X",)

        def __init__(self, X):
            self.X = X

        def toarray(self):
            return self.X

    cache = DeviceCache(NumpyDevice())
    payload = Rows(np.arange(6.0).reshape(2, 3))
    assert np.array_equal(cache.matrix(payload), payload.X)
    assert not cache.entries and cache.held == 0


class _NumpyGpu(GpuBackend):
    """The gpu backend on numpy, registered for the SQL test below."""

    name = "gpu-numpy"

    def __init__(self):
        super().__init__(NumpyDevice())


def test_sql_training_through_the_device_steps_matches_cpu_on_every_format(monkeypatch):
    """loom_train on DuckDB (its own thread) with the gpu backend's code, on numpy: the same
    models as the cpu backend's, and the catalog records the backend used."""
    import json

    import loomdb
    from loomdb.accel import registry
    from loomdb.bench.tables import load_duckdb

    monkeypatch.setitem(registry._registry, "gpu-numpy", _NumpyGpu)
    asked = []
    steps = GpuBackend.steps
    monkeypatch.setattr(_NumpyGpu, "steps", lambda self, o: asked.append(o.name) or steps(self, o))
    rng = np.random.default_rng(2)
    X = np.round(rng.normal(size=(3000, 30)))
    y = (X @ rng.normal(size=30) > 0).astype(float)
    con = loomdb.connect()
    load_duckdb(con.duckdb, "t", X, y)
    runs = {
        "dense": {},
        "toc": {"format": "toc"},
        "weave": {"format": "mlweaving", "precision": "adaptive"},
    }
    for name, extra in runs.items():
        for backend in ("cpu", "gpu-numpy"):
            options = json.dumps({"backend": backend, "epochs": 6, **extra})
            con.execute(f"SELECT loom_train('{name}_{backend[:3]}', 't', 'y', '{options}')")
    models = {n: (b, json.loads(c)) for n, b, c in con.execute(
        "SELECT name, backend, coefficients FROM loom.models"
    ).fetchall()}  # fmt: skip
    con.close()
    assert len(asked) == 3 * 6  # every epoch of the three trains stepped on the device
    for name in runs:
        (cpu, on_cpu), (gpu, on_device) = models[f"{name}_cpu"], models[f"{name}_gpu"]
        assert (cpu, gpu) == ("cpu", "gpu-numpy")
        np.testing.assert_allclose(on_device, on_cpu, rtol=1e-9, atol=1e-12)


def test_sql_epochs_too_large_for_cache_mb_stay_on_the_device(monkeypatch):
    """loom_train on DuckDB with "cache_mb": 1 over 9.6 MB of dense rows (and their toc
    layout): the cpu backend reads every epoch; the gpu backend's code, on numpy, keeps the
    epoch on its device after the first (training and validation batches) and reads nothing
    more, and trains the same model."""
    import json

    import loomdb
    from loomdb.accel import registry
    from loomdb.bench.tables import load_duckdb

    monkeypatch.setitem(registry._registry, "gpu-numpy", _NumpyGpu)
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(40_000, 30)), 1)
    y = (X @ rng.normal(size=30) > 0).astype(float)
    con = loomdb.connect()
    load_duckdb(con.duckdb, "t", X, y)
    decoded: list[int] = []
    dense = device_decode.dense
    monkeypatch.setattr(device_decode, "dense", lambda d, X: decoded.append(1) or dense(d, X))
    read: dict[tuple[str, str], list[int]] = {}
    for fmt in ("dense", "toc"):
        for backend in ("cpu", "gpu-numpy"):
            options = {"backend": backend, "epochs": 3, "cache_mb": 1, "format": fmt}
            options.update(batch_size=500, validation_fraction=0.1, lr=0.1)  # no step estimate
            decoded.clear()
            name = f"{fmt}_{backend[:3]}"
            con.execute(f"SELECT loom_train('{name}', 't', 'y', '{json.dumps(options)}')")
            history = json.loads(con.execute(
                f"SELECT history FROM loom.models WHERE name = '{name}'"
            ).fetchone()[0])  # fmt: skip
            read[fmt, backend] = [h["bytes_read"] for h in history if "epoch" in h]
            assert len(decoded) == (80 if backend == "gpu-numpy" else 0)  # each minibatch once
    models = dict(con.execute("SELECT name, coefficients FROM loom.models").fetchall())
    con.close()
    for fmt in ("dense", "toc"):
        on_cpu, on_device = read[fmt, "cpu"], read[fmt, "gpu-numpy"]
        assert min(on_cpu) > 1 << 20 and on_device[0] == on_cpu[0]  # beyond cache_mb: read
        assert on_device[1:] == [0, 0]  # kept on the device: nothing read
        np.testing.assert_allclose(
            json.loads(models[f"{fmt}_gpu"]), json.loads(models[f"{fmt}_cpu"]), rtol=1e-9
        )


def test_a_tune_over_backends_keeps_device_epochs_to_the_device(monkeypatch):
    """Trials share one layout and its kept epochs whatever their backend: the cpu trials after
    the gpu ones read the layout (they never see the device's stand-ins) and score what the
    gpu trials scored at the same step size."""
    import json

    import loomdb
    from loomdb.accel import registry
    from loomdb.bench.tables import load_duckdb

    monkeypatch.setitem(registry._registry, "gpu-numpy", _NumpyGpu)
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(40_000, 30)), 1)
    y = (X @ rng.normal(size=30) > 0).astype(float)
    con = loomdb.connect(progress=False)
    load_duckdb(con.duckdb, "t", X, y)
    options = {"backend": ["gpu-numpy", "cpu"], "lr": [0.05, 0.1], "epochs": 3, "cache_mb": 1}
    con.execute(f"SELECT loom_tune('m', 't', 'y', '{json.dumps({**options, 'batch_size': 500})}')")
    rows = con.execute("SELECT trial, score, options FROM loom_trials('m') ORDER BY trial")
    trials = [(json.loads(o)["backend"], json.loads(o)["lr"], s) for _, s, o in rows.fetchall()]
    con.close()
    assert [t[:2] for t in trials] == [("gpu-numpy", 0.05), ("gpu-numpy", 0.1)] + [
        ("cpu", 0.05),
        ("cpu", 0.1),
    ]
    for on_device, on_cpu in zip(trials[:2], trials[2:]):
        assert on_device[2] == pytest.approx(on_cpu[2], rel=1e-9)
