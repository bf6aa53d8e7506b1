"""A layout reads an encoded text column as one feature index a row (``encoding.codes_sql``) and
expands it in numpy (``encoding.expand``): the same features, to the bit, as the one expression
per feature that predicting compiles (``Encoded.sql``), on each engine."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.errors import LoomFormatError
from loomdb.store import encoding as encodings
from loomdb.store.encoding import Encoded
from loomdb.store.settle import settled

pytestmark = pytest.mark.postgres

ROWS = [  # (id, city, flag, x)
    (0, "a", True, 1.5),
    (1, "b", False, None),
    (2, None, None, -0.0),
    (3, "it's", True, 2.0),
    (4, "東京", False, 3.25),
    (5, "zz", True, -1.0),
    (6, "", None, 0.5),
    (7, "a", False, 7.0),
]
ENCODINGS = {
    "one-hot with other": [
        Encoded("city", "text", categories=("a", "it's", "東京", ""), other=True),
        Encoded("x", "numeric", impute=0.25),
    ],
    "one-hot, no other": [Encoded("city", "text", categories=("b", "zz")), Encoded("x", "numeric")],
    "one-hot, counted": [  # its CASEs test the categories most frequent first
        Encoded(
            "city", "text", categories=("a", "it's", "東京", ""), other=True, counts=(2, 5, 9, 1)
        ),
        Encoded("x", "numeric", impute=0.25),
    ],
    "no categories": [Encoded("city", "text"), Encoded("flag", "boolean")],  # NULL throughout
    "no categories, other": [Encoded("city", "text", other=True), Encoded("x", "numeric")],
    "hashed": [Encoded("city", "text", buckets=3), Encoded("x", "numeric", impute=-2.0)],
}


@pytest.fixture
def table(engine):
    double = "DOUBLE PRECISION" if engine.name == "postgres" else "DOUBLE"
    engine.rows(f"CREATE TABLE enc (id INTEGER, city TEXT, flag BOOLEAN, x {double})")
    values = ", ".join(
        "({}, {}, {}, {})".format(
            i,
            "NULL" if c is None else encodings.text_literal(c),
            "NULL" if f is None else str(f).upper(),
            "NULL" if x is None else repr(x),
        )
        for i, c, f, x in ROWS
    )
    engine.rows(f"INSERT INTO enc VALUES {values}")
    return engine


def _matrix(engine, exprs: list[str]) -> np.ndarray:
    listed = ", ".join(exprs)
    return np.array(engine.rows(f"SELECT {listed} FROM enc ORDER BY id"), dtype=float)


@pytest.mark.parametrize("case", list(ENCODINGS))
def test_expanded_codes_are_the_features_bit_for_bit(table, case):
    encoding = ENCODINGS[case]
    if case in ("one-hot, no other", "no categories, other"):  # NULL x: not laid out
        table.rows("DELETE FROM enc WHERE x IS NULL")
    if case == "no categories":  # a layout leaves out rows with a NULL boolean
        table.rows("DELETE FROM enc WHERE flag IS NULL")
    double = "FLOAT8" if table.name == "postgres" else "DOUBLE"
    dialect = table.name
    features = _matrix(table, encodings.sql(encoding, double, dialect))
    codes = _matrix(table, [*encodings.codes_sql(encoding, double, dialect), "CAST(id AS FLOAT8)"])
    expanded = encodings.expand(encoding, codes)
    assert expanded.shape == (len(features), features.shape[1] + 1)
    assert expanded[:, :-1].tobytes() == features.tobytes()  # -0.0 and 0.0 told apart
    assert expanded[:, -1].tolist() == sorted(expanded[:, -1].tolist())  # the label column kept
    text = next(e for e in encoding if e.text)
    width = len(text.names())
    kept = [int(i) for i in codes[:, -1]]
    for row, i in zip(expanded, kept):  # one indicator for a value it places, none for NULL
        city = ROWS[i][1]
        placed = city is not None and (text.other or text.hashed or city in text.categories)
        assert row[:width].sum() == float(placed)


@pytest.mark.parametrize(
    "spec",
    [{"city": {"top_k": 2}, "x": {"impute": 0.5}}, {"city": {"encode": "hash", "buckets": 3}}],
    ids=["one-hot", "hashed"],
)
def test_an_indicators_statistics_are_counted_as_its_values_would_give(table, spec):
    """The profile counts each text column's feature indices (``source._feature_stats``): the
    same minimum, maximum and mean as the features' values give, and their deviation."""
    if "x" not in spec:
        table.rows("DELETE FROM enc WHERE x IS NULL")
    options = json.dumps({"features": ["city", "x"], "preprocess": spec})
    table.rows(f"SELECT loom_create_index('enc_ix', 'enc', 'id', '{options}')")
    stats = json.loads(table.scalar("SELECT stats FROM loom.indexes WHERE name = 'enc_ix'"))
    encoding = encodings.load(stats["encoding"])
    if "top_k" in spec["city"]:  # the two most frequent (ties by name), with their rows
        assert encoding[0].categories == ("", "a") and encoding[0].counts == (1, 2)
    double = "FLOAT8" if table.name == "postgres" else "DOUBLE"
    X = _matrix(table, encodings.sql(encoding, double, table.name))
    mean, std = settled(X.mean(axis=0), X.std(axis=0), X.min(axis=0), X.max(axis=0))
    assert len(stats["mean"]) == X.shape[1] > 3
    assert stats["min"] == X.min(axis=0).tolist() and stats["max"] == X.max(axis=0).tolist()
    assert stats["mean"] == mean.tolist()
    assert np.allclose(stats["std"], std, rtol=2.0**-22, atol=0)


def test_the_sql_features_are_what_python_makes_of_each_value(table):
    """``Encoded.sql`` (what prediction compiles) and ``Encoded.apply`` (``loom_predict_row``)
    agree for every encoding here, ``<other>`` without categories included."""
    double = "FLOAT8" if table.name == "postgres" else "DOUBLE"
    for encoding in ENCODINGS.values():
        text = next(e for e in encoding if e.text)
        if not text.names():  # no feature to compare
            continue
        got = _matrix(table, text.sql(double, table.name))
        assert got.tolist() == text.apply([c for _, c, _, _ in ROWS]).tolist()


WEIGHTS = {  # a text column's weights (its width), each a case the CASE must get right
    "mixed": lambda k: np.linspace(-1.5, 2.25, k) * (np.arange(k) % 3 != 1),  # zeros among them
    "other zero": lambda k: np.r_[np.arange(1.0, k), 0.0],  # <other> (when it exists) weighs 0
    "other only": lambda k: np.r_[np.zeros(k - 1), -0.75],
}


@pytest.mark.parametrize("weights", list(WEIGHTS))
def test_a_text_columns_weighted_case_is_its_features_times_their_weights(table, weights):
    """What prediction compiles for a text column (``Encoded.weighted_sql``): one CASE a row
    whose value is Σ wᵢ·featureᵢ of ``Encoded.apply``'s features, exactly (±0 alike), for every
    encoding here — categories of weight 0 still matched when ``<other>`` weighs something —
    and no CASE at all where every weight is 0."""
    double = "FLOAT8" if table.name == "postgres" else "DOUBLE"
    cities = [c for _, c, _, _ in ROWS]
    for encoding in ENCODINGS.values():
        text = next(e for e in encoding if e.text)
        k = len(text.names())
        w = WEIGHTS[weights](k) if k else np.zeros(0)
        case = text.weighted_sql(w.tolist(), double, table.name)
        assert (case is None) == (not w.any())
        if case is not None:
            got = [v for (v,) in table.rows(f"SELECT {case} FROM enc ORDER BY id")]
            assert got == (text.apply(cities) @ w).tolist(), (text, w)
        assert text.weighted_sql([-0.0] * k, double, table.name) is None


def test_an_encoding_listing_a_category_twice_is_refused():
    record = Encoded("city", "text", categories=("a", "b")).to_dict()
    record["categories"] = ["a", "b", "a"]
    with pytest.raises(LoomFormatError, match="'a' twice"):
        encodings.load([record])
