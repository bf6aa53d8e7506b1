"""Sparse rows without a database: CSR rows, TOC's CSR entry point, sparse models, catalog
arrays, PostgreSQL's packed sparse rows, the hashed crosses and the Zipf generator."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from loomdb.codecs import array_json, toc
from loomdb.csr import CsrRows
from loomdb.engines.postgres.dialect import decode_packed_sparse
from loomdb.errors import LoomDataError, LoomFormatError, LoomOptionError
from loomdb.learn import step_size
from loomdb.learn.model import LinearModel
from loomdb.learn.scaling import Scaling
from loomdb.learn.sparse_model import SparseLinearModel, from_layout, warm_start_over
from loomdb.loaders import hashing, zipf
from loomdb.store.norms import RowNorms


def random_csr(rng, n, m, density=0.2, zeros=True):
    """A dense matrix with +0.0, −0.0, NaN and repeated values, and its CSR form holding
    some explicit +0.0 entries (the dense path drops them)."""
    X = np.where(
        rng.random((n, m)) < density, rng.choice([1.0, 2.5, -0.0, np.nan, 7.0], (n, m)), 0.0
    )
    rows, cols = np.nonzero(np.ones((n, m)))
    held = (X[rows, cols].view(np.uint64) != 0) | (zeros & (rng.random(len(rows)) < 0.1))
    rows, cols = rows[held], cols[held]
    indptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int64)
    return X, CsrRows(indptr, cols.astype(np.int64), X[rows, cols], m)


@pytest.mark.parametrize("variant", ["sparse", "sparse_logical", "full"])
@pytest.mark.parametrize("entropy", [None, "zstd"])
def test_encode_csr_gives_the_bytes_of_the_dense_matrix(variant, entropy):
    rng = np.random.default_rng(3)
    for n, m in [(0, 5), (1, 1), (7, 3), (40, 60), (256, 123)]:
        X, R = random_csr(rng, n, m)
        dense = toc.encode(X, variant=variant, entropy=entropy)
        assert (
            toc.encode_csr(R.indptr, R.indices, R.values, m, variant=variant, entropy=entropy)
            == dense
        )
        held = toc.TocMatrix.from_bytes(dense).held_columns()
        assert held.tolist() == sorted(set(np.nonzero(X.view(np.uint64))[1].tolist()))


def test_encode_csr_refuses_rows_that_are_not_canonical():
    with pytest.raises(LoomOptionError, match="strictly increase"):
        toc.encode_csr(np.array([0, 2]), np.array([3, 1]), np.ones(2), 5)
    with pytest.raises(LoomOptionError, match="strictly increase"):
        toc.encode_csr(np.array([0, 2]), np.array([1, 1]), np.ones(2), 5)
    with pytest.raises(LoomOptionError, match="outside"):
        toc.encode_csr(np.array([0, 1]), np.array([5]), np.ones(1), 5)
    with pytest.raises(LoomOptionError, match="disagree"):
        toc.encode_csr(np.array([0, 3]), np.array([1, 2]), np.ones(2), 5)
    # a row may start where the previous ended at a smaller column
    ok = toc.encode_csr(np.array([0, 1, 2]), np.array([4, 0]), np.ones(2), 5)
    assert np.array_equal(toc.decode(ok), [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]])


def test_csr_rows_products_slices_and_canonical_form():
    rng = np.random.default_rng(5)
    X, R = random_csr(rng, 30, 20, zeros=False)
    X, R = np.nan_to_num(X), CsrRows(R.indptr, R.indices, np.nan_to_num(R.values), 20)
    W, U = rng.normal(size=(20, 3)), rng.normal(size=(3, 30))
    assert np.allclose(R @ W, X @ W) and np.allclose(R @ W[:, 0], X @ W[:, 0])
    assert np.allclose(U @ R, U @ X) and np.allclose(U[0] @ R, U[0] @ X)
    assert np.array_equal(R.toarray(), X)
    mask = rng.random(30) < 0.5
    assert np.array_equal(R[mask].toarray(), X[mask])
    assert np.array_equal(R[5:17].toarray(), X[5:17])
    assert np.array_equal(CsrRows.concat([R[:9], R[9:]]).toarray(), X)
    shuffled = CsrRows(np.array([0, 3, 3, 5]), np.array([4, 0, 2, 9, 1]), np.arange(5.0), 10)
    fixed = shuffled.canonical()
    assert fixed.indices.tolist() == [0, 2, 4, 1, 9] and fixed.values.tolist() == [1, 2, 0, 4, 3]
    assert R.canonical() is R
    held = np.flatnonzero((X.view(np.uint64) != 0).any(axis=0))  # −0.0 is a stored value
    assert R.held_columns().tolist() == held.tolist()
    with pytest.raises(LoomDataError, match="column 2 twice"):
        CsrRows(np.array([0, 3]), np.array([2, 0, 2]), np.ones(3), 5).canonical()


def _model(cls=LinearModel, **extra):
    rng = np.random.default_rng(1)
    scaling = Scaling("zscore", rng.normal(size=4), rng.random(4) + 0.5)
    W = rng.normal(size=(4, 1))
    return cls("logistic", ["a", "b", "c", "d"], W, np.array([0.3]), scaling, [0.0, 1.0], **extra)


def test_sparse_rows_predict_what_dense_rows_predict():
    dense = _model()
    X = np.array([[0, 2.0, 0, 1.0], [0, 0, 0, 0], [3.0, 0, np.nan, 0]])
    rows = CsrRows(np.array([0, 2, 2, 4]), np.array([3, 1, 0, 2]), np.array([1.0, 2, 3, np.nan]), 4)
    Zs, Zd = dense.margins(rows), dense.margins(X)
    assert np.allclose(Zs[:2], Zd[:2]) and np.isnan(Zs[2]).all() and np.isnan(Zd[2]).all()
    with pytest.raises(LoomDataError, match="column 4"):
        dense.margins(CsrRows(np.array([0, 1]), np.array([4]), np.ones(1), 2**31))


def test_a_sparse_model_keeps_coefficients_by_source_column():
    trained = _model()
    trained.W[2] = 0.0  # a column L1 zeroed: dropped, predicting the same
    columns = np.array([7, 100, 2**30, 2**31 - 1])
    model = from_layout(trained, columns, 2**31)
    assert model.index.tolist() == [7, 100, 2**31 - 1] and model.W.shape == (3, 1)
    compact = CsrRows(np.array([0, 3]), np.array([0, 1, 3]), np.array([1.0, -2.0, 0.5]), 4)
    wide = CsrRows(
        np.array([0, 4]), np.array([2**31 - 1, 7, 100, 55]), np.array([0.5, 1, -2, 9.0]), 2**31
    )
    assert np.allclose(model.margins(wide), trained.margins(compact))  # 55: no coefficient
    with pytest.raises(LoomOptionError, match="loom_predict_sparse"):
        model.margins(np.ones((1, 4)))
    W, b = model.folded_over(np.array([3, 7, 2**31 - 1]))
    assert W[0] == 0 and np.allclose(W[1:], model.folded()[0][[0, 2]])
    stored = model.stored()
    back = SparseLinearModel.from_record(
        "logistic",
        model.features,
        json.loads(
            json.dumps(stored["coefficients"], default=array_json.default),
            object_hook=array_json.hook,
        ),
        model.b.tolist(),
        stored["standardization"],
        model.classes,
    )
    assert np.array_equal(back.margins(wide), model.margins(wide))
    assert back.summary()["largest"][0]["index"] in model.index.tolist()
    init = warm_start_over(model, np.array([5, 7, 100, 2**31 - 1]), 2**31)
    assert np.array_equal(init.W[[1, 2, 3]], model.W) and init.W[0] == 0
    with pytest.raises(LoomOptionError, match="no row"):
        warm_start_over(model, np.array([7, 100]), 2**31)


def test_dense_row_norms_are_each_scaled_rows_squared_length():
    rng = np.random.default_rng(4)
    table = rng.normal(3.0, 5.0, size=(300, 8))
    X = table[:, :-1]  # a layout's features: a view without the label, not contiguous
    stats = {"min": X.min(0), "max": X.max(0), "mean": X.mean(0), "std": X.std(0)}
    norms = RowNorms(stats)
    for start in range(0, 300, 64):
        norms.add(X[start : start + 64])
    norms.add(X[:0])
    assert norms.rows == 300
    for method, got in norms.summary().items():
        sq = (Scaling.from_stats(method, stats).apply(X) ** 2).sum(axis=1)
        assert got == pytest.approx({"max": sq.max(), "mean": sq.mean()}, rel=1e-12)


def test_sparse_row_norms_equal_dense_ones():
    rng = np.random.default_rng(9)
    X, R = random_csr(rng, 50, 12, zeros=False)
    X, R = np.nan_to_num(X), CsrRows(R.indptr, R.indices, np.nan_to_num(R.values), 12)
    stats = {"min": X.min(0), "max": X.max(0), "mean": X.mean(0), "std": X.std(0)}
    dense, sparse = RowNorms(stats), RowNorms(stats)
    dense.add(X[:20]), dense.add(X[20:])
    sparse.add(R[:20]), sparse.add(R[20:])
    for method, got in sparse.summary().items():
        assert got == pytest.approx(dense.summary()[method], rel=1e-12)


def test_the_power_iteration_start_is_the_dense_one_restricted_to_the_observed_columns():
    dense = np.random.default_rng(0).standard_normal(124)
    assert np.array_equal(step_size.start_vector(123, True), dense)  # unchanged dense path
    picked = step_size.start_vector(3, True, np.array([0, 5, 122]), 123)
    assert np.array_equal(picked, dense[[0, 5, 122, 123]])
    assert len(step_size.start_vector(3, False, np.array([1, 2, 3]), 2**30)) == 3


def test_catalog_arrays_round_trip_and_refuse_damage():
    value = {
        "a": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": [1.5],
        "c": np.array([0.1, -2.0]),
    }
    text = json.dumps(value, default=array_json.default)
    back = json.loads(text, object_hook=array_json.hook)
    assert np.array_equal(back["a"], value["a"]) and back["a"].dtype == np.int64
    assert np.array_equal(back["c"], value["c"]) and back["b"] == [1.5]
    entry = json.loads(text)["c"]
    for bad in (
        {**entry, "shape": [3]},
        {**entry, "dtype": "<f4"},
        {**entry, "base64": "%%%"},
        {**entry, "ndarray": 2},
        {"ndarray": 1},
    ):
        with pytest.raises(LoomFormatError):
            json.loads(json.dumps(bad), object_hook=array_json.hook)


def _array_send(values, elem: str) -> bytes:
    """PostgreSQL's array_send of a one-dimensional array (int4 'i' or float8 'd')."""
    if not values:
        return struct.pack(">iii", 0, 0, 23 if elem == "i" else 701)
    head = struct.pack(">iiiii", 1, 0, 23 if elem == "i" else 701, len(values), 1)
    size = 4 if elem == "i" else 8
    return head + b"".join(struct.pack(f">i{elem}", size, v) for v in values)


def test_packed_sparse_rows_from_postgres_decode_to_csr():
    rows = [(1.0, [3, 0, 2**31 - 1], [0.5, -1.0, 2.0]), (-1.0, [], []), (0.0, [7], [np.inf])]
    heads, bodies = b"", b""
    for label, ix, vs in rows:
        a, b = _array_send(ix, "i"), _array_send(vs, "d")
        heads += struct.pack(">dii", label, len(a), len(b))
        bodies += a + b
    y, R = decode_packed_sparse(heads, bodies, 2**31)
    assert y.tolist() == [1.0, -1.0, 0.0] and R.indptr.tolist() == [0, 3, 3, 4]
    assert R.indices.tolist() == [3, 0, 2**31 - 1, 7] and R.values.tolist() == [0.5, -1, 2, np.inf]
    lying = struct.pack(">dii", 1.0, 12, 20 + 12) + _array_send([], "i") + _array_send([1.0], "d")
    with pytest.raises(LoomDataError, match="different lengths"):
        decode_packed_sparse(lying[:16], lying[16:], 10)


def _fmix64(x: int) -> int:
    """MurmurHash3's fmix64, written independently with Python integers."""
    mask = (1 << 64) - 1
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & mask
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & mask
    return x ^ (x >> 33)


def test_the_hash_is_murmur3s_finaliser_and_crosses_are_deterministic():
    keys = [0, 1, 2**32 + 5, 2**63 + 12345, 2**64 - 1]
    assert hashing.mix64(np.array(keys, dtype=np.uint64)).tolist() == [_fmix64(k) for k in keys]
    cols = hashing.cross_columns(np.array([0, 3]), np.array([5, 122]), 20)
    expected = [2**20 + (_fmix64((i << 32) | j) & (2**20 - 1)) for i, j in [(0, 5), (3, 122)]]
    assert cols.tolist() == expected
    indexes, values = hashing.with_crosses([1, 4, 9], [2.0, 3.0, -1.0], 20)
    assert indexes[:3] == [1, 4, 9] and len(indexes) == 6 and indexes[3:] == sorted(indexes[3:])
    assert sorted(values[3:]) == [-3.0, -2.0, 6.0]
    # one bit: every cross lands in column 2 or 3, collisions summed, zero sums dropped
    indexes, values = hashing.with_crosses([0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0], 1)
    assert indexes[:4] == [0, 1, 2, 3] and set(indexes[4:]) <= {2, 3} and sum(values[4:]) == 6.0


def _zipf(**given):
    opts = {"label": "label", "rows": 3000, "columns": 2**20, "density": 1e-5, "exponent": 1.1}
    return {**opts, "seed": 42, "binary": True, **given}


def test_the_zipf_generator_is_deterministic_and_heavy_tailed():
    first = list(zipf.ZipfLoader().rows("", _zipf()))
    assert first == list(zipf.ZipfLoader().rows("-", _zipf()))
    assert first != list(zipf.ZipfLoader().rows("", _zipf(seed=43)))
    assert len(first) == 3000 and {label for label, _, _ in first} == {0.0, 1.0}
    cols = np.concatenate([np.asarray(ix) for _, ix, _ in first])
    assert all(ix == sorted(set(ix)) and ix for _, ix, _ in first)
    assert cols.min() >= 0 and cols.max() < 2**20
    counts = np.bincount(cols)
    assert counts[0] > counts[10] > counts[1000] and len(np.unique(cols)) > 5000
    assert 7 < len(cols) / 3000 < 11  # ~10.5 draws a row, a few merged
    assert zipf.ranks(np.array([0.0, 0.999999999]), 100, 1.0).tolist() == [1, 100]
    with pytest.raises(LoomOptionError, match="reads no file"):
        list(zipf.ZipfLoader().rows("/tmp/x", _zipf()))
