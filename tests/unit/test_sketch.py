"""SketchML's gradient codec and its baselines (loomdb.codecs.sketch): the promises of §3 on
gradients large enough to be randomised, the sizes of §3.5 to the byte, every edge case of the
digest, and what encoding refuses.  Round trips against a scalar reference, hostile bytes and
fixtures: test_codecs.py (the codec kit)."""

from __future__ import annotations

import struct
import sys

import numpy as np
import pytest

from loomdb.codecs import sketch, sketch_format
from loomdb.codecs.sketch_quantile import plan
from loomdb.errors import LoomDataError, LoomFormatError, LoomOptionError, LoomStateError

METHODS = list(sketch.METHODS)


def zipf_gradient(d: int, density: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Keys at ``density`` (uniformly spread), heavy-tailed values of both signs, some ties."""
    rng = np.random.default_rng(seed)
    keys = np.sort(rng.choice(int(d / density), d, replace=False))
    values = rng.choice([-1.0, 1.0], d) * np.minimum(rng.zipf(1.5, d), 500) * rng.random(d) / 500
    return keys, values


def planned(codec, keys, values, seed=3):
    """A message written from a plan the test keeps (the true bucket of every value)."""
    p = plan(values, codec.q, codec.r, codec.k)
    return sketch_format.header(codec.name, keys, seed) + codec.write(keys, p, seed), p


@pytest.fixture(scope="module")
def big():
    keys, values = zipf_gradient(20_000, 0.1)
    values[::97] = 0.0
    blob, p = planned(sketch.METHODS["sketchml"], keys, values)
    return keys, values, blob, p


def test_the_registry_names_every_method_and_is_read_only():
    assert METHODS == ["none", "keys", "zipml8", "zipml16", "quantile", "sketchml"]
    with pytest.raises(TypeError):
        sketch.METHODS["mine"] = sketch.METHODS["none"]  # type: ignore[index]
    with pytest.raises(LoomOptionError, match="unknown gradient codec 'gzip'; choose from none"):
        sketch.get("gzip")
    assert [sketch.METHODS[m].lossless for m in METHODS] == [True, True] + [False] * 4


def test_sketchml_keeps_signs_magnitudes_and_groups(big):
    keys, values, blob, p = big
    got_keys, got = sketch.decode(blob)
    assert got_keys.dtype == np.int64 and (got_keys == keys).all()  # keys bit-exact
    assert (np.sign(got) == np.sign(values)).all()  # 100% sign agreement, zeros stay 0.0
    nz = p.index >= 0
    own = p.reps[p.index[nz]]  # the value's own bucket's representative
    first = p.reps[p.index[nz] // p.group * p.group]  # its group's bucket nearest zero
    assert (np.abs(got[nz]) <= np.abs(own)).all()  # never above its bucket's
    assert (np.abs(got[nz]) >= np.abs(first)).all()  # index error < q/r: same group
    assert np.isin(got[nz], p.reps).all()
    assert (np.abs(got[nz]) < np.abs(own)).mean() > 0.2  # the sketch does lose (t = d/5)


def test_quantisation_alone_decodes_to_the_own_bucket(big):
    keys, values, _, _ = big
    blob, p = planned(sketch.METHODS["quantile"], keys, values)
    got_keys, got = sketch.decode(blob)
    assert (got_keys == keys).all()
    assert (got == np.where(p.index >= 0, p.reps[p.index], 0.0)).all()


def test_buckets_hold_equal_counts_and_q_is_divided_by_sign(big):
    _, values, _, p = big
    counts = np.bincount(p.index[p.index >= 0], minlength=256)
    n_neg = (values < 0).sum()
    assert (p.r_neg, p.r_pos) == (round(8 * n_neg / (values != 0).sum()), 8 - p.r_neg)
    assert (
        len(p.reps) == 256
        and (p.reps[: p.r_neg * 32] < 0).all()
        and (p.reps[p.r_neg * 32 :] > 0).all()
    )
    nonempty = counts[counts > 0]
    assert nonempty.max() < 4 * np.median(nonempty)  # heavy ties may merge, never pile up


def delta_bytes(keys: np.ndarray) -> int:
    """Bytes of a delta-binary list computed from §3.4 (flags + 1/2/3/4-byte deltas)."""
    deltas = np.diff(keys, prepend=0)
    widths = 1 + (deltas >= 1 << 8) + (deltas >= 1 << 16) + (deltas >= 1 << 24)
    return -(-len(keys) // 4) + int(widths.sum())


def test_the_message_size_is_the_sum_of_its_parts(big):
    keys, values, blob, p = big
    group = np.where(p.index >= 0, p.index // 32, -1)
    size = 16 + 8 + 8 * 256  # header, params, the q representatives
    for g in range(8):
        n = int((group == g).sum())
        size += 8 + delta_bytes(keys[group == g]) + 2 * -(-n // 5)  # s = 2 rows of t = n/5
    size += delta_bytes(keys[group < 0])  # the zero-valued keys
    assert len(blob) == size
    parts = sketch.breakdown(blob)
    assert sum(parts.values()) == len(blob) and parts["means"] == 8 * 256
    assert parts["sketch"] == sum(2 * -(-int((group == g).sum()) // 5) for g in range(8))


def test_the_paper_size_formula_holds_at_10_percent_density():
    keys, values = zipf_gradient(50_000, 0.1, seed=1)
    d, D = len(keys), int(keys[-1]) + 1
    blob = sketch.encode(keys, values, seed=1)
    formula = d * (np.ceil(np.log2(8 * D / d) / 8) + 0.25) + 8 * 256 + 2 * (d / 5) * 1
    assert 1.0 <= len(blob) / formula < 1.05  # the formula counts 1 byte a delta; a few need 2
    assert 6.8 < 12 * d / len(blob) < 7.3  # the paper: 7.24x on KDD10's clustered keys


def test_raw_pairs_take_12_bytes_and_wide_keys_16():
    keys, values = zipf_gradient(1000, 0.5)
    assert len(sketch.encode(keys, values, method="none")) == 16 + 12 * 1000
    assert len(sketch.encode(keys + 2**32, values, method="none")) == 16 + 16 * 1000
    assert len(sketch.encode(keys, values, method="zipml8")) == 16 + 8 + 5 * 1000
    assert len(sketch.encode(keys, values, method="zipml16")) == 16 + 8 + 6 * 1000


def test_delta_binary_bytes_are_the_papers():
    blob = sketch.encode([5, 300, 70_000, 70_001 + 2**24], [1.0] * 4, method="keys")
    # deltas 5, 295, 69700, 16777217: widths 1, 2, 3, 4 → flags 00 01 10 11 (low bits first)
    assert blob[16:27] == bytes([0b11100100, 5, 0x27, 0x01, 0x44, 0x10, 0x01, 1, 0, 0, 1])
    dense = np.arange(1000)
    assert sketch.breakdown(sketch.encode(dense, np.ones(1000), method="keys"))["keys"] == 1250


def test_keys_past_2_to_the_32_are_wide_and_exact():
    keys = np.array([1, 2**32 - 1, 2**32, 2**32 + 1, 2**50, 2**63 - 1], dtype=np.uint64)
    values = np.array([0.5, -0.5, 1.5, 0.0, -2.0, 3.0])
    for method in METHODS:
        blob = sketch.encode(keys, values, method=method)
        assert blob[4] == sketch_format.WIDE
        got, _ = sketch.decode(blob)
        assert got.dtype == np.int64 and (got == keys.astype(np.int64)).all(), method
    assert sketch.encode(keys[:2], values[:2], method="keys")[4] == 0
    blob = sketch.encode([1, 1 + 2**32], [1.0, 1.0], method="keys")  # delta 2**32: 8 bytes, 11
    assert blob[16:26] == bytes([0b1100, 1, 0, 0, 0, 0, 1, 0, 0, 0])


@pytest.mark.parametrize("method", METHODS)
def test_no_key_one_key_and_zeros(method):
    for keys, values in [([], []), ([9], [-0.125]), ([1, 2, 3], [0.0, -0.0, 0.0])]:
        got_keys, got = sketch.decode(sketch.encode(keys, values, method=method))
        assert got_keys.dtype == np.int64 and got.dtype == np.float64
        assert got_keys.tolist() == keys
        lossless = sketch.METHODS[method].lossless
        want = np.array(values, dtype=np.float64) if lossless else np.abs(values) * np.sign(values)
        assert got.tobytes() == np.asarray(want, dtype=np.float64).tobytes()
    assert len(sketch.encode([], [], method=method)) == 16 + {"none": 0, "keys": 0}.get(
        method, 8 if method.startswith("zipml") else 8 + 4 * (method == "quantile")
    )


def test_one_sign_takes_every_group():
    keys, values = zipf_gradient(3000, 0.2)
    blob = sketch.encode(keys, -np.abs(values))
    q, r, s, r_neg, r_pos, _ = struct.unpack_from("<HBBBBH", blob, 16)
    assert (q, r, s, r_neg, r_pos) == (256, 8, 2, 8, 0)
    _, got = sketch.decode(blob)
    assert (got < 0).all() and (got >= -np.abs(values).max()).all()


def test_fewer_values_than_buckets_and_ties_decode_exactly():
    values = np.array([-3.0, -1e-9, 0.0, 2e-300, 0.5, 0.7, 0.7, 1e300])
    for method in ("quantile", "sketchml"):
        got = sketch.decode(sketch.encode(np.arange(8), values, method=method))[1]
        if method == "quantile":  # every value has a zero-width bucket [v, v] of its own
            assert (got == values).all()
        assert (np.sign(got) == np.sign(values)).all() and (np.abs(got) <= np.abs(values)).all()
    ties = np.full(5000, -0.375)
    assert (sketch.decode(sketch.encode(np.arange(5000), ties))[1] == ties).all()


def test_the_seed_travels_and_changes_the_hashes():
    keys, values = zipf_gradient(2000, 0.1)
    a, b = sketch.encode(keys, values, seed=1), sketch.encode(keys, values, seed=2)
    assert struct.unpack_from("<I", a, 8) == (1,) and a != b
    assert (sketch.decode(a)[0] == sketch.decode(b)[0]).all()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("keys", "values", "error", "message"),
    [
        ([1, 2], [0.5, np.nan], LoomDataError, "the value of key 2 is nan"),
        ([1, 2], [np.inf, 0.5], LoomDataError, "the value of key 1 is inf"),
        (
            [1, 3, 2],
            [1, 1, 1],
            LoomDataError,
            r"keys\[2\] = 2 follows keys\[1\] = 3 \(out of order",
        ),
        ([1, 1], [1, 1], LoomDataError, r"\(a duplicate\)"),
        ([-1, 2], [1, 1], LoomDataError, r"keys must be in \[0, 2\*\*63\); got -1"),
        (np.array([2**63], np.uint64), [1], LoomDataError, "got 9223372036854775808"),
        ([1.0, 2.0], [1, 1], LoomOptionError, "keys must be integers"),
        ([1, 2], [1], LoomOptionError, "two 1-D arrays of equal length"),
        ([[1, 2]], [[1, 2]], LoomOptionError, "two 1-D arrays"),
        ([1], ["x"], LoomOptionError, "values must be real numbers"),
    ],
)
def test_encoding_refuses_what_is_not_a_sparse_gradient(method, keys, values, error, message):
    with pytest.raises(error, match=message) as info:
        sketch.encode(keys, values, method=method)
    assert info.value.hint  # what to do, as every refusal says


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "7"])
def test_a_bad_seed_is_an_option_error(seed):
    with pytest.raises(LoomOptionError, match="seed must be an integer") as info:
        sketch.encode([1], [1.0], seed=seed)
    assert info.value.hint


@pytest.mark.parametrize(
    "make",
    [
        lambda: sketch.SketchML(q=100),  # not a multiple of r
        lambda: sketch.SketchML(q=1024, r=2),  # groups of 512 buckets
        lambda: sketch.SketchML(r=1, q=8),
        lambda: sketch.SketchML(s=0),
        lambda: sketch.SketchML(columns=0),
        lambda: sketch.Quantile(k=100),
    ],
)
def test_bad_parameters_are_option_errors(make):
    with pytest.raises(LoomOptionError) as info:
        make()
    assert info.value.hint


def test_the_fewest_columns_still_write_a_message_that_decodes():
    """``columns`` is kept to 1/1000: below that a group would get no column, and the
    message written would be one decoding refuses; so it is refused when made."""
    with pytest.raises(LoomOptionError, match=r"must be in \[0\.001, 16\]"):
        sketch.SketchML(columns=1e-9)
    keys = np.arange(3000, dtype=np.int64) * 7
    values = np.random.default_rng(4).normal(size=3000)
    got_keys, got = sketch.decode(sketch.SketchML(columns=0.001).encode(keys, values, seed=2))
    assert np.array_equal(got_keys, keys) and np.array_equal(np.sign(got), np.sign(values))


def test_decoding_needs_no_datasketches(monkeypatch):
    blob = sketch.encode([1, 5], [0.5, -0.5])
    monkeypatch.setitem(sys.modules, "datasketches", None)
    assert sketch.decode(blob)[1].tolist() == [0.5, -0.5]
    with pytest.raises(LoomStateError) as info:
        sketch.encode([1, 5], [0.5, -0.5])
    assert info.value.hint == "pip install datasketches"


def test_a_codec_decodes_only_its_own_method():
    blob = sketch.encode([1], [1.0], method="zipml8")
    assert sketch.method_of(blob) == "zipml8"
    with pytest.raises(LoomFormatError, match="a zipml8 gradient message given to the decoder"):
        sketch.METHODS["sketchml"].decode(blob)


def _patch(blob: bytes, at: int, new: bytes) -> bytes:
    return blob[:at] + new + blob[at + len(new) :]


def hostile() -> dict[str, bytes]:
    sk = sketch.encode(np.arange(10), np.linspace(-1, 1, 10), method="sketchml")
    reps = 24  # the representatives start after header and params
    group0 = reps + 8 * 256  # group 0's n, t
    return {
        "d claims 2**32 - 1 keys": _patch(
            sketch.encode([1], [1.0], method="keys"), 12, b"\xff" * 4
        ),
        "a trailing byte": sketch.encode([1], [1.0], method="none") + b"\x00",
        "version 2": _patch(sketch.encode([1], [1.0]), 2, b"\x02"),
        "an unknown flag": _patch(sketch.encode([1], [1.0]), 4, b"\x02"),
        "WIDE without a wide key": _patch(sketch.encode([1], [1.0], method="none"), 4, b"\x01"),
        "a raw key repeated": _patch(sketch.encode([1, 2], [1.0, 1.0], method="none"), 20, b"\x01"),
        "a NaN value": _patch(sketch.encode([1], [1.0], method="keys"), 24, b"\xf8\x7f"),
        "a zero delta": _patch(sketch.encode([1, 2], [1.0, 1.0], method="keys"), 18, b"\x00"),
        "a ZipML level past 127": _patch(sketch.encode([1], [1.0], method="zipml8"), 28, b"\x80"),
        "a negative ZipML scale": _patch(sketch.encode([1], [1.0], method="zipml8"), 27, b"\xbf"),
        "representatives out of order": _patch(sk, reps, struct.pack("<d", -5.0)),
        "a positive representative among the negatives": _patch(sk, reps, struct.pack("<d", 1.0)),
        "a group of 2**32 - 1 keys": _patch(sk, group0, b"\xff\xff\xff\xff"),
        "a group of 2**32 - 1 columns": _patch(sk, group0 + 4, b"\xff\xff\xff\xff"),
        "a cell past the group": sk[:-2] + b"\xff" + sk[-1:],
        "groups that do not add up": _patch(sk, 16 + 4, b"\x03"),
    }


@pytest.mark.parametrize("name", list(hostile()))
def test_hostile_messages_are_format_errors(name):
    with pytest.raises(LoomFormatError) as info:
        sketch.decode(hostile()[name])
    assert info.value.hint


@pytest.mark.parametrize("blob", [None, "text", 42, memoryview(b"abcdefgh")[::2]])
def test_a_message_that_is_not_bytes_is_a_format_error(blob):
    with pytest.raises(LoomFormatError):
        sketch.decode(blob)


def test_every_truncation_of_a_default_message_is_refused():
    keys, values = zipf_gradient(300, 0.1)
    blob = sketch.encode(keys, values)
    for cut in range(0, len(blob), 7):
        with pytest.raises(LoomFormatError):
            sketch.decode(blob[:cut])


def test_the_bench_measures_what_the_codecs_write():
    from loomdb.bench.sketch import CHAIN, Case, _tables, measure

    keys, values = zipf_gradient(3000, 0.1)
    case = Case("tiny", 0.1, [(keys, values), (keys[:1000], values[:1000])])
    by = {m: measure(case, m, repeat=1) for m in CHAIN}
    assert (
        by["none"]["bytes"] == 16 + 12 * 2000
        and by["none"]["per key"] == by["none"]["bytes"] / 2000
    )
    assert by["sketchml"]["sign"] == 1.0 and by["keys"]["rel"] == 0.0
    chain, full = _tables([(case, by)])
    assert chain.rows[0][3:6] == [by["none"]["bytes"] / by[m]["bytes"] for m in CHAIN[1:4]]
    assert len(full.rows) == len(CHAIN)
