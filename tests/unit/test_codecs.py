"""Every codec runs the kit (``codec_kit``): round trip, malformed input, committed fixtures."""

from __future__ import annotations

import os

import codec_kit as kit
import numpy as np
import pytest
from codec_cases import CODECS
from hypothesis import given, settings
from hypothesis import strategies as st

from loomdb.codecs import weave
from loomdb.errors import LoomFormatError

NAMES = sorted(CODECS)


def small_blobs(name: str):
    """(id, blob, shape) of each example in each variant: the kit's malformed-input subjects."""
    codec = CODECS[name]
    for example, X in codec.examples().items():
        for variant in codec.variants:
            yield f"{example}-{variant}", codec.encode(X, variant), X.shape


CASES = [(name, *case) for name in NAMES for case in small_blobs(name)]
IDS = [f"{name}-{case_id}" for name, case_id, _, _ in CASES]


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_of_the_examples(name):
    codec = CODECS[name]
    for X in codec.examples().values():
        for variant in codec.variants:
            kit.check_round_trip(codec, X, variant)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_is_bit_exact(name, data):
    codec = CODECS[name]
    X = data.draw(codec.arrays)
    kit.check_round_trip(codec, X, data.draw(st.sampled_from(codec.variants)))


@pytest.mark.parametrize(("name", "case", "blob", "shape"), CASES, ids=IDS)
def test_every_truncation_is_rejected(name, case, blob, shape):
    kit.check_truncations(CODECS[name], blob, shape)


@pytest.mark.parametrize(("name", "case", "blob", "shape"), CASES, ids=IDS)
def test_single_byte_mutations_are_rejected_or_safe(name, case, blob, shape):
    kit.check_mutations(CODECS[name], blob, shape)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=400))
def test_random_bytes_are_rejected_or_safe(name, blob):
    codec = CODECS[name]
    shape = (9, 65) if name == "weave" else next(iter(codec.examples().values())).shape
    kit.rejects_or_uses(codec, blob, shape)


NOT_BYTES = [None, "text", 42, [1, 2], memoryview(b"abcdef")[::2]]


@pytest.mark.parametrize("name", ["dense", "toc", "pcr"])
@pytest.mark.parametrize("blob", NOT_BYTES)
def test_a_record_that_is_not_bytes_is_a_format_error(name, blob):
    with pytest.raises(LoomFormatError):
        CODECS[name].use(blob, (8, 64))


@pytest.mark.parametrize("plane", NOT_BYTES)
def test_planes_that_are_not_bytes_are_a_format_error(plane):
    with pytest.raises(LoomFormatError):
        weave.unweave(plane, 8, 64, 1)  # not a sequence of planes (or one too short)
    with pytest.raises(LoomFormatError):
        weave.unweave([plane], 8, 64, 1)
    with pytest.raises(LoomFormatError):
        weave.WovenMatrix([plane], 8, 64, 1)


@pytest.mark.parametrize("name", NAMES)
def test_committed_fixtures_of_every_version_decode(name):
    codec = CODECS[name]
    if os.environ.get("LOOMDB_WRITE_FIXTURES"):
        kit.write_missing_fixtures(codec)
    assert kit.check_fixtures(codec) > 0


def test_fixtures_are_never_overwritten(tmp_path, monkeypatch):
    monkeypatch.setattr(kit, "FIXTURES", tmp_path)
    codec = CODECS["dense"]
    first = kit.write_missing_fixtures(codec)
    assert first and all(p.exists() for p in first)
    first[0].write_bytes(b"edited by hand")
    assert kit.write_missing_fixtures(codec) == []
    assert first[0].read_bytes() == b"edited by hand"


def test_a_fixture_that_stops_decoding_fails_the_kit(tmp_path, monkeypatch):
    monkeypatch.setattr(kit, "FIXTURES", tmp_path)
    codec = CODECS["toc"]
    path = kit.write_missing_fixtures(codec)[0]
    np.save(path.with_suffix(".npy"), np.ones((1, 1)))
    with pytest.raises(AssertionError, match="no longer decodes"):
        kit.check_fixtures(codec)
