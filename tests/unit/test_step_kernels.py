"""The fused SGD step (learn/step_kernels.py) against the numpy forms it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from loomdb.learn.losses import LOSSES
from loomdb.learn.optimizers import Nesterov
from loomdb.learn.step_kernels import KIND_CODES, assemble, momentum_step, residuals, shrink


def _batch(k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = rng.normal(scale=8.0, size=(257, k))
    Z[:4, 0] = [0.0, -0.0, 750.0, -750.0]  # the branches' edges and exp's overflow
    T = (rng.random((257, k)) < 0.5).astype(np.float64)
    return Z, T, rng.random(257) * 2.0


@pytest.mark.parametrize("kind", sorted(KIND_CODES))
@pytest.mark.parametrize("k", [1, 3])
def test_residuals_are_the_losses_derivative_and_sums(kind: str, k: int) -> None:
    Z, T, sw = _batch(k)
    loss = LOSSES[kind]
    total, G, gsum = residuals(KIND_CODES[kind], Z, T, sw, 300.0)
    expected = loss.derivative(Z, T) * (sw / 300.0)[:, None]
    # element by element the numpy form's arithmetic; exp may be the C library's, not numpy's
    np.testing.assert_allclose(G, expected, rtol=1e-15, atol=0)
    np.testing.assert_allclose(gsum, expected.sum(axis=0), rtol=1e-12, atol=1e-15)
    assert total == pytest.approx(float((loss.value(Z, T) * sw[:, None]).sum()), rel=1e-12)
    if kind != "logistic":  # no exponential: the same bits
        assert np.array_equal(G, expected)


@pytest.mark.parametrize("k", [1, 3])
def test_unit_weight_logistic_losses_are_summed_as_one_product(k: int) -> None:
    """Rows of weight 1 multiply 1 + e^(−|z|) instead of adding log1p of it: the same sum to
    1e-13, confident rows' tiny losses included, the same derivative bits."""
    Z, T, _ = _batch(k)
    Z[4:8, 0] = [30.0, -30.0, 45.0, 1e-9]  # e below _TINY, and a margin at 0's edge
    ones = np.ones(len(Z))
    loss = LOSSES["logistic"]
    total, G, _ = residuals(KIND_CODES["logistic"], Z, T, ones, 300.0)
    assert total == pytest.approx(float(loss.value(Z, T).sum()), rel=1e-13)
    np.testing.assert_allclose(G, loss.derivative(Z, T) / 300.0, rtol=1e-15, atol=0)
    weighted, _, _ = residuals(KIND_CODES["logistic"], Z, T, ones * (1 + 2**-52), 300.0)
    assert weighted == pytest.approx(total, rel=1e-13)  # the row-by-row path agrees
    confident = np.array([[40.0], [-40.0]])
    tiny, _, _ = residuals(
        KIND_CODES["logistic"], confident, np.array([[1.0], [0.0]]), ones[:2], 1.0
    )
    assert tiny == pytest.approx(2 * np.exp(-40.0), rel=1e-12)  # not lost in a product's rounding


def test_a_long_product_is_logged_before_it_overflows() -> None:
    Z = np.zeros((5000, 1))  # each row multiplies 2 in: 2^5000 overflows a float64
    total, _, _ = residuals(KIND_CODES["logistic"], Z, np.ones((5000, 1)), np.ones(5000), 1.0)
    assert total == pytest.approx(5000 * np.log(2.0), rel=1e-13)


def test_logistic_never_overflows_and_keeps_nan() -> None:
    Z = np.array([[1e300], [-1e300], [np.nan], [0.0]])
    T = np.array([[0.0], [1.0], [1.0], [1.0]])
    total, G, _ = residuals(KIND_CODES["logistic"], Z[:2], T[:2], np.ones(2), 2.0)
    assert np.isfinite(total) and np.array_equal(G[:, 0], [0.5, -0.5])
    total, G, gsum = residuals(KIND_CODES["logistic"], Z, T, np.ones(4), 4.0)
    assert np.isnan(total) and np.isnan(G[2, 0]) and np.isnan(gsum[0])


@pytest.mark.parametrize("kind", ["linear", "svm"])
def test_nan_margins_reach_the_loss(kind: str) -> None:
    total, _, gsum = residuals(
        KIND_CODES[kind], np.array([[np.nan]]), np.ones((1, 1)), np.ones(1), 1.0
    )
    assert np.isnan(total)
    assert np.isnan(gsum[0]) or kind == "svm"  # hinge's step is 0 where t·z < 1 is false


def test_assemble_is_the_standardised_gradient_plus_l2() -> None:
    rng = np.random.default_rng(2)
    grad, W = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    scale, shift, gsum = rng.random(6) + 0.5, rng.normal(size=6), rng.normal(size=2)
    expected = scale[:, None] * (grad - np.outer(shift, gsum))
    expected += 0.25 * W
    assert np.array_equal(assemble(grad, scale, shift, gsum, 0.25, W), expected)


@pytest.mark.parametrize("order", ["C", "F"])
def test_momentum_step_is_nesterovs_update_in_place(order: str) -> None:
    rng = np.random.default_rng(3)
    p, g, v = (np.asarray(rng.normal(size=(5, 3)), order=order) for _ in range(3))
    s = np.asarray(rng.normal(size=(5, 3)), order=order)
    want_v = v * 0.6 + g
    want_p = p - 0.1 * (g + 0.6 * want_v)
    want_s = s + want_p
    momentum_step(p, g, v, s, 0.6, 0.1)
    assert np.array_equal(v, want_v) and np.array_equal(p, want_p) and np.array_equal(s, want_s)


def test_nesterov_steps_weights_and_intercept_by_its_schedule() -> None:
    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(3, 2)), rng.normal(size=2)
    want_W, want_b = W.copy(), b.copy()
    vW, vb, sW = np.zeros((3, 2)), np.zeros(2), np.zeros((3, 2))
    opt = Nesterov(W.shape)
    for t in range(4):
        gW, gb = rng.normal(size=(3, 2)), rng.normal(size=2)
        opt.step(W, b, gW, gb, 0.1)
        beta = t / (t + 3.0)  # the numpy form of the update, written out
        vW, vb = vW * beta + gW, vb * beta + gb
        want_W, want_b = want_W - 0.1 * (gW + beta * vW), want_b - 0.1 * (gb + beta * vb)
        sW += want_W
    assert np.array_equal(W, want_W) and np.array_equal(b, want_b)
    assert np.array_equal(opt.sW, sW) and opt.count == 4


def _numpy_targets(y, classes, k, weights):  # the form Problem.targets had in numpy
    idx = np.searchsorted(np.asarray(classes, dtype=np.float64), y)
    if k == 1:
        T = (idx == 1).astype(np.float64).reshape(-1, 1)
    else:
        T = np.zeros((len(y), k))
        T[np.arange(len(y)), idx] = 1.0
    return T, weights[idx] if weights is not None else np.ones(len(y))


@pytest.mark.parametrize("classes", [[0.0, 1.0], [-1.0, 2.0, 7.5]])
@pytest.mark.parametrize("weighted", [False, True])
def test_targets_are_one_vs_rest_columns_and_class_weights(classes, weighted) -> None:
    from loomdb.learn.problem import Problem
    from loomdb.learn.scaling import Scaling

    rng = np.random.default_rng(5)
    y = rng.choice(classes, size=300)
    weights = rng.random(len(classes)) + 0.5 if weighted else None
    problem = Problem(
        ["a"], Scaling("none", np.zeros(1), np.ones(1)), classes, class_weights=weights
    )
    T, sw = problem.targets(y)
    want_T, want_sw = _numpy_targets(y, classes, problem.k, weights)
    assert np.array_equal(T, want_T) and np.array_equal(sw, want_sw)


def test_a_label_above_every_class_is_refused() -> None:
    from loomdb.errors import LoomFormatError
    from loomdb.learn.problem import Problem
    from loomdb.learn.scaling import Scaling

    problem = Problem(["a"], Scaling("none", np.zeros(1), np.ones(1)), [0.0, 1.0, 2.0])
    with pytest.raises(LoomFormatError, match="label 5.0 is not one of the classes"):
        problem.targets(np.array([0.0, 5.0]))


def test_shrink_is_numpys_soft_threshold() -> None:
    W = np.array([[0.5, -0.5], [0.05, -0.05], [0.0, -0.0], [np.nan, np.inf], [-np.inf, 0.1]])
    expected = np.sign(W) * np.maximum(np.abs(W) - 0.1, 0.0)
    shrink(W, 0.1)
    assert np.array_equal(W, expected, equal_nan=True)
    assert np.array_equal(np.signbit(W), np.signbit(expected))
