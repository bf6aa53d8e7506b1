"""MLWeaving's layout (§4.3): quantisation, truncation, planes, addressing, sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from loomdb.codecs import weave
from loomdb.errors import LoomFormatError, LoomOptionError


def test_exact_round_trip_at_32_bits_with_padding():
    rng = np.random.default_rng(0)
    U = rng.integers(0, 2**32, size=(13, 70), dtype=np.uint64).astype(np.uint32)
    planes = weave.weave_block(U)
    assert planes.shape == (32, weave.plane_bytes(13, 70)) == (32, 2 * 2 * 64)
    assert np.array_equal(weave.unweave(list(planes), 13, 70, 32), U)


@settings(max_examples=60, deadline=None)
@given(
    X=arrays(
        np.float64,
        st.tuples(st.integers(1, 20), st.integers(1, 70)),
        elements=st.floats(-1e6, 1e6, allow_nan=False),
    ),
    s=st.integers(1, 32),
)
def test_truncation_error_is_one_sided_and_below_two_to_minus_s(X, s):
    mins, maxs = weave.column_ranges(X)
    U = weave.quantize(X, mins, maxs)
    planes = [bytes(p) for p in weave.weave_block(U)]
    a = weave.dequantize(U)
    q = weave.dequantize(weave.unweave(planes, *X.shape, s))
    assert np.array_equal(weave.unweave(planes, *X.shape, s), weave.truncate(U, s))
    assert (a - q >= 0).all() and (a - q < 2.0**-s).all()


def test_quantisation_ends_constant_columns_and_clipping():
    X = np.array([[0.0, 7.0, -3.0], [10.0, 7.0, -1.0], [5.0, 7.0, -2.0]])
    mins, maxs = weave.column_ranges(X)
    U = weave.quantize(X, mins, maxs)
    assert U[1, 0] == 2**32 - 1 and U[0, 0] == 0  # max → all ones, min → 0
    assert (U[:, 1] == 0).all()  # a constant column maps to 0
    assert U[1, 2] == 2**32 - 1  # an all-negative column still reaches all ones
    outside = weave.quantize(np.array([[20.0, 7.0, -9.0]]), mins, maxs)
    assert outside[0, 0] == 2**32 - 1 and outside[0, 2] == 0  # clipped to the stored range


def test_table_4_addressing_and_bit_placement():
    M, N = 2048, 16  # C = 32 chunks
    U = np.zeros((N, M), dtype=np.uint32)
    U[9, 64 * 5 + 3] = 1 << 31  # sample 9 = group 1, bank 1; feature 323 = chunk 5, lane 3
    lines = weave.hardware_lines(U)
    assert lines.shape == (2 * 32 * 32, 64)
    # group 1 starts at line 1024: line (g·C + c)·32 + p = (1·32 + 5)·32 + 0
    nonzero = np.flatnonzero(lines.any(axis=1))
    assert nonzero.tolist() == [(1 * 32 + 5) * 32 + 0]
    line = lines[nonzero[0]]
    word = int.from_bytes(line[8:16].tobytes(), "little")  # bank 1
    assert word == 1 << 3 and not line[:8].any() and not line[16:].any()
    assert (1 * 32 + 0) * 32 == 1024


@pytest.mark.parametrize(("n", "m"), [(1, 1), (8, 64), (9, 65), (16281, 123), (10000, 784)])
def test_index_size_and_eq4(n, m):
    assert weave.index_size(n, m) == -(-n // 8) * -(-m // 64) * 2048
    for s in (1, 3, 32):
        n8 = -(-n // 8) * 8
        assert weave.epoch_bytes(n, m, s) * 8 == n8 * (s * -(-m // 64) * 64 + 32)


def test_values_are_the_middle_of_the_truncation_interval():
    U = np.array([[0, 1, 0x80000000, 0xFFFFFFFF]], dtype=np.uint32)
    for s in (1, 4, 32):
        v = weave.values(weave.truncate(U, s), s)
        assert v[0, 0] == 0.0  # zero stays zero: sparse stays sparse
        lo = weave.dequantize(weave.truncate(U, s))
        nonzero = weave.truncate(U, s) > 0
        assert np.all(v[nonzero] == lo[nonzero] + 2.0 ** -(s + 1))
    assert weave.values(weave.truncate(U, 1), 1).tolist() == [[0.0, 0.0, 0.75, 0.75]]


def test_woven_matrix_products_equal_dense():
    rng = np.random.default_rng(1)
    X = rng.random((40, 100))
    U = weave.quantize(X, *weave.column_ranges(X))
    planes = [bytes(p) for p in weave.weave_block(U)]
    for s in (2, 32):
        W = weave.WovenMatrix(planes, 40, 100, s)
        dense = weave.values(weave.truncate(U, s), s)
        v, M, r = rng.normal(size=100), rng.normal(size=(100, 3)), rng.normal(size=(2, 40))
        assert np.allclose(W @ v, dense @ v, rtol=1e-12)
        assert np.allclose(W @ M, dense @ M, rtol=1e-12)
        assert np.allclose(r @ W, r @ dense, rtol=1e-12)
        assert W.nbytes == s * weave.plane_bytes(40, 100)


def test_bad_planes_and_precisions():
    planes = [bytes(p) for p in weave.weave_block(np.ones((8, 64), dtype=np.uint32))]
    with pytest.raises(LoomFormatError, match="expected 64"):
        weave.unweave([planes[0][:10]], 8, 64, 1)
    with pytest.raises(LoomFormatError, match="needs 3 planes"):
        weave.unweave(planes[:2], 8, 64, 3)
    for s in (0, 33, 2.5, True):
        with pytest.raises(LoomOptionError):
            weave.unweave(planes, 8, 64, s)


def test_a_woven_matrix_checks_its_planes_when_made_and_its_operands_when_used():
    planes = [bytes(p) for p in weave.weave_block(np.ones((8, 64), dtype=np.uint32))]
    with pytest.raises(LoomFormatError, match="plane 1 of a 8×64 woven block holds 10 bytes"):
        weave.WovenMatrix([planes[0], planes[1][:10]], 8, 64, 2)
    W = weave.WovenMatrix(planes, 8, 64, 4)  # extra planes are not read
    assert W.nbytes == 4 * 64
    with pytest.raises(LoomOptionError, match="cannot multiply a .8, 64. woven block"):
        W @ np.ones(8)
    with pytest.raises(LoomOptionError, match="by a .8, 64. woven block"):
        np.ones(64) @ W


def test_labels_float32_when_exact_float64_when_not():
    from loomdb.store.formats.weave import WeaveFormat

    fmt = WeaveFormat()
    exact = np.array([0.0, 1.0, -1.0, 0.5, 16777216.0])
    assert len(fmt.encode_labels(exact)) == 4 * len(exact)  # Eq. 4's 32 bits a label
    assert np.array_equal(fmt.decode_labels(fmt.encode_labels(exact), len(exact)), exact)
    for y in (np.array([16777216.0, 16777217.0]), np.array([0.1, 0.2]), np.array([1e300, 0])):
        blob = fmt.encode_labels(y)
        assert len(blob) == 8 * len(y)
        assert np.array_equal(fmt.decode_labels(blob, len(y)), y)
    # a block laid out before float64 labels (float32, 4 bytes a row) reads as it did
    old = np.array([1.5, 2.5, 3.5, 4.5], dtype="<f4").tobytes()
    assert np.array_equal(fmt.decode_labels(old, 4), [1.5, 2.5, 3.5, 4.5])
    with pytest.raises(LoomFormatError):
        fmt.decode_labels(b"\0" * 6, 1)
