"""An encoding as the catalog keeps it: hashed columns round-trip, old records stay one-hot."""

from __future__ import annotations

import hashlib

from loomdb.store import encoding as encodings
from loomdb.store.encoding import Encoded


def test_a_hashed_column_round_trips_through_its_record():
    hashed = Encoded("city", "text", buckets=64)
    assert hashed.names() == [f"city#{j}" for j in range(64)]
    assert Encoded.from_dict(hashed.to_dict()) == hashed


def test_a_record_without_encode_loads_as_one_hot():
    old = {"column": "c", "kind": "text", "categories": ["a", "b"], "other": True}
    loaded = Encoded.from_dict(old)
    assert not loaded.hashed and loaded.names() == ["c=a", "c=b", "c=<other>"]
    assert loaded.to_dict() == old


def test_a_bucket_is_the_md5_prefix_modulo_the_buckets():
    for value in ["", "it's", "東京", "😀"]:
        digest = hashlib.md5(value.encode("utf-8")).hexdigest()
        for n in (1, 7, 65536):
            assert encodings.bucket(value, n) == int(digest[: encodings.HEX_DIGITS], 16) % n


def test_apply_puts_one_in_the_bucket_and_nothing_for_null():
    hashed = Encoded("city", "text", buckets=5)
    out = hashed.apply(["x", None, "y"])
    assert out.shape == (3, 5) and out.sum(axis=1).tolist() == [1.0, 0.0, 1.0]
    assert out[0, encodings.bucket("x", 5)] == 1.0
