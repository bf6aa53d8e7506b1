"""TOC (SIGMOD 2019): the Figure 3 golden example, bit-exact round trips, operations on the
compressed form against dense numpy, the ablation order, and hostile blobs."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from loomdb.codecs import toc, toc_format
from loomdb.codecs.toc_format import HEADER, LOGICAL, ZSTD, Sections, parse, serialize
from loomdb.errors import LoomFormatError, LoomOptionError


def figure3() -> np.ndarray:
    B = np.zeros((4, 4))
    B[0] = [1.1, 2, 3, 1.4]
    B[1, :3] = [1.1, 2, 3]
    B[2, 1:] = [1.1, 3, 1.4]
    B[3, :2] = [1.1, 2]
    return B


def test_figure_3_reproduces_tables_2_and_4():
    s = toc.sections(figure3())
    # Table 2: the first layer I (1-based columns) and the codes D
    assert (s.icol + 1).tolist() == [1, 2, 3, 4, 2]
    assert s.values.tolist() == [1.1, 2.0, 3.0, 1.4] and s.ivalue.tolist() == [0, 1, 2, 3, 0]
    assert s.codes.tolist() == [1, 2, 3, 4, 6, 3, 5, 8, 6]
    assert s.starts.tolist() == [0, 4, 6, 8]
    # Table 4: the decode tree C′ rebuilt from I and D; nodes 6..10 and their parents
    parent, kcol, kval = toc.decode_tree(toc.encode(figure3()))
    assert len(parent) == 11 and parent[6:].tolist() == [1, 2, 3, 6, 5]
    sequences = {
        6: [(1, 1.1), (2, 2.0)],
        7: [(2, 2.0), (3, 3.0)],
        8: [(3, 3.0), (4, 1.4)],
        9: [(1, 1.1), (2, 2.0), (3, 3.0)],
        10: [(2, 1.1), (3, 3.0)],
    }
    for node, pairs in sequences.items():
        walk, n = [], node
        while n:
            walk.append((int(kcol[n]) + 1, float(kval[n])))
            n = int(parent[n])
        assert walk[::-1] == pairs
    # the operations visit the kept nodes only: 6 and 8 are codes, 7, 9 and 10 none reaches
    m = toc.TocMatrix.from_bytes(toc.encode(figure3()))
    assert m.nparent.tolist() == [1, 3] and m.codes.tolist() == [1, 2, 3, 4, 6, 3, 5, 7, 6]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


@settings(max_examples=80, deadline=None)
@given(
    X=arrays(
        np.float64,
        st.tuples(st.integers(1, 30), st.integers(1, 40)),
        elements=st.one_of(
            st.just(0.0),
            st.just(-0.0),
            st.just(1.0),
            st.sampled_from([2.5, -3.0, np.nan, np.inf]),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
    ),
    variant=st.sampled_from(["sparse", "sparse_logical", "full"]),
    entropy=st.sampled_from([None, "zstd"]),
)
def test_round_trip_is_bit_exact(X, variant, entropy):
    out = toc.decode(toc.encode(X, variant=variant, entropy=entropy))
    assert np.array_equal(bits(out), bits(X))  # −0.0 stays −0.0; NaN payloads survive


def test_nan_payload_and_negative_zero_survive():
    X = np.array([[-0.0, 0.0, np.nan]])
    X.view(np.uint64)[0, 2] = 0x7FF8_0000_DEAD_BEEF
    assert np.array_equal(bits(toc.decode(toc.encode(X))), bits(X))


@pytest.mark.parametrize(
    "X",
    [
        np.zeros((5, 9)),  # all-zero rows
        np.array([[0.0, 3.0, 0.0, 4.0]]),  # one row
        np.random.default_rng(0).normal(size=(7, 50)),  # fully dense rows
    ],
    ids=["zeros", "one-row", "dense"],
)
def test_edge_shapes(X):
    m = toc.TocMatrix.from_bytes(toc.encode(X))
    assert np.array_equal(m.toarray(), X)
    v = np.arange(X.shape[1], dtype=float)
    assert np.allclose(m @ v, X @ v, rtol=1e-12, atol=1e-12)


def test_rcv1_width_47236_columns():
    rng = np.random.default_rng(1)
    X = np.zeros((20, 47_236))
    X[rng.integers(0, 20, 2000), rng.integers(0, 47_236, 2000)] = rng.random(2000)
    m = toc.TocMatrix.from_bytes(toc.encode(X))
    assert np.array_equal(m.toarray(), X)
    u = rng.normal(size=20)
    assert np.allclose(u @ m, u @ X, rtol=1e-12, atol=1e-12)


def _ops_match(X: np.ndarray, rng: np.random.Generator) -> None:
    m = toc.TocMatrix.from_bytes(toc.encode(X))
    n, c = X.shape
    v, u = rng.normal(size=c), rng.normal(size=n)
    M, U = rng.normal(size=(c, 3)), rng.normal(size=(2, n))
    close = {"rtol": 1e-12, "atol": 1e-12 * max(1.0, float(np.abs(X).max(initial=0)))}
    assert np.allclose(m @ v, X @ v, **close)
    assert np.allclose(u @ m, u @ X, **close)
    assert np.allclose(m @ M, X @ M, **close)
    assert np.allclose(U @ m, U @ X, **close)
    assert np.allclose((m * 2.5).toarray(), X * 2.5, **close)
    assert np.allclose((m**2).toarray(), X**2, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    X=arrays(
        np.float64,
        st.tuples(st.integers(1, 25), st.integers(1, 30)),
        elements=st.sampled_from([0.0, 0.0, 0.0, 1.0, 2.0, -1.5, 0.25, 7.0]),
    ),
    seed=st.integers(0, 2**16),
)
def test_operations_equal_dense_on_random_batches(X, seed):
    _ops_match(X, np.random.default_rng(seed))


def test_operations_equal_dense_on_real_batches(datasets):
    from loomdb.datasets import load_a9a, load_mnist

    rng = np.random.default_rng(2)
    X, _ = load_mnist(datasets, limit=500)
    A, _ = load_a9a(datasets)
    for batch in (X[:250], X[250:500], A[:250], A[1000:1250]):
        _ops_match(batch, rng)


def _paper_products(blob: bytes, v: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A·v and v·A by Algorithms 4 and 5 as printed, in plain Python over the whole tree C′."""
    parent, kcol, kval = toc.decode_tree(blob)
    s = toc_format.parse(blob)
    codes = s.codes if s.codes is not None else np.arange(1, len(s.icol) + 1)
    ends = np.append(s.starts[1:], len(codes))
    H = [0.0] * len(parent)
    for i in range(1, len(parent)):
        H[i] = float(kval[i]) * float(v[kcol[i]]) + H[parent[i]]
    Av = []
    for a, b in zip(s.starts, ends):
        acc = 0.0
        for c in codes[a:b]:
            acc += H[c]
        Av.append(acc)
    G = [0.0] * len(parent)
    for r, (a, b) in enumerate(zip(s.starts, ends)):
        for c in codes[a:b]:
            G[c] += float(u[r])
    uA = [0.0] * s.cols
    for i in range(len(parent) - 1, 0, -1):
        uA[kcol[i]] += float(kval[i]) * G[i]
        G[parent[i]] += G[i]
    return np.array(Av), np.array(uA)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=0, max_size=23),
    cols=st.integers(12, 40),
    seed=st.integers(0, 2**16),
)
def test_products_add_in_the_papers_order(lengths, cols, seed):
    """The pruned tree, the four-row sums, the packed pairs and the unsigned indexes change
    how the additions are scheduled, never their order: the same bits as Algorithms 4 and 5
    over all of C′ (rows of any length, empty ones and row counts that are not a multiple of
    four included, and −0.0 among the stored values and products)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((len(lengths), cols))
    for r, k in enumerate(lengths):
        X[r, rng.choice(cols, k, replace=False)] = rng.choice([0.1, 0.7, -1.3, 1e-3, 2.0, -0.0], k)
    blob = toc.encode(X)
    m = toc.TocMatrix.from_bytes(blob)
    v, u = rng.normal(size=cols), rng.normal(size=len(lengths))
    v[rng.random(cols) < 0.2] = 0.0  # products of −0.0: signed zeros in the partial sums
    Av, uA = _paper_products(blob, v, u)
    assert bits(m @ v).tobytes() == bits(Av).tobytes()
    assert bits(u @ m).tobytes() == bits(uA).tobytes()


def test_products_add_in_the_papers_order_on_mnist(datasets):
    from loomdb.datasets import load_mnist

    X, _ = load_mnist(datasets, limit=250)
    rng = np.random.default_rng(4)
    blob = toc.encode(X)
    v, u = rng.normal(size=X.shape[1]), rng.normal(size=X.shape[0])
    m = toc.TocMatrix.from_bytes(blob)
    Av, uA = _paper_products(blob, v, u)
    assert bits(m @ v).tobytes() == bits(Av).tobytes()
    assert bits(u @ m).tobytes() == bits(uA).tobytes()


def test_pairs_past_32_bits_are_read_as_64_bit_pairs():
    """A first-layer pair packs its value's index above its column's bits; where the two need
    more than 32 bits (2^19 columns, 18,000 distinct values) the reader packs 64-bit pairs: the
    same bits as the paper's passes, and the fused steps leave such a batch to the per-batch
    path."""
    from loomdb.learn import fused_steps
    from loomdb.seams import Batch

    rng = np.random.default_rng(5)
    rows, cols, per_row = 20, 1 << 19, 900

    def columns(width: int) -> np.ndarray:
        each = [np.sort(rng.choice(width, per_row, replace=False)) for _ in range(rows)]
        return np.concatenate(each)

    indices = columns(cols)
    values = rng.permutation(rows * per_row) / 7.0 + 1.0  # every value distinct
    indptr = np.arange(rows + 1) * per_row
    blob = toc.encode_csr(indptr, indices, values, cols)
    m = toc.TocMatrix.from_bytes(blob)
    assert m.pairs.dtype == np.uint64 and len(m.table) == rows * per_row
    v, u = rng.normal(size=cols), rng.normal(size=rows)
    Av, uA = _paper_products(blob, v, u)
    assert bits(m @ v).tobytes() == bits(Av).tobytes()
    assert bits(u @ m).tobytes() == bits(uA).tobytes()
    assert fused_steps.payload_of(Batch(m, np.zeros(rows)), 1) is None
    narrow = toc.TocMatrix.from_bytes(toc.encode_csr(indptr, columns(1024), values, 1024))
    assert narrow.pairs.dtype == np.uint32
    assert fused_steps.payload_of(Batch(narrow, np.zeros(rows)), 1) == fused_steps.TOC
    # wider than 64 bits needs 2^38 distinct values in one blob: said so, not as another fault
    assert "more than 63 bits" in toc._fault(toc.WIDE, 0, 0, 0).message


def census_like(rows: int = 250, seed: int = 0) -> np.ndarray:
    """Low-cardinality categoricals, one-hot, plus a few small integer columns."""
    rng = np.random.default_rng(seed)
    blocks = []
    for card in (2, 3, 5, 7, 9, 16, 4, 6):
        onehot = np.zeros((rows, card))
        onehot[np.arange(rows), rng.integers(0, min(card, 3), rows)] = 1.0
        blocks.append(onehot)
    blocks.append(rng.integers(0, 5, (rows, 4)).astype(float))
    return np.hstack(blocks)


def test_ablation_order_on_census_like_data():
    X = census_like()
    size = {v: len(toc.encode(X, variant=v)) for v in toc.VARIANTS}
    assert size["sparse"] > size["sparse_logical"] > size["full"]


def test_bad_arguments():
    with pytest.raises(LoomOptionError):
        toc.encode(np.zeros(5))
    with pytest.raises(LoomOptionError):
        toc.encode(np.zeros((2, 2)), variant="best")
    with pytest.raises(LoomOptionError):
        toc.encode(np.zeros((2, 2)), entropy="gzip")
    m = toc.TocMatrix.from_bytes(toc.encode(np.ones((2, 3))))
    with pytest.raises(LoomOptionError):
        m @ np.ones(4)


# ---- hostile blobs: always LoomFormatError, never a crash, hang or huge allocation ----
# (truncations, byte mutations and random bytes of every variant: tests/unit/test_codecs.py)

GOOD = toc.encode(np.random.default_rng(3).integers(0, 3, (30, 20)).astype(float))


def _with_header(blob: bytes = GOOD, **fields) -> bytes:
    magic, version, flags, r1, r2, rows, cols = HEADER.unpack_from(blob)
    values = {"magic": magic, "version": version, "flags": flags, "rows": rows, "cols": cols}
    values.update(fields)
    head = HEADER.pack(
        values["magic"], values["version"], values["flags"], r1, r2, values["rows"], values["cols"]
    )
    return head + blob[HEADER.size :]


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_with_header(version=9), "version 9"),
        (_with_header(magic=b"XYZ"), "not a TOC blob"),
        (_with_header(flags=0x40), "unknown flags"),
        (_with_header(rows=2**31), "2,147,483,648 rows"),
        (_with_header(rows=31), "30 row lengths for 31 rows"),
        (_with_header(cols=19), "names column 19 of 19"),
        (_with_header(cols=1), "I.col claims 40 entries; its header's shape allows at most 30"),
        (GOOD[: HEADER.size] + struct.pack("<IB", 600, 4), "truncated"),
        (GOOD[: HEADER.size] + struct.pack("<IB", 1, 0) + b"\0" * 64, "width 0"),
        (GOOD[: HEADER.size] + struct.pack("<IB", 1, 7) + b"\0" * 64, "width 7"),
        (GOOD + b"\0", "1 bytes after its last section"),
    ],
)
def test_hostile_headers(blob, message):
    with pytest.raises(LoomFormatError, match=message):
        parse(blob)


def test_a_header_claiming_a_huge_width_is_rejected():
    # found by the atheris run: 433 bytes claiming 270M columns made v·A allocate 2 GB
    blob = bytearray(GOOD)
    blob[12:16] = (0x10200014).to_bytes(4, "little")
    with pytest.raises(LoomFormatError, match="270,532,628 columns"):
        toc.TocMatrix.from_bytes(bytes(blob))


def test_codes_pointing_forward_are_rejected():
    s = toc.sections(figure3())
    s.codes = s.codes.copy()
    s.codes[0] = 10  # node 10 does not exist yet when row 1 is decoded
    with pytest.raises(LoomFormatError, match="row 0 has code 10, which points forward"):
        toc.TocMatrix.from_bytes(serialize(s))


def _blob(icol, values, lengths, codes=None, cols=4) -> bytes:
    """A TOC blob built by hand (no value index; LZW codes when given)."""
    rows = len(lengths)
    starts = np.cumsum(lengths) - np.asarray(lengths)
    flags = LOGICAL if codes is not None else 0
    codes = None if codes is None else np.asarray(codes)
    return serialize(
        Sections(
            rows, cols, flags, np.asarray(icol), np.asarray(values, float), None, codes, starts
        )
    )


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        # TOC_SPARSE: row 0 holds (column 1, 2.0) and (column 1, 3.0)
        (_blob([1, 1], [2.0, 3.0], [2]), "row 0 names column 1 twice"),
        # LZW codes: the first layer has column 0 twice, and row 0 uses both pairs
        (_blob([0, 0], [1.0, 2.0], [2], codes=[1, 2]), "row 0 names column 0 twice"),
        # row 0 (codes 1, 2) makes node 3 = [col 0, col 1]; row 1 repeats column 1 after it
        (_blob([0, 1], [1.0, 2.0], [2, 2], codes=[1, 2, 3, 2]), "row 1 names column 1 twice"),
        # ... or goes back to column 0 after it
        (_blob([0, 1], [1.0, 2.0], [2, 2], codes=[1, 2, 3, 1]), "column 0 after column 1"),
        (_blob([2, 1], [1.0, 2.0], [2]), "row 0 names column 1 after column 2"),
    ],
    ids=["sparse", "first-layer", "node-then-twice", "node-then-back", "decreasing"],
)
def test_a_row_naming_a_column_twice_is_rejected(blob, message):
    # toarray assigns such a row's pairs (the last wins) while the products add them: the two
    # disagreed silently before the tree build checked that columns strictly increase
    with pytest.raises(LoomFormatError, match=message):
        toc.TocMatrix.from_bytes(blob)


def test_a_first_layer_pair_no_row_uses_is_rejected():
    # found by `loomdb fuzz toc`: this blob decodes to zeros, but v·A gave NaN in column 0 (the
    # backward pass adds the unused pair's value times zero, and NaN · 0 is NaN)
    blob = _blob([0, 1], [np.nan, 1.0], [1], codes=[2])
    with pytest.raises(LoomFormatError, match="pair 0 of the first layer .column 0. starts no"):
        toc.TocMatrix.from_bytes(blob)


def test_a_batch_without_rows_has_none():
    # parse used to give a 0-row blob one row start, so its matrix had a phantom row and v·A read
    # past the end of v
    m = toc.TocMatrix.from_bytes(toc.encode(np.zeros((0, 3))))
    assert m.shape == (0, 3) and (m @ np.ones(3)).shape == (0,)
    assert (np.ones(0) @ m).tolist() == [0.0, 0.0, 0.0] and m.toarray().shape == (0, 3)


# ---- the zstd stage: inflated under a cap from the header, never by the frame's claim ----


def _frame(claim: int | None, blocks: int, block: int = 1 << 17, single: bool = True) -> bytes:
    """A zstd frame by hand: its content-size claim, then ``blocks`` RLE blocks of ``block``."""
    magic = (0xFD2FB528).to_bytes(4, "little")
    if claim is None:  # no content size: a window descriptor instead (128 KiB)
        head = bytes([0x00, 7 << 3])
    elif single:  # single segment, 8-byte content size
        head = bytes([0xE0]) + claim.to_bytes(8, "little")
    else:
        head = bytes([0xC0, 7 << 3]) + claim.to_bytes(8, "little")
    body = b"".join(
        (int(i == blocks - 1) | 1 << 1 | block << 3).to_bytes(3, "little") + b"\x01"
        for i in range(blocks)
    )
    return magic + head + body


def _zstd_blob(frame: bytes, rows: int = 30, cols: int = 20) -> bytes:
    return HEADER.pack(b"TOC", 1, ZSTD, 0, 0, rows, cols) + frame


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        # found by review: ZstdDecompressor.decompress trusted this claim and raised MemoryError
        (_frame(1 << 40, 1), "claims 1,099,511,627,776 bytes; its header allows at most 12,"),
        (_frame(None, 1), "does not state its size"),
        (_frame(100, 64, single=False), "zstd"),  # claims 100 bytes, inflates to 8 MiB
        (_frame(4096, 1, block=4096) + _frame(4096, 1, block=4096), "another frame"),
        (_frame(8192, 1, block=8192) * 3, "inflates past 12,144 bytes"),  # each claim is small
        (b"\x28\xb5\x2f\xfd\xff", "cannot be read"),
    ],
    ids=["huge-claim", "no-size", "lying-claim", "two-frames", "many-frames", "broken"],
)
def test_hostile_zstd_frames(frame, message):
    with pytest.raises(LoomFormatError, match=message):
        parse(_zstd_blob(frame))


def test_a_zstd_blob_may_not_inflate_past_what_its_shape_holds():
    good = toc.encode(np.random.default_rng(4).normal(size=(30, 20)), entropy="zstd")
    with pytest.raises(LoomFormatError, match="its header allows at most 48"):
        parse(_with_header(good, rows=1, cols=1))


def test_writers_refuse_what_readers_would_refuse(monkeypatch):
    with pytest.raises(LoomOptionError, match="4,194,304 rows"):
        toc.encode(np.zeros((toc_format.MAX_ROWS + 1, 1)))
    monkeypatch.setattr(toc_format, "MAX_INFLATED", 100)
    with pytest.raises(LoomOptionError, match="too large for the zstd stage"):
        toc.encode(np.arange(1.0, 101.0).reshape(10, 10), entropy="zstd")
    toc.encode(np.arange(1.0, 101.0).reshape(10, 10))  # without the stage there is no cap


def _sorted_first_appearance(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(1, len(uniq) + 1)
    return uniq[order], rank[inverse.ravel()]


@pytest.mark.parametrize(
    "keys",
    [
        np.random.default_rng(0).random(5000).view(np.uint64),  # all distinct
        np.random.default_rng(1).integers(0, 7, 5000).astype(np.float64).view(np.uint64),
        np.array([np.nan, -0.0, 0.5, np.nan, -np.nan, 0.5]).view(np.uint64),
        np.array([2**64 - 1, 0, 2**64 - 1, 1], dtype=np.uint64),  # no key is a sentinel
        np.random.default_rng(2).integers(-50, 50, 3000),  # int64 pair keys
        np.array([], dtype=np.uint64),
    ],
)
def test_first_appearance_is_what_sorting_gives(keys: np.ndarray) -> None:
    from loomdb.codecs.toc_kernels import first_appearance

    distinct, ids = first_appearance(keys)
    want_distinct, want_ids = _sorted_first_appearance(keys)
    assert distinct.dtype == keys.dtype
    assert np.array_equal(distinct, want_distinct) and np.array_equal(ids, want_ids)
