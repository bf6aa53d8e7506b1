"""The fused steps (learn/fused_steps.py) over dense and TOC minibatches against the trainer's
per-batch path: the same training in the last bits, whatever the runs, the same errors and
restarts."""

from __future__ import annotations

import numpy as np
import pytest

from loomdb.accel.cpu import CpuBackend
from loomdb.codecs.toc import TocMatrix, encode
from loomdb.errors import LoomFormatError
from loomdb.learn import fused_steps
from loomdb.learn.optimizers import OPTIMIZERS
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch
from support.arrays import KeptSource, assert_same_training, glm_data, problem


def _fit(X, y, classes, cfg, monkeypatch, fused=True, run=None, weights=None, payload="dense"):
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(fused_steps, "serves", lambda backend, optimizer: False)
        if run is not None:
            patch.setattr(fused_steps, "RUN", run)
        prob = problem(X, classes, "zscore", y)
        prob.class_weights = weights
        return fit(KeptSource(X, y, payload=payload), prob, cfg, CpuBackend())


CASES = [
    ("logistic", 2, {}),
    ("logistic", 3, {"l1": 1e-3}),
    ("svm", 2, {"fit_intercept": False}),
    ("linear", 0, {"l2": 1e-2}),
]


@pytest.mark.parametrize("payload", ["dense", "toc", "mlweaving"])
@pytest.mark.parametrize("optimizer", ["sgd", "nesterov"])
@pytest.mark.parametrize("kind,classes,extra", CASES)
def test_fused_steps_train_what_the_per_batch_path_trains(
    monkeypatch, payload, optimizer, kind, classes, extra
):
    X, y, labels = glm_data(classes)
    cfg = TrainConfig(kind=kind, epochs=5, optimizer=optimizer, lr=0.02, **extra)
    calls = []
    step = fused_steps.step
    monkeypatch.setattr(
        fused_steps, "step", lambda kind, run, *a: calls.append(len(run)) or step(kind, run, *a)
    )
    fused = _fit(X, y, labels, cfg, monkeypatch, payload=payload)
    assert sum(calls) == 5 * 10  # every minibatch of every epoch stepped here
    per_batch = _fit(X, y, labels, cfg, monkeypatch, fused=False, payload=payload)
    assert sum(calls) == 5 * 10
    # only the order of some additions differs (dense products: BLAS's against row by row;
    # the offset shift·W: BLAS's against a loop)
    assert_same_training(fused, per_batch, rtol=1e-10, atol=1e-13, loss_rtol=1e-12)


def test_class_weights_weigh_the_rows(monkeypatch):
    X, y, labels = glm_data(3)
    cfg = TrainConfig(kind="logistic", epochs=3, optimizer="nesterov", lr=0.05)
    weights = np.array([1.0, 4.0, 0.5])
    fused, _ = _fit(X, y, labels, cfg, monkeypatch, weights=weights)
    per_batch, _ = _fit(X, y, labels, cfg, monkeypatch, fused=False, weights=weights)
    unweighted, _ = _fit(X, y, labels, cfg, monkeypatch)
    np.testing.assert_allclose(fused.W, per_batch.W, rtol=1e-10, atol=1e-13)
    assert not np.allclose(fused.W, unweighted.W)


@pytest.mark.parametrize("payload", ["dense", "toc", "mlweaving"])
@pytest.mark.parametrize("run", [1, 3, 1000])
def test_how_minibatches_are_grouped_never_changes_a_bit(monkeypatch, run, payload):
    X, y, labels = glm_data(3)
    cfg = TrainConfig(kind="logistic", epochs=4, optimizer="nesterov", lr=0.05, l1=1e-4)
    model, history = _fit(X, y, labels, cfg, monkeypatch, payload=payload)
    again, other = _fit(X, y, labels, cfg, monkeypatch, run=run, payload=payload)
    assert np.array_equal(model.W, again.W) and np.array_equal(model.b, again.b)
    assert [e["loss"] for e in history] == [e["loss"] for e in other]


def test_an_epoch_mixing_fused_and_per_batch_minibatches_trains_as_the_per_batch_path(monkeypatch):
    X, y, labels = glm_data(3)
    cfg = TrainConfig(kind="logistic", epochs=4, optimizer="nesterov", lr=0.05)
    prob = problem(X, labels, "zscore", y)
    source = KeptSource(X, y)
    for batch in source.batches[1::3]:  # Fortran-ordered: these step one at a time
        batch.X = np.asfortranarray(batch.X)
    mixed, h1 = fit(source, prob, cfg, CpuBackend())
    per_batch, h2 = _fit(X, y, labels, cfg, monkeypatch, fused=False)
    np.testing.assert_allclose(mixed.W, per_batch.W, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose([e["loss"] for e in h1], [e["loss"] for e in h2], rtol=1e-12)


def test_a_label_outside_the_classes_is_the_per_batch_error(monkeypatch):
    X, y, labels = glm_data(2)
    y = y.copy()
    y[100] = 7.0
    cfg = TrainConfig(kind="logistic", epochs=1, optimizer="sgd")
    for fused in (True, False):
        for payload in ("dense", "toc", "mlweaving"):
            with pytest.raises(LoomFormatError, match="label 7.0 is not one of the classes"):
                _fit(X, y, labels, cfg, monkeypatch, fused=fused, payload=payload)


def test_a_diverging_step_restarts_as_the_per_batch_path_does(monkeypatch):
    X, y, labels = glm_data(0)
    cfg = TrainConfig(kind="linear", epochs=3, optimizer="sgd", lr=300.0, l2=0.0)
    _, fused = _fit(X, y, labels, cfg, monkeypatch)
    _, per_batch = _fit(X, y, labels, cfg, monkeypatch, fused=False)
    restarts = [e for e in fused if "restart" in e]
    assert restarts and restarts == [e for e in per_batch if "restart" in e]


def test_what_it_serves_and_how_it_groups():
    shape = (10, 2)
    assert fused_steps.serves(CpuBackend(), OPTIMIZERS["nesterov"](shape))
    assert not fused_steps.serves(CpuBackend(), OPTIMIZERS["adam"](shape))
    dense = [Batch(np.zeros((2, 3)), np.zeros(2), number=i) for i in range(4)]
    toc = Batch(TocMatrix.from_bytes(encode(np.eye(2, 3))), np.zeros(2), number=7)
    other = Batch(np.zeros((2, 3), dtype=np.float32), np.zeros(2), number=9)
    grouped = list(fused_steps.runs([dense[0], other, dense[1], dense[2], toc, dense[3]], 20))
    D, T = fused_steps.DENSE, fused_steps.TOC
    assert grouped == [
        (D, [dense[0]]),
        other,
        (D, [dense[1], dense[2]]),
        (T, [toc]),
        (D, [dense[3]]),
    ]
    wide = fused_steps.WIDEST + 1  # a wide dense model keeps BLAS; TOC is stepped at any width
    assert list(fused_steps.runs([dense[0], toc], wide)) == [dense[0], (T, [toc])]


def test_a_run_is_prepared_once_and_again_when_its_minibatches_change():
    X, y, _ = glm_data(2)
    batches = KeptSource(X, y).batches

    def prepared(run):
        payloads, labels = fused_steps._prepared(fused_steps.DENSE, run, run[0].X.shape[1])
        assert np.array_equal(labels, np.concatenate([b.y for b in run]))
        assert len(payloads) == len(run)
        assert all(p is b.X for p, b in zip(payloads, run))
        return labels

    kept = prepared(batches[:3])
    assert prepared(batches[:3]) is kept  # the same minibatches: made once
    assert prepared(batches[:2]) is not kept  # a shorter run from the same first minibatch
    assert prepared([batches[0], batches[3], batches[4]]) is not kept  # other members
    relabelled = [batches[0], Batch(batches[1].X, batches[1].y.copy()), batches[2]]
    relabelled[1].y[0] = 1.0 - relabelled[1].y[0]
    assert prepared(relabelled)[len(batches[0].y)] == relabelled[1].y[0]  # new labels read


@pytest.mark.parametrize("optimizer", ["sgd", "nesterov"])
def test_a_minibatch_or_state_of_another_shape_is_refused_before_the_kernel(optimizer):
    """The kernel checks no bounds: a minibatch wider than the model (a forged parallel epoch's)
    wrote past the gradient's rows, and labels short of the rows were read past their end."""
    X, y, labels = glm_data(2)
    prob = problem(X, labels, "zscore", y)
    cfg = TrainConfig(kind="logistic", optimizer=optimizer)
    m = X.shape[1]

    def step(batch, W=None, b=None, opt=None):
        W = np.zeros((m, 1)) if W is None else W
        b = np.zeros(1) if b is None else b
        opt = opt or OPTIMIZERS[optimizer](W.shape)
        before = W.copy()
        with pytest.raises(LoomFormatError) as info:
            fused_steps.step(
                fused_steps.payload_of(batch, m), [batch], 0.0, W, b, prob, cfg, opt, 0.1, [16]
            )
        assert info.value.hint and np.array_equal(W, before)
        return str(info.value)

    wide = Batch(np.ones((4, m + 6)), np.zeros(4))
    assert f"4 rows × {m + 6} features" in step(wide)
    assert "with 2 labels" in step(Batch(np.ones((4, m)), np.zeros(2)))
    toc = Batch(TocMatrix.from_bytes(encode(np.ones((4, m + 1)))), np.zeros(4))
    assert f"× {m + 1} features" in step(toc)
    ok = Batch(np.ones((4, m)), np.zeros(4))
    assert "b" in step(ok, b=np.zeros(3))
    assert "scale" in step(Batch(np.ones((4, m - 1)), np.zeros(4)), W=np.zeros((m - 1, 1)))
    assert "class columns" in step(ok, W=np.zeros((m, 2)), b=np.zeros(2))
    if optimizer == "nesterov":
        small = OPTIMIZERS[optimizer]((1, 1))
        assert "vW" in step(ok, opt=small)
