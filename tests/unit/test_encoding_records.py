"""An encoding as the catalog keeps it: hashed columns round-trip, old records stay one-hot, a
one-hot column's counts order its CASEs and nothing else."""

from __future__ import annotations

import hashlib

import pytest

from loomdb.errors import LoomFormatError
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


def test_a_columns_cases_test_its_most_frequent_categories_first():
    counted = Encoded("c", "text", ("a", "b", "c", "d"), other=True, counts=(3, 40, 3, 7))
    record = counted.to_dict()
    assert record["counts"] == [3, 40, 3, 7]
    assert Encoded.from_dict(record).counts == counted.counts
    assert counted == Encoded("c", "text", ("a", "b", "c", "d"), other=True)  # same features

    def order(sql: str) -> list[str]:
        return sorted("abcd", key=lambda v: sql.index(f"'{v}'"))

    weights = [0.5, -1.0, 2.0, 0.25, 1.5]
    assert order(counted.weighted_sql(weights, "FLOAT8", "postgres")) == ["b", "d", "a", "c"]
    assert order(counted.code_sql("FLOAT8", "postgres")) == ["b", "d", "a", "c"]
    uncounted = Encoded("c", "text", ("a", "b", "c", "d"), other=True)
    assert order(uncounted.weighted_sql(weights, "FLOAT8", "postgres")) == ["a", "b", "c", "d"]


def test_counts_for_other_categories_than_the_encodings_are_refused():
    record = Encoded("c", "text", ("a", "b"), counts=(1, 2)).to_dict()
    record["counts"] = [1, 2, 3]
    with pytest.raises(LoomFormatError, match="counts 3 categories of its 2"):
        encodings.load([record])
