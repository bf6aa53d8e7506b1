"""Hashed text columns (``"encode": "hash"``): the same bucket in SQL on each engine and in
Python, trained on every row format, and replayed alike by every way of predicting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.engines.postgres import dialect
from loomdb.store import encoding as encodings
from loomdb.store import layout

pytestmark = pytest.mark.postgres

N = 200
RNG = np.random.default_rng(5)
ODD = [
    "",
    " ",
    "it's",
    'say "hi"',
    "é",
    "東京",
    "😀",
    "back\\slash",
    "tab\there",
    "NULL",
    "x" * 300,
]
CITIES = np.array([*ODD, *(f"city{k}" for k in range(40))], dtype=object)
CITY = CITIES[RNG.integers(0, len(CITIES), N)]
CITY[RNG.random(N) < 0.1] = None
CITY[: len(ODD)] = ODD  # every odd value present
X = RNG.normal(0.0, 1.0, N)
BUMP = {c: RNG.normal(0.0, 1.0) for c in CITIES}
Y = np.array([BUMP.get(c, 0.0) for c in CITY]) + 0.7 * X + 0.1 * RNG.normal(size=N)
HASH = {"city": {"encode": "hash", "buckets": 16}}


def _text(v) -> str:
    return "NULL" if v is None else encodings.text_literal(v)


@pytest.fixture
def source(engine):
    engine.rows("CREATE TABLE he (id INTEGER, city TEXT, x DOUBLE PRECISION, y DOUBLE PRECISION)")
    values = ", ".join(
        f"({i}, {_text(c)}, {float(x)!r}, {float(y)!r})"
        for i, (c, x, y) in enumerate(zip(CITY, X, Y))
    )
    engine.rows(f"INSERT INTO he VALUES {values}")
    return engine


def _error(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as caught:
        engine.rows(sql)
    return str(caught.value)


@pytest.mark.parametrize("buckets", [1, 7, 64, 65536])
def test_sql_and_python_put_every_value_in_the_same_bucket(source, buckets):
    city = encodings.Encoded("city", "text", buckets=buckets)
    at = encodings.bucket_sql('CAST("city" AS TEXT)', buckets, source.name)
    rows = source.rows(f"SELECT city, {at} FROM he ORDER BY id")
    assert [r[0] for r in rows] == list(CITY)
    expected = [None if c is None else encodings.bucket(c, buckets) for c in CITY]
    assert [r[1] for r in rows] == expected
    if buckets <= 64:  # the features: one 1.0 in the value's bucket, none for NULL
        exprs = ", ".join(city.sql("DOUBLE PRECISION", source.name))
        in_sql = np.array(source.rows(f"SELECT {exprs} FROM he ORDER BY id"), dtype=float)
        assert np.array_equal(in_sql, city.apply(list(CITY)))
        assert in_sql.sum(axis=1).tolist() == [0.0 if c is None else 1.0 for c in CITY]


@pytest.mark.parametrize("fmt", ["dense", "toc", "mlweaving"])
def test_every_way_of_predicting_agrees_on_a_hashed_model(source, fmt):
    options = {"features": ["city", "x"], "preprocess": HASH, "format": fmt, "model": "linear"}
    source.scalar(f"SELECT loom_train('he_m', 'he', 'y', '{json.dumps(options)}')")
    info = json.loads(source.scalar("SELECT loom_model_info('he_m')"))
    assert info["feature_names"] == [f"city#{j}" for j in range(16)] + ["x"]
    (city, x) = encodings.load(info["options"]["encoding"]) or []
    assert city.to_dict() == {"column": "city", "kind": "text", "encode": "hash", "buckets": 16}
    design = np.hstack([city.apply(list(CITY)), x.apply(list(X))])
    calls = ", ".join(
        "loom_predict('he_m', ARRAY[" + ", ".join(repr(float(v)) for v in row) + "])"
        for row in design
    )
    by_array = np.array(source.rows(f"SELECT {calls}")[0], dtype=float)
    compiled = source.scalar("SELECT loom_predict_sql('he_m')")
    source.scalar("SELECT loom_deploy('he_m')")
    rows = source.rows(
        f"SELECT {compiled}, predict_he_m(city, x), loom_predict_row('he_m', he) FROM he "
        "ORDER BY id"
    )
    if source.name == "postgres":  # an index expression takes immutable functions only
        source.rows("CREATE INDEX he_p ON he (predict_he_m(city, x))")
        source.rows("DROP INDEX he_p")  # the model is dropped after the test
    got = np.array(rows, dtype=float)
    assert np.allclose(got, by_array[:, None], rtol=0, atol=1e-9)
    # the buckets carry the cities' effect: a better fit than x alone
    assert np.corrcoef(got[:, 0], Y)[0, 1] > np.corrcoef(X, Y)[0, 1] + 0.1


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"city": {"encode": "hash", "top_k": 5}}, '\'top_k\' applies to "encode": "onehot"'),
        ({"city": {"buckets": 8}}, '\'buckets\' applies to "encode": "hash"'),
        ({"city": {"encode": "onehot", "buckets": 8}}, '\'buckets\' applies to "encode": "hash"'),
        ({"x": {"encode": "hash"}}, "'encode' applies to text columns"),
        ({"x": {"buckets": 4}}, "CAST(x AS TEXT)"),
        ({"city": {"encode": "hash", "buckets": 0}}, "buckets from 1 to 65536"),
        ({"city": {"encode": "hash", "buckets": 65537}}, "buckets from 1 to 65536"),
        ({"city": {"encode": "md5"}}, '"encode": "onehot" | "hash"'),
    ],
)
def test_bad_encode_options_are_named(source, spec, expected):
    options = json.dumps({"features": ["city", "x"], "preprocess": spec}).replace("'", "''")
    assert expected in _error(source, f"SELECT loom_train('he_b', 'he', 'y', '{options}')")


def test_a_model_of_hashed_features_only_compiles(source):
    options = {"features": ["city"], "preprocess": HASH, "model": "linear"}
    source.scalar(f"SELECT loom_train('he_h', 'he', 'y', '{json.dumps(options)}')")
    compiled = source.scalar("SELECT loom_predict_sql('he_h')")
    # hashed once per margin, not once per bucket (DuckDB's guard repeats the margin's text,
    # which it computes once)
    assert compiled.count("md5(") == (2 if source.name == "duckdb" else 1)
    rows = source.rows(f"SELECT {compiled}, loom_predict_row('he_h', he) FROM he ORDER BY id")
    got = np.array(rows, dtype=float)
    assert np.allclose(got[:, 0], got[:, 1], rtol=0, atol=1e-9)


def test_a_split_select_source_lays_hashed_columns_out_by_their_bucket(source):
    # The layout computes each hashed column's bucket once a row, in a column of its own; a
    # source holding a column of that name, a SELECT source and a split all read the same.
    query = (
        "SELECT *, id AS loom_bucket_0, CASE WHEN id % 5 = 0 THEN 'test' ELSE 'train' END "
        "AS part FROM he"
    )
    options = {"features": ["city", "x"], "preprocess": HASH, "model": "linear"}
    options["split_column"] = "part"
    quoted = query.replace("'", "''")
    source.scalar(f"SELECT loom_train('he_s', '{quoted}', 'y', '{json.dumps(options)}')")
    info = json.loads(source.scalar("SELECT loom_model_info('he_s')"))
    train = np.arange(N) % 5 != 0
    city = encodings.load(info["options"]["encoding"])[0]
    design = np.hstack([city.apply(list(CITY[train])), X[train, None]])
    assert info["rows_processed"] == train.sum()
    means = np.array(info["standardization"]["shift"])
    assert np.allclose(means, design.mean(axis=0), rtol=0, atol=1e-6)
    # evaluated on the held-out rows, read the same way: the mse of the model's predictions
    got = json.loads(
        source.scalar(f"SELECT loom_evaluate('he_s', '{quoted}', '{{\"split\": \"test\"}}')")
    )
    test = ~train
    held = np.hstack([city.apply(list(CITY[test])), X[test, None]])
    scaled = (held - means) * np.array(info["standardization"]["scale"])
    w, b = np.array(info["coefficients"]).ravel(), np.ravel(info["intercept"])[0]
    assert got["rows"] == test.sum()
    assert got["mse"] == pytest.approx(np.mean((scaled @ w + b - Y[test]) ** 2), rel=1e-9)


def _fingerprint(source, exprs: list[str]) -> str:
    """The engine's fingerprint of table ``he`` over ``exprs`` (``Database.signature``)."""
    if source.name == "postgres":  # every expression here is a DOUBLE PRECISION (OID 701)
        how, types = dialect.COLUMN_HASH, [701] * len(exprs)
        (n, total), *_ = source.rows(dialect.signature_query("he", exprs, None, how, types))
        return f"{how}{n}:{total}"
    n, total = source.rows(f"SELECT count(*), sum(hash({', '.join(exprs)})) FROM he")[0]
    return f"{n}:{total}"


@pytest.mark.parametrize("recorded_as", ["codes", "features"])
def test_a_hashed_index_fingerprints_its_source_and_sees_a_bucket_change(source, recorded_as):
    # A new index fingerprints each hashed column's bucket, once a row (``layout.CODES``); one
    # recorded before over every feature's expression is checked that way and stays fresh.
    # Either way a value moved to another bucket makes the index stale.
    spec = json.dumps({"features": ["city", "x"], "preprocess": HASH})
    source.scalar(f"SELECT loom_create_index('he_i', 'he', 'y', '{spec}')")
    stats, recorded = source.rows(
        "SELECT stats, source_signature FROM loom.indexes WHERE name = 'he_i'"
    )[0]
    encoding = encodings.load(json.loads(stats)["encoding"]) or []
    double = "DOUBLE PRECISION"
    label = 'CAST("y" AS DOUBLE PRECISION)'
    codes = [*encodings.codes_sql(encoding, double, source.name), label]
    assert recorded == layout.CODES + _fingerprint(source, codes)
    if recorded_as == "features":  # as loomdb recorded it before
        before = _fingerprint(source, [*encodings.sql(encoding, double, source.name), label])
        source.rows(f"UPDATE loom.indexes SET source_signature = '{before}' WHERE name = 'he_i'")
    options = json.dumps({"index": "he_i", "epochs": 1, "replace": True})
    train = f"SELECT loom_train('he_f', NULL, 'y', '{options}')"
    source.scalar(train)  # fresh
    moved = next(
        f"moved{i}"
        for i in range(64)
        if encodings.bucket(f"moved{i}", 16) != encodings.bucket(CITY[3], 16)
    )
    source.rows(f"UPDATE he SET city = '{moved}' WHERE id = 3")
    assert "older than the last change" in _error(source, train)
