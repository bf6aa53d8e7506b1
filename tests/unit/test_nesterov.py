"""The default optimiser (Nesterov momentum, adaptive restart, epoch averaging) and the trainer's
short-batch weighting."""

from __future__ import annotations

import numpy as np
import pytest

from loomdb.accel.cpu import CpuBackend
from loomdb.learn import step_size
from loomdb.learn.losses import LOSSES
from loomdb.learn.optimizers import OPTIMIZERS, Nesterov
from loomdb.learn.trainer import TrainConfig, fit
from support.arrays import ArraySource, problem


def _objective(X, y, model, kind, l2, classes):
    Xs = model.scaling.apply(X)
    T = problem(X, classes).targets(y)[0] if classes else y.reshape(-1, 1)
    Z = Xs @ model.W + model.b
    return float(LOSSES[kind].value(Z, T).mean(axis=0).sum() + 0.5 * l2 * (model.W**2).sum())


def _auto(X, p, kind, batch, l2=1e-4):
    Xs = p.scaling.apply(X)
    sq = (Xs * Xs).sum(1)
    src = ArraySource(X, np.zeros(len(X)), batch)
    be = CpuBackend()
    lam = step_size.power_lambda(
        step_size.sample(src.train_batches(0, 32)),
        be.margins,
        be.gradient,
        p.scaling.shift,
        p.scaling.scale,
        True,
    )
    return step_size.auto_step(
        kind, len(X), batch, {"max": sq.max(), "mean": sq.mean()}, lam, l2, True
    )


def test_nesterov_is_registered_and_the_default_step_is_automatic():
    from loomdb.functions.train_options import TRAIN
    from loomdb.learn.optimizers import AUTOMATIC_STEP

    assert OPTIMIZERS["nesterov"] is Nesterov
    assert "nesterov" in AUTOMATIC_STEP
    assert TRAIN.parse({})["optimizer"] == "nesterov"


def test_momentum_follows_t_over_t_plus_3():
    opt = Nesterov((1, 1))
    W, b = np.zeros((1, 1)), np.zeros(1)
    g = np.ones((1, 1))
    opt.step(W, b, g, np.zeros(1), 1.0)  # t = 0: β = 0, a plain step
    assert W[0, 0] == pytest.approx(-1.0)
    opt.step(W, b, g, np.zeros(1), 1.0)  # t = 1: β = ¼, v = ¼·1 + 1, step 1 + ¼·1.25
    assert W[0, 0] == pytest.approx(-1.0 - (1 + 0.25 * 1.25))


def test_end_epoch_keeps_the_mean_iterate_and_restarts_on_a_rise():
    opt = Nesterov((2, 1))
    W, b = np.zeros((2, 1)), np.zeros(1)
    for _ in range(4):
        opt.step(W, b, np.ones((2, 1)), np.ones(1), 0.1)
    mean = opt.sW / opt.count
    opt.end_epoch(W, b, 1.0)
    np.testing.assert_allclose(opt.model(W, b)[0], mean)
    t_before = opt.t
    for _ in range(4):
        opt.step(W, b, -np.ones((2, 1)), -np.ones(1), 10.0)  # overshoot
    opt.end_epoch(W, b, 5.0)  # the epoch loss rose: restart
    assert opt.restarts == 1 and opt.t == 0
    assert opt.tmax == (t_before + 4) // Nesterov.SHRINK
    np.testing.assert_allclose(W, mean)  # back to the previous epoch's mean iterate
    assert not opt.vW.any() and not opt.vb.any()
    np.testing.assert_allclose(opt.model(W, b)[0], mean)


def test_a_short_batch_weighs_its_rows_like_the_others():
    """At a tiny step one epoch moves W by −lr·Σᵢ∇ℓᵢ/widest whatever the split: every row counts
    once, the 5-row last batch not 51 times."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(37, 3)), rng.normal(size=37)
    p = problem(X, [], "zscore", y)
    lr = 1e-9
    cfg = TrainConfig(kind="linear", epochs=1, lr=lr, lr_schedule="constant", l2=0.0)
    model, _ = fit(ArraySource(X, y, 16), p, cfg, CpuBackend())
    Xs = p.scaling.apply(X)
    expected = -lr * (Xs.T @ (0.0 - y)) / 16  # gradient at W = 0, summed over rows, over widest
    np.testing.assert_allclose(model.W[:, 0], expected, rtol=1e-4)


def test_default_reaches_the_optimum_on_an_ill_conditioned_problem():
    sklearn = pytest.importorskip("sklearn.datasets")
    from sklearn.linear_model import LogisticRegression

    X, y = sklearn.load_breast_cancer(return_X_y=True)
    y = y.astype(float)
    l2, batch = 1e-4, 256
    p = problem(X, [0.0, 1.0], "zscore")
    lr = _auto(X, p, "logistic", batch, l2)
    Xs = p.scaling.apply(X)
    ref = LogisticRegression(C=1 / (len(y) * l2), tol=1e-10, max_iter=20000).fit(Xs, y)
    Wr, br = ref.coef_.T, ref.intercept_
    target = float(np.logaddexp(0, Xs @ Wr + br)[:, 0].mean() - (y * (Xs @ Wr + br)[:, 0]).mean())
    target += 0.5 * l2 * float((Wr**2).sum())
    results = {}
    for name in ("sgd", "nesterov"):
        cfg = TrainConfig(
            kind="logistic",
            epochs=1000,
            tol=1e-4,
            lr=lr,
            lr_schedule="constant",
            optimizer=name,
            l2=l2,
            safe_lr=lr,
        )
        model, _ = fit(ArraySource(X, y, batch), p, cfg, CpuBackend())
        results[name] = _objective(X, y, model, "logistic", l2, [0.0, 1.0]) / target
    assert results["nesterov"] < 1.01  # measured 1.001 (at 202 epochs)
    assert results["sgd"] > 1.05  # plain SGD: 1.18 after 858 epochs


def test_least_squares_on_quantised_values_stays_stable():
    from loomdb.codecs import weave

    rng = np.random.default_rng(1)
    raw = rng.normal(size=(3000, 40)) ** 2
    U = weave.values(weave.quantize(raw, *weave.column_ranges(raw)), 1)
    y = raw[:, :5].sum(1)
    for method in ("none", "zscore"):
        p = problem(U, [], method, y)
        lr = _auto(U, p, "linear", 256)
        cfg = TrainConfig(
            kind="linear",
            epochs=300,
            tol=1e-4,
            lr=lr,
            lr_schedule="constant",
            optimizer="nesterov",
            safe_lr=lr,
        )
        model, history = fit(ArraySource(U, y, 256), p, cfg, CpuBackend())
        assert np.isfinite(model.W).all()
        Z = p.scaling.apply(U) @ model.W[:, 0] + model.b[0]
        assert 1 - ((Z - y) ** 2).mean() / y.var() > 0.3
        assert all("restart" not in h for h in history)


def test_the_guard_still_restarts_a_huge_step():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(float)
    p = problem(X, [0.0, 1.0])
    cfg = TrainConfig(
        kind="logistic",
        epochs=30,
        lr=1e308,
        lr_schedule="constant",
        optimizer="nesterov",
        safe_lr=0.5,
    )
    model, history = fit(ArraySource(X, y, 32), p, cfg, CpuBackend())
    assert history[0]["restart"] == 1 and history[0]["next_lr"] == 0.5
    assert np.isfinite(model.W).all()
    assert ((p.scaling.apply(X) @ model.W[:, 0] + model.b[0] > 0) == (y == 1)).mean() > 0.95


def test_end_epoch_with_l1_keeps_the_proximal_point_of_the_mean_iterate():
    """The running sum holds the forward points (before each step's proximal L1 step); the
    model kept, and the point a restart returns to, is the mean's proximal point."""
    opt = Nesterov((3, 1))
    W, b = np.zeros((3, 1)), np.zeros(1)
    for g in ([1.0, 0.02, -0.3], [1.0, -0.03, -0.3]):
        opt.step(W, b, np.array(g)[:, None], np.ones(1), 0.1)
    mean = opt.sW / opt.count
    opt.end_epoch(W, b, 1.0, 0.01)  # the epoch's lr · l1
    kept = np.sign(mean) * np.maximum(np.abs(mean) - 0.01, 0.0)
    np.testing.assert_array_equal(opt.model(W, b)[0], kept)
    assert opt.model(W, b)[0][1, 0] == 0.0 and mean[1, 0] != 0.0
    opt.end_epoch(W, b, 5.0, 0.01)  # the loss rose: back to the kept proximal point
    np.testing.assert_array_equal(W, kept)


def _l1_data(rows=2000, noise=4, seed=7):
    """The tester's table: one informative feature and ``noise`` uniform ones."""
    rng = np.random.default_rng(seed)
    y = (np.arange(rows) % 2).astype(float)
    X = np.c_[y + 2 * rng.random(rows), rng.random((rows, noise))]
    return X, y


def _l1_objective(X, y, model, l1, l2):
    Z = model.scaling.apply(X) @ model.W[:, 0] + model.b[0]
    data = float((np.logaddexp(0.0, Z) - y * Z).mean())
    return data + 0.5 * l2 * float((model.W**2).sum()) + l1 * float(np.abs(model.W).sum())


@pytest.mark.parametrize("path", ["fused", "per_batch", "device"])
def test_l1_zeroes_the_nesterov_model_as_it_zeroes_sgds(monkeypatch, path):
    """A large l1 leaves every weight exactly 0 and a moderate one a model as sparse as plain
    SGD's, whichever path steps (numba's fused steps, the numpy per-batch step, the gpu
    backend's device steps on numpy); the last epoch's loss is the stored model's objective
    up to the pass's noise (the stored Nesterov model was once the mean of the forward points,
    every weight non-zero at l1 = 10 and an L1 penalty above 12 against a loss of 0.695)."""
    from loomdb.accel.device_arrays import NumpyDevice
    from loomdb.accel.gpu import GpuBackend
    from loomdb.learn import fused_steps

    X, y = _l1_data()
    p = problem(X, [0.0, 1.0], "zscore")
    lr, l2 = _auto(X, p, "logistic", 256), 1e-4
    if path == "per_batch":
        monkeypatch.setattr(fused_steps, "serves", lambda backend, optimizer: False)
    backend = GpuBackend(NumpyDevice()) if path == "device" else CpuBackend()
    nonzero = {}
    for l1 in (10.0, 0.05):
        for name in ("sgd", "nesterov"):
            cfg = TrainConfig(
                kind="logistic",
                epochs=20,
                lr=lr,
                lr_schedule="constant",
                optimizer=name,
                l1=l1,
                l2=l2,
                safe_lr=lr,
            )
            model, history = fit(ArraySource(X, y, 256), p, cfg, backend)
            nonzero[l1, name] = int(np.count_nonzero(model.W))
            objective = _l1_objective(X, y, model, l1, l2)
            assert history[-1]["loss"] == pytest.approx(objective, rel=0.02), (l1, name)
    assert nonzero[10.0, "sgd"] == nonzero[10.0, "nesterov"] == 0
    assert nonzero[0.05, "sgd"] == 1  # the informative feature alone
    assert nonzero[0.05, "nesterov"] <= 2  # measured: 1 (9 of 9 before, at l1 = 0.05)
