"""Bit-sliced products of woven blocks (MLWeaving §4.2): the same numbers as the dense float path.

The dense path is ``weave.values`` (the middle of each truncation interval) times the operand
in float64; the kernels sum the same exact terms in another order, so they must agree within
``TOLERANCE · (|A|·|W|)`` entry by entry, and be exactly zero where every term is zero.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loomdb.accel.cpu import CpuBackend
from loomdb.codecs import weave
from loomdb.codecs.weave_products import TOLERANCE
from loomdb.learn.trainer import TrainConfig, fit
from loomdb.seams import Batch
from support.arrays import problem


def _block(rng: np.random.Generator, n: int, m: int, zeros: float = 0.5) -> np.ndarray:
    """uint32 codes with a share of zeros (sparse rows and columns) and full-range values."""
    U = rng.integers(0, 2**32, size=(n, m), dtype=np.uint64).astype(np.uint32)
    U[rng.random((n, m)) < zeros] = 0
    U[:, 0] = 2**32 - 1  # all ones: every plane set
    if n > 2:
        U[1] = 0  # an all-zero row
    return U


def _agree(got: np.ndarray, want: np.ndarray, bound: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= TOLERANCE * bound)  # zero where every term is zero


@pytest.mark.parametrize(("n", "m"), [(13, 70), (200, 130), (64, 64), (1, 1), (9, 200)])
def test_products_equal_the_dense_values_at_every_precision(n, m):
    rng = np.random.default_rng(n * 1000 + m)
    U = _block(rng, n, m)
    planes = [bytes(p) for p in weave.weave_block(U)]
    w, W = rng.normal(size=m), rng.normal(size=(m, 3))
    g, G = rng.normal(size=n), rng.normal(size=(2, n))
    g[: n // 3] = 0.0  # rows without gradient are skipped: still exact
    for s in range(1, 33):
        A = weave.values(weave.truncate(U, s), s)
        M = weave.WovenMatrix(planes, n, m, s)
        _agree(M @ w, A @ w, np.abs(A) @ np.abs(w))
        _agree(M @ W, A @ W, np.abs(A) @ np.abs(W))
        _agree(g @ M, g @ A, np.abs(g) @ np.abs(A))
        _agree(G @ M, G @ A, np.abs(G) @ np.abs(A))
        assert M._values is None  # computed on the planes, never on rebuilt floats


@pytest.mark.parametrize("m", [1, 6, 8, 9, 12, 16, 17, 20, 32, 33, 40, 57, 64, 76, 84, 130])
def test_a_narrow_chunk_reads_only_its_live_bytes_with_the_same_bits(m):
    """A last chunk of m − 64·c features reads the bytes that hold them only: its products are
    bit for bit those of the full eight-byte path on the same planes with zero weights for the
    absent features, whose gradients are 0."""
    from loomdb.codecs import weave_products

    rng = np.random.default_rng(m)
    n = 37
    U = _block(rng, n, m)
    wide = -(-m // 64) * 64  # the chunks' full width
    padded = np.zeros((n, wide), dtype=np.uint32)
    padded[:, :m] = U
    W, G = rng.normal(size=(m, 2)), rng.normal(size=(n, 2))
    for s in (1, 4, 13, 32):
        words = weave.WovenMatrix([bytes(p) for p in weave.weave_block(U)], n, m, s).words()
        full = weave.WovenMatrix([bytes(p) for p in weave.weave_block(padded)], n, wide, s)
        assert np.array_equal(words, full.words())  # the same planes: absent features are 0
        W0 = np.zeros((wide, 2))
        W0[:m] = W
        narrow_z = weave_products.matmul(words, W)
        assert np.array_equal(narrow_z, weave_products.matmul(words, W0))
        full_g = weave_products.rmatmul(words, G, wide)
        assert np.array_equal(weave_products.rmatmul(words, G, m), full_g[:m])
        assert not full_g[m:].any()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 80),
    m=st.integers(1, 150),
    s=st.integers(1, 32),
    zeros=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_products_agree_on_any_shape_and_sparsity(n, m, s, zeros, seed):
    rng = np.random.default_rng(seed)
    U = _block(rng, n, m, zeros)
    A = weave.values(weave.truncate(U, s), s)
    M = weave.WovenMatrix([bytes(p) for p in weave.weave_block(U)], n, m, s)
    w, g = rng.normal(size=m) * 1e3, rng.normal(size=n) * 1e-3  # scale is relative
    _agree(M @ w, A @ w, np.abs(A) @ np.abs(w))
    _agree(g @ M, g @ A, np.abs(g) @ np.abs(A))


def test_products_repeat_bit_for_bit_and_the_codes_survive_the_arrangement():
    rng = np.random.default_rng(7)
    U = _block(rng, 40, 100)
    M = weave.WovenMatrix([bytes(p) for p in weave.weave_block(U)], 40, 100, 5)
    w = rng.normal(size=100)
    first = M @ w
    assert M.planes is None  # the kernels' order replaced the planes read …
    assert np.array_equal(M @ w, first)
    assert np.array_equal(M.quantized(), weave.truncate(U, 5))  # … and holds the same bits
    assert M.nbytes == 5 * weave.plane_bytes(40, 100)


class _Woven:
    """Batches of one woven layout, as WovenMatrix or as its dense values (the float path)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, dense: bool):
        self.blocks, self.dense = [], dense
        lo, hi = weave.column_ranges(X)
        for i in range(0, len(y), 24):
            U = weave.quantize(X[i : i + 24], lo, hi)
            self.blocks.append(([bytes(p) for p in weave.weave_block(U)], y[i : i + 24]))
        self.m = X.shape[1]

    def train_batches(self, epoch: int, precision: int):
        for planes, y in self.blocks:
            M = weave.WovenMatrix(planes, len(y), self.m, precision)
            yield Batch(M.toarray() if self.dense else M, y)

    def validation_batches(self, precision: int):
        return ()


@pytest.mark.parametrize(("kind", "classes"), [("linear", []), ("logistic", [0.0, 1.0, 2.0])])
def test_models_trained_on_planes_and_on_float_values_agree(kind, classes):
    rng = np.random.default_rng(3)
    X = rng.random((150, 90)) * (rng.random((150, 90)) < 0.4)
    y = rng.integers(0, 3, 150).astype(float)
    U = (X - X.min(0)) / np.where(np.ptp(X, 0) > 0, np.ptp(X, 0), 1.0)
    prob = problem(U, classes, "none", y=y)
    for s in (1, 3, 32):
        cfg = TrainConfig(kind=kind, epochs=4, precision=s, lr=0.05)
        woven, _ = fit(_Woven(X, y, dense=False), prob, cfg, CpuBackend())
        floats, _ = fit(_Woven(X, y, dense=True), prob, cfg, CpuBackend())
        assert woven.W.shape == floats.W.shape
        assert np.allclose(woven.W, floats.W, rtol=1e-9, atol=1e-12)
        assert np.allclose(woven.b, floats.b, rtol=1e-9, atol=1e-12)
