"""Sparse sources end to end through SQL on both engines: loaded from LIBSVM (with hashed
crosses past 2^20 columns) or generated, laid out as toc without densifying, trained,
evaluated and predicted on; the same model as the dense-column version of the same rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.codecs import array_json
from support.engines import readable_dir

pytestmark = pytest.mark.postgres


def load(engine, name, text, options=None):
    path = readable_dir() / f"{name}.svm"
    path.write_text(text)
    path.chmod(0o644)
    opts = json.dumps({"replace": True, **(options or {})})
    return json.loads(engine.scalar(f"SELECT loom_load('libsvm', '{path}', '{name}', '{opts}')"))


def train(engine, model, source, options):
    opts = json.dumps({"progress": False, **options})
    return json.loads(engine.scalar(f"SELECT loom_train('{model}', '{source}', 'label', '{opts}')"))


def stored(engine, model):
    raw = engine.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{model}'")
    return json.loads(raw, object_hook=array_json.hook)


def over_width(coefficients, width):
    full = np.zeros((width, np.asarray(coefficients["coef"]).shape[1]))
    full[coefficients["index"]] = coefficients["coef"]
    return full


def dense_copy(engine, sparse, dense, width):
    """The dense-column version of a sparse table, rows in the order the engine scans them
    (PostgreSQL may place a short row in an earlier page: its scan order is not the file's)."""
    rows = engine.rows(f'SELECT label, indices, "values" FROM {sparse}')
    X = np.zeros((len(rows), width))
    for r, (_, ix, vs) in enumerate(rows):
        X[r, list(ix)] = list(vs)
    engine.load(dense, X, np.array([r[0] for r in rows]), label="label")


@pytest.mark.parametrize("fmt", ["toc", "dense"])
def test_a9a_loaded_as_libsvm_trains_the_model_of_its_dense_columns(engine, datasets, fmt):
    path = readable_dir() / "a9a.svm"
    path.write_text((datasets / "a9a.t").read_text())
    path.chmod(0o644)
    assert (
        json.loads(engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'a9s')"))["rows"] == 16281
    )
    dense_copy(engine, "a9s", "a9d", 123)
    common = {"format": fmt, "epochs": 4, "seed": 7, "standardize": "zscore"}
    sparse = train(engine, "s", "a9s", {**common, "sparse": {"width": 123}})
    dense = train(engine, "d", "a9d", common)
    assert sparse["features"] == dense["features"] == 123 and sparse["stored_coefficients"] == 122
    assert sparse["lr"] == pytest.approx(dense["lr"], rel=1e-12)
    assert sparse["loss"] == pytest.approx(dense["loss"], rel=1e-9)
    W = np.asarray(
        json.loads(engine.scalar("SELECT coefficients FROM loom.models WHERE name = 'd'"))
    )
    assert np.allclose(over_width(stored(engine, "s"), 123), W, rtol=1e-9, atol=1e-12)
    on_sparse = json.loads(engine.scalar("SELECT loom_evaluate('s', 'a9s')"))
    on_dense = json.loads(engine.scalar("SELECT loom_evaluate('d', 'a9d')"))
    for metric in ("accuracy", "f1", "log_loss"):
        assert on_sparse[metric] == pytest.approx(on_dense[metric], rel=1e-9)
    differ = engine.scalar(
        "SELECT count(*) FROM (SELECT * FROM a9s LIMIT 3000) t WHERE loom_predict_sparse"
        "('s', indices, \"values\") <> loom_predict_sparse('d', indices, \"values\")"
    )
    assert differ == 0


CROSSED = """\
+1 1:1 3:0.5 7:2 12:1
-1 2:1 3:1.5 9:1
+1 1:1 4:1 7:1 11:2 12:1
-1 2:2 5:1 9:1 10:1
+1 1:1 3:1 8:1 12:3
-1 2:1 6:0.5 9:2
"""


def crossed_rows(engine, count=60):
    lines = CROSSED.splitlines()
    return load(
        engine,
        "crossed",
        "\n".join(lines[i % len(lines)] for i in range(count)) + "\n",
        {"cross_bits": 20},
    )


def test_a_hashed_cross_file_past_2_20_columns_trains_through_sql(engine):
    assert crossed_rows(engine)["rows"] == 60
    high = engine.scalar("SELECT max(i) FROM (SELECT unnest(indices) AS i FROM crossed) t")
    assert 2**20 <= high < 2**21  # the crosses live above the features
    opts = {"format": "toc", "epochs": 20, "sparse": {"width": 2**21}}
    summary = train(engine, "x", "crossed", opts)
    assert summary["features"] == 2**21 and summary["format"] == "toc"
    assert json.loads(engine.scalar("SELECT loom_evaluate('x', 'crossed')"))["accuracy"] == 1.0
    info = json.loads(engine.scalar("SELECT loom_model_info('x')"))
    assert info["coefficients"]["width"] == 2**21 and info["options"]["sparse"]["width"] == 2**21
    assert info["options"]["standardize"] == "minmax"  # a sparse source's default
    assert info["coefficients"]["stored"] == summary["stored_coefficients"] > 12
    pred = engine.rows(
        "SELECT label, loom_predict_sparse('x', indices, \"values\"), "
        "loom_predict_proba_sparse('x', indices, \"values\") FROM crossed LIMIT 6"
    )
    assert [r[0] for r in pred] == [r[1] for r in pred]
    assert all((p > 0.5) == (y > 0) for y, _, p in pred)
    with pytest.raises(engine.errors, match="no SQL expression"):
        engine.scalar("SELECT loom_predict_sql('x')")
    if engine.name == "duckdb":  # loomdb's SQL front-end: DoppioDB's inference form
        with pytest.raises(engine.errors, match="sparse source"):
            engine.rows("SELECT * FROM infer_mlweaving(x, 'crossed')")
    # dense stores the observed columns: a few dozen here
    assert train(engine, "xd", "crossed", {"epochs": 2})["stored_coefficients"] > 12


def test_a_sparse_toc_index_trains_and_evaluates_on_its_blobs(engine):
    crossed_rows(engine)
    built = json.loads(
        engine.scalar(
            "SELECT loom_create_index('cx', 'crossed', 'label', "
            '\'{"format": "toc", "features": ["indices", "values"]}\')'
        )
    )
    assert built["features"] == ["indices", "values"] and built["rows"] == 60
    assert built["sparse"]["indices"] == "indices" and 2**20 < built["sparse"]["width"] <= 2**21
    assert 12 < built["sparse"]["columns"] < 200  # the columns the rows hold
    engine.scalar("SELECT loom_train('cm', NULL, 'label', '{\"index\": \"cx\", \"epochs\": 10}')")
    on_blobs = json.loads(engine.scalar("SELECT loom_evaluate_index('cm', 'cx')"))
    on_rows = json.loads(engine.scalar("SELECT loom_evaluate('cm', 'crossed')"))
    assert on_blobs["rows"] == on_rows["rows"] == 60
    assert on_blobs["log_loss"] == pytest.approx(on_rows["log_loss"], rel=1e-9)
    engine.scalar("SELECT loom_reindex('cx')")
    engine.scalar(
        "SELECT loom_train('cm', NULL, 'label', "
        '\'{"index": "cx", "epochs": 2, "warm_start": true, "sparse": {"indices": "indices"}}\')'
    )
    with pytest.raises(engine.errors, match="was built with sparse"):
        train(engine, "cm2", "crossed", {"index": "cx", "sparse": {"width": 5}})


def test_dense_models_score_sparse_rows(engine):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    engine.load("dn", X, (X[:, 0] > 0).astype(float))
    engine.scalar("SELECT loom_train('dm', 'dn', 'y', '{\"epochs\": 3}')")
    got = engine.rows(
        "SELECT loom_predict_proba('dm', ARRAY[x0, x1, x2]), "
        "loom_predict_proba_sparse('dm', ARRAY[2, 0, 1], ARRAY[x2, x0, x1]) FROM dn"
    )
    assert all(a == pytest.approx(b, rel=1e-12) for a, b in got)
    assert (
        engine.scalar("SELECT loom_predict_sparse('dm', ARRAY[0], ARRAY[NULL::double precision])")
        is None
    )
    with pytest.raises(engine.errors, match="column 3"):
        engine.scalar("SELECT loom_predict_sparse('dm', ARRAY[3], ARRAY[1.0])")
    with pytest.raises(engine.errors, match="different lengths"):
        engine.scalar("SELECT loom_predict_sparse('dm', ARRAY[0, 1], ARRAY[1.0])")
    # the row was "row 1 of a chunk", a position in loomdb's internal batch
    with pytest.raises(engine.errors, match=r"names column 1 twice \(its indices: 1, 0, 1\)"):
        engine.scalar("SELECT loom_predict_sparse('dm', ARRAY[1, 0, 1], ARRAY[1.0, 2.0, 3.0])")


def sparse_table(engine, name, rows):
    engine.rows(f"DROP TABLE IF EXISTS {name}")
    engine.rows(
        f"CREATE TABLE {name} (label double precision, ix integer[], vs double precision[])"
    )
    for label, ix, vs in rows:
        engine.rows(f"INSERT INTO {name} VALUES ({label}, {ix}, {vs})")


GOOD = [(1, "ARRAY[0, 4]", "ARRAY[1.0, 2.0]"), (0, "ARRAY[4, 1]", "ARRAY[0.5, 1.0]")] * 4


@pytest.mark.parametrize(
    "rows, options, message",
    [
        ([*GOOD, (1, "ARRAY[1, 2]", "ARRAY[1.0]")], {}, "different lengths"),
        ([*GOOD, (1, "ARRAY[-1]", "ARRAY[1.0]")], {}, "index -1"),
        ([*GOOD, (1, "ARRAY[2, 2]", "ARRAY[1.0, 1.0]")], {}, "column 2 twice"),
        ([*GOOD, (1, "ARRAY[9]", "ARRAY[1.0]")], {"sparse": {"width": 9}}, "beyond the width 9"),
        ([*GOOD, (1, "NULL", "ARRAY[1.0]")], {}, "NULL features"),
        ([*GOOD, (1, "ARRAY[1]", "ARRAY['NaN'::double precision]")], {}, "NaN or infinite"),
        ([*GOOD, (1, "ARRAY[1]", "ARRAY[CAST(1e300 AS DOUBLE PRECISION)]")], {}, "reach 1e"),
        (GOOD, {"features": ["ix"]}, "indices .an integer array."),
        ([(1, "ARRAY[0]", "ARRAY[1.0]")] * 8, {"sparse": {"indices": "vs"}}, "integer array"),
        (GOOD, {"sparse": {"width": 0}}, "width from 1"),
        (GOOD, {"preprocess": {"no_such": {"impute": 0}}}, "sparse .its features are the arrays"),
        (GOOD, {"preprocess": {"vs": {"impute": 0}}}, "'preprocess' encodes or fills"),
    ],
)
def test_bad_sparse_sources_are_refused_with_a_reason(engine, rows, options, message):
    sparse_table(engine, "bad", rows)
    with pytest.raises(engine.errors, match=message):
        train(engine, "b", "bad", {"format": "toc", **options})
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'b'") == 0


def test_a_sparse_column_of_tiny_values_keeps_its_weight_under_zscore(engine):
    """A sparse column of 1e-300s: the squares of its values underflow, so its std was 0 and
    z-scoring, reading it as constant, dropped it (one stored coefficient, accuracy 0.73)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 2))
    engine.load("base", X, (X[:, 0] + X[:, 1] > 0).astype(float), columns=["a", "b"])
    engine.rows(
        "CREATE TABLE faint AS SELECT y AS label, ARRAY[0, 1] AS ix, "
        "ARRAY[a * CAST(1e-300 AS DOUBLE PRECISION), b] AS vs FROM base"
    )
    train(engine, "fz", "faint", {"standardize": "zscore", "epochs": 10})
    assert len(stored(engine, "fz")["index"]) == 2
    raw = engine.scalar("SELECT standardization FROM loom.models WHERE name = 'fz'")
    scale = json.loads(raw, object_hook=array_json.hook)["scale"]
    assert scale[0] / 1e300 == pytest.approx(1 / np.std(X[:, 0]), rel=1e-6)
    assert json.loads(engine.scalar("SELECT loom_evaluate('fz', 'faint')"))["accuracy"] > 0.95


def test_sparse_columns_are_inferred_or_named_and_nulls_skipped(engine):
    sparse_table(engine, "inf", [*GOOD, (1, "NULL", "NULL")])
    summary = train(engine, "i1", "inf", {"format": "toc", "nulls": "skip", "epochs": 3})
    assert summary["features"] == 5 and summary["skipped"] == 1
    named = train(
        engine, "i2", "inf", {"nulls": "skip", "epochs": 3, "sparse": {"values": "vs", "width": 8}}
    )
    assert named["features"] == 8 and named["format"] == "dense"
    z = engine.rows(
        "SELECT loom_predict_sparse('i1', ix, vs), loom_predict_sparse('i2', ix, vs) FROM inf"
    )
    assert z[-1] == (None, None) and all(a is not None for a, _ in z[:-1])
    evaluated = json.loads(engine.scalar("SELECT loom_evaluate('i1', 'inf')"))
    assert evaluated["rows"] == 8 and evaluated["skipped"] == 1
    engine.rows("ALTER TABLE inf ADD COLUMN x double precision DEFAULT 1.5")
    with pytest.raises(engine.errors, match="say which are the features") as info:
        train(engine, "i3", "inf", {"nulls": "skip"})  # numeric columns and arrays: ambiguous
    diag = getattr(info.value, "diag", None)
    hint = (diag.message_hint if diag is not None else getattr(info.value, "hint", None)) or ""
    suggested = json.loads(hint[hint.index("{") : hint.index("}") + 1])  # was Python's ['x']
    assert train(engine, "i3", "inf", {**suggested, "epochs": 1})["features"] == 1


def test_the_zipf_generator_makes_the_same_table_on_both_engines(engine):
    from loomdb.loaders.zipf import ZipfLoader

    given = {"rows": 3000, "columns": 2**20, "seed": 11}
    made = json.loads(engine.scalar(f"SELECT loom_load('zipf', '', 'zz', '{json.dumps(given)}')"))
    assert made["rows"] == 3000
    loader = ZipfLoader()
    expected = sorted(
        (y, list(ix), list(vs)) for y, ix, vs in loader.rows("", loader.options.parse(given))
    )
    got = sorted((y, list(ix), list(vs)) for y, ix, vs in engine.rows("SELECT * FROM zz"))
    assert got == expected
    with pytest.raises(engine.errors, match='(?s)MiB.*"format": "toc"'):  # ~10k columns held
        train(engine, "zd", "zz", {"format": "dense"})
    summary = train(engine, "zm", "zz", {"format": "toc", "epochs": 3})
    assert summary["features"] == 1 + max(max(ix) for _, ix, _ in expected)
    assert json.loads(engine.scalar("SELECT loom_evaluate('zm', 'zz')"))["accuracy"] > 0.75


@pytest.mark.slow
def test_mnist_as_libsvm_trains_the_model_of_all_784_pixels(engine, datasets):
    from loomdb.datasets import load_mnist

    X, digits = load_mnist(datasets, limit=1500)
    lines = [
        f"{int(d < 5)} " + " ".join(f"{j + 1}:{x:g}" for j, x in enumerate(row) if x)
        for row, d in zip(X, digits)
    ]
    load(engine, "mn", "\n".join(lines) + "\n")
    dense_copy(engine, "mn", "mnd", 784)
    common = {"format": "toc", "epochs": 3, "seed": 3, "standardize": "minmax"}
    train(engine, "ms", "mn", {**common, "sparse": {"width": 784}})
    train(engine, "md", "mnd", common)
    W = np.asarray(
        json.loads(engine.scalar("SELECT coefficients FROM loom.models WHERE name = 'md'"))
    )
    assert np.allclose(over_width(stored(engine, "ms"), 784), W, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fmt", ["toc", "dense"])
def test_a_sparse_model_with_no_weight_left_predicts_and_evaluates(engine, fmt):
    """An l1 strong enough zeroes every weight, so a sparse model stores no coefficient:
    loading it failed on numpy's 'cannot reshape array of size 0' in every prediction,
    evaluation and loom_weights."""
    engine.rows(
        "CREATE TABLE nil AS SELECT CAST(ARRAY[i % 5, 5 + i % 3] AS INTEGER[]) AS indices, "
        'CAST(ARRAY[1.0, 2.0] AS DOUBLE PRECISION[]) AS "values", '
        "CAST(i % 2 AS DOUBLE PRECISION) AS label FROM generate_series(0, 59) AS g(i)"
    )
    engine.scalar(
        "SELECT loom_create_index('nx', 'nil', 'label', "
        f'\'{{"format": "{fmt}", "features": ["indices", "values"]}}\')'
    )
    opts = {"index": "nx", "epochs": 2, "l1": 100, "fit_intercept": False}
    engine.scalar(f"SELECT loom_train('nm', NULL, 'label', '{json.dumps(opts)}')")
    assert stored(engine, "nm")["index"].size == 0
    margins = engine.rows(
        "SELECT loom_predict_proba_sparse('nm', indices, \"values\") FROM nil LIMIT 3"
    )
    assert [m for (m,) in margins] == [0.5, 0.5, 0.5]  # no weight, no intercept
    on_index = json.loads(engine.scalar("SELECT loom_evaluate_index('nm', 'nx')"))
    on_rows = json.loads(engine.scalar("SELECT loom_evaluate('nm', 'nil')"))
    assert on_index["rows"] == on_rows["rows"] == 60
    assert on_index["log_loss"] == pytest.approx(on_rows["log_loss"])
    weights = engine.rows("SELECT feature FROM loom_weights('nm')")
    assert [f for (f,) in weights if f != "(intercept)"] == []


def test_reindex_past_the_index_width_says_how_to_widen_it(engine):
    """An index records the width its build found (or was given) and a rebuild keeps its
    options: once the source holds a column past it, loom_reindex's error told to give a
    larger 'width' in the sparse option, which loom_reindex does not take."""
    engine.rows(
        "CREATE TABLE wide AS SELECT CAST(ARRAY[i % 5, 5 + i % 3] AS INTEGER[]) AS indices, "
        'CAST(ARRAY[1.0, 2.0] AS DOUBLE PRECISION[]) AS "values", '
        "CAST(i % 2 AS DOUBLE PRECISION) AS label FROM generate_series(0, 59) AS g(i)"
    )
    create = (
        "SELECT loom_create_index('wx', 'wide', 'label', "
        '\'{"format": "toc", "features": ["indices", "values"]}\')'
    )
    assert json.loads(engine.scalar(create))["sparse"]["width"] == 8
    engine.rows("UPDATE wide SET indices = ARRAY[3, 20] WHERE label = 1")
    before = engine.rows("SELECT uid, options FROM loom.indexes")
    with pytest.raises(engine.errors) as e:
        engine.scalar("SELECT loom_reindex('wx')")
    message = str(e.value)
    assert "holds index 20, at or beyond the width 8" in message
    assert "loom_drop_index('wx')" in message and '"width"' in message
    assert "give a larger 'width' in the sparse option" not in message
    assert engine.rows("SELECT uid, options FROM loom.indexes") == before
    engine.scalar("SELECT loom_drop_index('wx')")  # what the hint says
    assert json.loads(engine.scalar(create))["sparse"]["width"] == 21
    if engine.name != "postgres":
        return
    engine.rows("UPDATE wide SET indices = ARRAY[3, 4]")  # psql's index: its WITH options
    engine.rows('CREATE INDEX wr ON wide USING toc (indices, "values") WITH (label = label)')
    engine.rows("UPDATE wide SET indices = ARRAY[3, 30] WHERE label = 1")
    with pytest.raises(engine.errors, match=r"REINDEX INDEX \S*wr lays it out again"):
        engine.scalar("SELECT loom_reindex('wr')")
    engine.rows("REINDEX INDEX wr")
    assert engine.scalar("SELECT options FROM loom.indexes WHERE name = 'wr'").count('"width": 31')
    engine.rows("DROP INDEX wr")
