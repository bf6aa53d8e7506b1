"""SlimML without a database: the aggregator (SVD, median splits, means), the remover's effects
and ε cut, the policies' weights."""

from __future__ import annotations

import numpy as np
import pytest

from loomdb.errors import LoomOptionError
from loomdb.learn import skipping
from loomdb.learn.losses import LOSSES
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.learn.slim import Points, Remover, effects, group_targets, noncritical
from loomdb.seams import Aggregates, Batch
from loomdb.store import groups, svd
from support.arrays import stats_of

# -- Def. 2: the cut -----------------------------------------------------------------------------


def test_noncritical_is_the_prefix_whose_cumulative_share_is_at_most_epsilon():
    e = np.array([5.0, 0.01, 3.0, 0.02, 0.001, 0.05])
    # ascending 0.001, 0.01, 0.02, 0.05, 3, 5: cumulative 0.001, 0.011, 0.031, 0.081 of 8.081
    assert noncritical(e, 0.01).tolist() == [False, True, False, True, True, False]
    assert noncritical(e, 0.081 / 8.081).tolist() == [False, True, False, True, True, True]
    assert not noncritical(e, 0.0001).any()


def test_noncritical_with_no_effect_at_all_removes_everything():
    assert noncritical(np.zeros(4), 0.01).all()  # Eqn 4: Σ_{i≤n} e_i ≤ ε·Σ e_i for every n
    assert noncritical(np.zeros(0), 0.01).tolist() == []


# -- Def. 1: the effect is the L1 norm of the point's gradient ------------------------------------


def _numeric_gradient_l1(kind, x, t, W, b, l2, intercept):
    """|∂/∂(W, b)| summed, by central differences of the point's loss (+ ½·l2·‖W‖²)."""

    def f(Wp, bp):
        z = x @ Wp + bp
        return float(LOSSES[kind].value(z[None, :], t[None, :]).sum() + 0.5 * l2 * (Wp**2).sum())

    h, total = 1e-6, 0.0
    for idx in np.ndindex(W.shape):
        up, down = W.copy(), W.copy()
        up[idx] += h
        down[idx] -= h
        total += abs(f(up, b) - f(down, b)) / (2 * h)
    if intercept:
        for j in range(len(b)):
            up, down = b.copy(), b.copy()
            up[j] += h
            down[j] -= h
            total += abs(f(W, up) - f(W, down)) / (2 * h)
    return total


@pytest.mark.parametrize("kind", ["linear", "logistic", "svm"])
@pytest.mark.parametrize("l2", [0.0, 0.3])
@pytest.mark.parametrize("intercept", [True, False])
def test_effect_is_the_l1_norm_of_the_points_gradient(kind, l2, intercept):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(12, 4))
    T = rng.integers(0, 2, size=(12, 1)).astype(float)
    W, b = rng.normal(size=(4, 1)) * 0.3, np.array([0.1])
    got = effects(kind, X, T, np.ones(12), W, b, intercept, l2)
    for i in range(12):
        z = float(X[i] @ W[:, 0] + b[0])
        if kind == "svm" and abs(abs(z) - 1) < 1e-3:
            continue  # not differentiable on the margin
        want = _numeric_gradient_l1(kind, X[i], T[i], W, b, l2, intercept)
        assert got[i] == pytest.approx(want, rel=1e-4, abs=1e-6)


def _binary(classes=(0.0, 1.0), weights=None, d=3):
    scaling = Scaling("none", np.zeros(d), np.ones(d))
    return Problem([f"x{i}" for i in range(d)], scaling, list(classes), weights)


def test_aggregated_points_take_the_digests_glm_forms():
    means = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0], [2.0, 2.0, -1.0]])
    labels = np.array([0.25, 1.0, 0.0])  # ŷ: mean labels of the groups
    agg = Aggregates(np.array([4, 4, 4]), means, labels, np.zeros(3), np.zeros((3, 2), int))
    W, b = np.array([[0.5], [0.25], [-1.0]]), np.array([0.2])
    norm = np.abs(means).sum(axis=1) + 1.0  # ‖[a, 1]‖₁
    z = means @ W[:, 0] + b[0]
    points = Points.of(agg, _binary(), _binary().scaling)
    ids = np.arange(3)
    forms = {
        "linear": np.abs(z - labels) * norm,
        "logistic": np.abs(1 / (1 + np.exp(-z)) - labels) * norm,
        "svm": np.where((2 * labels - 1) * z < 1, np.abs(2 * labels - 1), 0.0) * norm,
    }
    for kind, want in forms.items():
        got = Remover(points, kind, 0.01, True).effects(ids, W, b)
        assert np.allclose(got, want)


def test_group_targets_for_two_classes_mix_targets_and_class_weights():
    p = _binary(classes=(-1.0, 1.0), weights=np.array([1.0, 3.0]))
    T, sw = group_targets(np.array([-1.0, 0.0, 1.0]), p)
    assert T[:, 0].tolist() == [0.0, 0.5, 1.0]
    assert sw.tolist() == [1.0, 2.0, 3.0]


def test_one_vs_rest_needs_groups_of_one_label():
    p = _binary(classes=(0.0, 1.0, 2.0))
    T, _ = group_targets(np.array([2.0, 0.0]), p)
    assert T.tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    with pytest.raises(LoomOptionError, match="one label"):
        group_targets(np.array([0.5]), p)


# -- the aggregator -----------------------------------------------------------------------------


def test_levels_make_groups_of_at_most_the_ratio():
    assert groups.levels_for(16281, 100) == 8  # a9a.t: 256 groups of 63–64 rows
    assert groups.levels_for(100, 100) == 0
    assert groups.levels_for(101, 100) == 1


def test_median_splits_divide_into_equal_groups_ordered_along_each_level():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(1001, 2))
    parts = groups.median_splits(P, np.arange(1001), 3)
    assert len(parts) == 8
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(np.concatenate(parts).tolist()) == list(range(1001))
    left, right = np.concatenate(parts[:4]), np.concatenate(parts[4:])
    assert P[left, 0].max() <= P[right, 0].min()  # level 0 splits on dimension 0
    quarter, next_quarter = np.concatenate(parts[:2]), np.concatenate(parts[2:4])
    assert P[quarter, 1].max() <= P[next_quarter, 1].min()  # level 1, within a half: dimension 1
    assert P[parts[0], 0].max() <= P[parts[1], 0].min()  # level 2 cycles back to dimension 0


def test_divide_covers_every_row_once_in_groups_of_at_most_the_ratio():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = (rng.random(3000) < 0.3).astype(float)
    mixed = groups.divide(X, y, stats_of(X), 100, False, seed=3)
    assert len(mixed.members) == 32 and mixed.dims == 5
    rows = np.concatenate(mixed.members)
    assert sorted(rows.tolist()) == list(range(3000))
    assert max(len(m) for m in mixed.members) <= 100
    assert any(0 < y[m].mean() < 1 for m in mixed.members)
    again = groups.divide(X, y, stats_of(X), 100, False, seed=3)
    assert all((a == b).all() for a, b in zip(mixed.members, again.members))
    strat = groups.divide(X, y, stats_of(X), 100, True, seed=3)
    assert all(y[m].min() == y[m].max() for m in strat.members)
    assert sorted(np.concatenate(strat.members).tolist()) == list(range(3000))


def test_aggregate_is_the_mean_in_the_original_space():
    X = np.array([[1.0, -4.0], [3.0, 2.0]])
    a, label, norm = groups.aggregate(X, np.array([0.0, 1.0]))
    assert a.tolist() == [2.0, -1.0] and label == 0.5 and norm == 4.0


def test_incremental_svd_finds_the_dominant_direction():
    rng = np.random.default_rng(0)
    u = rng.normal(size=2000)
    X = np.outer(u, rng.normal(size=40)) + 0.1 * rng.normal(size=(2000, 40))
    s = stats_of(X)
    P = svd.reduce(X, s["mean"], 1 / s["std"], 2, seed=1)
    assert P.shape == (2000, 2)
    assert abs(np.corrcoef(P[:, 0], u)[0, 1]) > 0.95


# -- the policies --------------------------------------------------------------------------------


def _points(n_groups=40, rows=10, d=3, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_groups, d))
    sizes = np.full(n_groups, rows)
    sizes[0] = rows + 3
    agg = Aggregates(sizes, means, rng.random(n_groups), np.zeros(n_groups), np.zeros((40, 2)))
    return Points.of(agg, _binary(d=d), _binary(d=d).scaling)


def test_random_removes_the_share_asked_and_reweights_to_the_whole_minibatch():
    points = _points()
    policy = skipping.make(
        "random", points, "logistic", epsilon=0.01, fraction=0.25, fit_intercept=True,
        include_l2=0.0, oracle=False, seed=0,
    )  # fmt: skip
    ids = np.arange(0, 8)
    read, weights = policy.choose(ids, np.zeros((3, 1)), np.zeros(1))
    assert read.sum() == 6
    assert (weights[read] * points.rows[ids][read]).sum() == pytest.approx(points.rows[ids].sum())
    assert policy.report()["removed"] == pytest.approx(points.rows[ids][~read].sum() / 83)


def test_coreset_keeps_one_fixed_subset_with_inverse_probability_weights():
    points = _points()
    policy = skipping.make(
        "coreset", points, "logistic", epsilon=0.01, fraction=None, fit_intercept=True,
        include_l2=0.0, oracle=False, seed=0,
    )  # fmt: skip
    ids = np.arange(40)
    first, w = policy.choose(ids, np.zeros((3, 1)), np.zeros(1))
    again, _ = policy.choose(ids, np.ones((3, 1)), np.ones(1))
    assert first.sum() == 10 and (first == again).all()  # 25% of the groups, whatever W is
    assert (w[first] > 0).all()


def test_importance_weights_estimate_the_whole_minibatch():
    policy = skipping.make(
        "importance", _points(), "logistic", epsilon=0.01, fraction=0.5, fit_intercept=True,
        include_l2=0.0, oracle=False, seed=0,
    )  # fmt: skip
    rng = np.random.default_rng(2)
    Z, T = rng.normal(size=(50, 1)), rng.integers(0, 2, size=(50, 1)).astype(float)
    batch = Batch(X=np.zeros((50, 3)), y=T[:, 0])
    mean = np.mean([policy.weigh(batch, Z, T, np.ones(50), None, None) for _ in range(4000)], 0)
    assert np.allclose(mean, 1.0, atol=0.15)  # E[count / (m·p)] = 1 for every row


def test_the_oracle_reads_every_group_and_trains_on_the_kept_ones():
    points = _points()
    kwargs = dict(epsilon=0.2, fraction=None, fit_intercept=True, include_l2=0.0, seed=0)
    plain = skipping.make("slimml", points, "logistic", oracle=False, **kwargs)
    oracle = skipping.make("slimml", points, "logistic", oracle=True, **kwargs)
    ids, W, b = np.arange(10), np.ones((3, 1)), np.zeros(1)
    read, none = plain.choose(ids, W, b)
    everything, weights = oracle.choose(ids, W, b)
    assert none is None and 0 < read.sum() < 10
    assert everything.all() and weights.tolist() == read.astype(float).tolist()


def test_row_blocks_multiply_like_the_stacked_rows():
    from loomdb.codecs import toc
    from loomdb.store.formats.base import RowBlocks

    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 3, size=(n, 5)).astype(float) for n in (7, 1, 12)]
    stacked = RowBlocks([toc.TocMatrix.from_bytes(toc.encode(p)) for p in parts])
    X = np.vstack(parts)
    W, R = rng.normal(size=(5, 2)), rng.normal(size=(20, 2))
    assert stacked.shape == (20, 5)
    assert np.allclose(stacked @ W, X @ W)
    assert np.allclose(R.T @ stacked, R.T @ X)
    assert np.array_equal(stacked.toarray(), X)
