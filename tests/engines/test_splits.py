"""Held-out test rows on both engines: ``test_fraction`` (a seeded split of the source's rows,
the same on DuckDB and PostgreSQL) and ``split_column``; test rows never reach training, the
parts' rows recorded add up, ``loom_evaluate`` on ``{"split": "test"}`` equals scikit-learn on
exactly those rows, and bad splits get clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, log_loss

pytestmark = pytest.mark.postgres

N = 400
M = 2147483647
BASE = {"batch_size": 40, "epochs": 5, "progress": False}


def held_out(n: int, fraction: float, seed: int) -> np.ndarray:
    """Which of rows 1…n are test rows: the split's arithmetic as README documents it."""
    rn = np.arange(1, n + 1, dtype=np.int64)
    x = (rn + (seed * 7919 + 1) % M) % M
    x = (x * x + (seed * 104729 + 12345) % M) % M
    x = (x * 48271) % M
    x = (x * x + 6789) % M
    return x < int(round(fraction * M))


def train(engine, name: str, source: str, **options) -> dict:
    text = json.dumps({**BASE, **options})
    engine.scalar(f"SELECT loom_train('{name}', '{source}', 'y', '{text}')")
    return json.loads(engine.scalar(f"SELECT loom_model_info('{name}')"))


def evaluate(engine, name: str, source: str, part: str) -> dict:
    text = json.dumps({"split": part})
    return json.loads(engine.scalar(f"SELECT loom_evaluate('{name}', '{source}', '{text}')"))


def error_of(engine, sql: str) -> str:
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    return str(info.value)


def points(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    y = (X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=N) > 0).astype(float)
    return X, y


@pytest.mark.parametrize(
    "layout", [{}, {"format": "toc"}, {"format": "mlweaving"}, {"slimml": True}]
)
def test_no_test_row_reaches_training(engine, layout):
    """Test rows carry a third class and wild features: the model trained with the split is
    the model trained on a table of the other rows alone (same rows, same order, same shuffle)."""
    X, y = points()
    held = held_out(N, 0.25, 7)
    X[held] *= 1e6
    y[held] = 2.0
    engine.load("pts", X, y, columns=["a", "b", "c"])
    engine.load("kept", X[~held], y[~held], columns=["a", "b", "c"])
    split = train(engine, "split", "pts", test_fraction=0.25, seed=7, **layout)
    alone = train(engine, "alone", "kept", seed=7, **layout)
    assert split["classes"] == [0.0, 1.0]
    assert np.allclose(split["coefficients"], alone["coefficients"], rtol=0, atol=1e-12)
    assert np.allclose(split["intercept"], alone["intercept"], rtol=0, atol=1e-12)
    rows = split["options"]["split"]["rows"]
    assert rows["test"] == int(held.sum()) and rows["source"] == N
    assert split["options"]["split"]["seed"] == 7


def test_the_parts_rows_add_up(engine):
    X, y = points(1)
    X[::37, 1] = np.nan  # loaded as NULL: skipped rows are counted in their part
    engine.load("pts", X, y, columns=["a", "b", "c"])
    info = train(
        engine, "m", "pts", test_fraction=0.2, validation_fraction=0.25, nulls="skip", seed=3
    )
    rows = info["options"]["split"]["rows"]
    assert rows["train"] + rows["validation"] + rows["skipped"] + rows["test"] == N
    assert rows["source"] == N == engine.scalar("SELECT count(*) FROM pts")
    assert rows["validation"] > 0 and rows["skipped"] > 0
    assert info["rows_processed"] == rows["train"] + rows["validation"]
    held = held_out(N, 0.2, 3)
    assert rows["test"] == int(held.sum())
    assert rows["skipped"] == int(np.isnan(X[~held, 1]).sum())


def test_evaluating_the_test_split_equals_scikit_learn_on_those_rows(engine):
    X, y = points(2)
    ids = np.arange(N, dtype=float)
    engine.load("pts", np.column_stack([ids, X]), y, columns=["id", "a", "b", "c"])
    train(engine, "m", "pts", test_fraction=0.3, seed=11, features=["a", "b", "c"])
    got = evaluate(engine, "m", "pts", "test")
    proba = dict(engine.rows("SELECT id, loom_predict_proba('m', ARRAY[a, b, c]) FROM pts"))
    held = held_out(N, 0.3, 11)
    p = np.array([proba[i] for i in ids[held]])
    assert got["rows"] == int(held.sum()) and got["split"] == "test"
    assert got["accuracy"] == pytest.approx(accuracy_score(y[held], p >= 0.5), abs=1e-12)
    assert got["log_loss"] == pytest.approx(log_loss(y[held], p, labels=[0, 1]), rel=1e-9)
    others = evaluate(engine, "m", "pts", "train")
    assert others["rows"] == N - int(held.sum())


def test_the_seed_chooses_the_split(engine):
    X, y = points(3)
    held = held_out(N, 0.25, 5)
    y[held] = 2.0  # a class only the seed-5 test rows hold
    engine.load("pts", X, y, columns=["a", "b", "c"])
    first, again = (train(engine, n, "pts", test_fraction=0.25, seed=5) for n in ("m1", "m2"))
    assert first["options"]["split"] == again["options"]["split"]
    assert first["coefficients"] == again["coefficients"] and first["classes"] == [0.0, 1.0]
    other = train(engine, "m3", "pts", test_fraction=0.25, seed=6)
    assert other["classes"] == [0.0, 1.0, 2.0]  # another seed holds other rows out
    assert not np.array_equal(held_out(N, 0.25, 6), held)


def test_a_warm_start_keeps_the_models_test_rows_out(engine):
    """Continuing a model trained with a split trained on its test rows too (the split was
    not carried, nor recorded): its test metrics then measured rows it had learnt.  The split
    carries on as the standardisation does; another one, or a split of a model that trained
    on every row, is refused."""
    X, y = points(6)
    engine.load("pts", X, y, columns=["a", "b", "c"])
    first = train(engine, "m", "pts", test_fraction=0.3, seed=5)
    held = int(held_out(N, 0.3, 5).sum())
    again = train(engine, "m", "pts", warm_start=True)
    assert again["options"]["split"] == first["options"]["split"]
    assert again["rows_processed"] == N - held
    assert evaluate(engine, "m", "pts", "test")["rows"] == held
    for other, says in (
        ({"seed": 6}, "with test_fraction 0.3 and seed 6: it was trained with test_fraction 0.3"),
        ({"test_fraction": 0.2, "seed": 5}, "with test_fraction 0.2 and seed 5"),
    ):
        opts = json.dumps({**BASE, "warm_start": True, **other})
        said = error_of(engine, f"SELECT loom_train('m', 'pts', 'y', '{opts}')")
        assert f"cannot warm-start model 'm' {says}" in said
    train(engine, "all", "pts")
    opts = json.dumps({**BASE, "warm_start": True, "test_fraction": 0.3})
    said = error_of(engine, f"SELECT loom_train('all', 'pts', 'y', '{opts}')")
    assert "with a test split: it trained on every row" in said
    versions = engine.rows("SELECT version FROM loom_model_versions('m')")
    assert len(versions) == 2  # nothing written by the refused ones


@pytest.mark.parametrize("kind", ["text", "boolean"])
def test_a_split_column_names_the_test_rows(engine, kind):
    X, y = points(4)
    held = np.arange(N) % 5 == 0
    y[held] = 2.0  # a class only the test rows hold: none may reach training
    engine.load("raw", np.column_stack([X, held.astype(float)]), y, columns=["a", "b", "c", "t"])
    part = "CASE WHEN t = 1 THEN 'test' ELSE 'train' END" if kind == "text" else "t = 1"
    engine.rows(f"CREATE TABLE pts AS SELECT a, b, c, y, {part} AS part FROM raw")
    info = train(engine, "m", "pts", split_column="part")
    assert info["classes"] == [0.0, 1.0]
    assert info["feature_names"] == ["a", "b", "c"]  # never the split column
    assert info["options"]["split"]["column"] == "part"
    rows = info["options"]["split"]["rows"]
    assert rows["test"] == int(held.sum()) and rows["train"] == N - int(held.sum())
    got = evaluate(engine, "m", "pts", "test")
    assert got["rows"] == int(held.sum())


def test_bad_splits_get_clear_errors(engine):
    X, y = points(5)
    engine.load("pts", X, y, columns=["a", "b", "c"])
    engine.rows(
        "CREATE TABLE nulled AS SELECT a, b, c, y, CASE WHEN a > 1 THEN NULL "
        "ELSE 'train' END AS part, 1 AS num FROM pts"
    )
    engine.rows(
        "CREATE TABLE typo AS SELECT a, b, c, y, CASE WHEN a > 1 THEN 'tset' "
        "ELSE 'train' END AS part FROM pts"
    )

    def train_error(source: str, **options) -> str:
        text = json.dumps({**BASE, **options})
        return error_of(engine, f"SELECT loom_train('bad', '{source}', 'y', '{text}')")

    msg = train_error("nulled", split_column="part")
    assert "NULL split_column 'part'" in msg and "every row" in msg
    msg = train_error("typo", split_column="part")
    assert "'tset'" in msg and "'train' or 'test'" in msg
    msg = train_error("pts", split_column="nope")
    assert "split_column 'nope' is not a column" in msg
    msg = train_error("nulled", split_column="num", features=["a", "b", "c"])
    assert "must be text or boolean" in msg
    msg = train_error("nulled", split_column="num", features=["a", "num"])
    assert "cannot also be the label or a feature" in msg
    msg = train_error("pts", split_column="part", test_fraction=0.2)
    assert "not both" in msg
    msg = train_error("pts", test_fraction=0.001)
    assert "leaves no test row" in msg
    engine.rows("CREATE TABLE trained AS SELECT a, b, c, y, 'train' AS part FROM pts")
    with pytest.raises(engine.errors) as info:
        options = json.dumps({**BASE, "split_column": "part"})
        engine.rows(f"SELECT loom_train('bad', 'trained', 'y', '{options}')")
    said = str(info.value) + (getattr(getattr(info.value, "diag", None), "message_hint", "") or "")
    assert "split_column 'part' leaves no test row" in said
    assert "mark some rows 'test' in part" in said and "test_fraction" not in said
    engine.scalar("SELECT loom_create_index('pts_i', 'pts', 'y', '{}')")
    msg = train_error("pts", index="pts_i", test_fraction=0.2)
    assert "already laid out" in msg
    train(engine, "plain", "pts")
    msg = error_of(engine, """SELECT loom_evaluate('plain', 'pts', '{"split": "test"}')""")
    assert "trained without a test split" in msg
    msg = error_of(engine, """SELECT loom_evaluate('plain', 'pts', '{"split": "tests"}')""")
    assert "split" in msg and "test" in msg


def test_evaluating_a_changed_source_is_refused(engine):
    X, y = points(6)
    engine.load("pts", X, y, columns=["a", "b", "c"])
    train(engine, "m", "pts", test_fraction=0.2)
    engine.rows("INSERT INTO pts SELECT * FROM pts")
    msg = error_of(engine, """SELECT loom_evaluate('m', 'pts', '{"split": "test"}')""")
    assert "held out" in msg and "test rows" in msg


def test_a_sparse_source_honours_the_split(engine):
    engine.rows("CREATE TABLE sp (label double precision, ix integer[], vs double precision[])")
    rows = [(i % 2, f"ARRAY[{i % 7}, 9]", f"ARRAY[{i % 5 + 1}.0, 1.0]") for i in range(40)]
    rows += [(2, "ARRAY[3]", "ARRAY[50.0]")] * 8  # a class only the test rows hold
    for label, ix, vs in rows:
        engine.rows(f"INSERT INTO sp VALUES ({label}, {ix}, {vs})")
    engine.rows("CREATE TABLE sps AS SELECT *, label = 2 AS is_test FROM sp")
    text = json.dumps({**BASE, "split_column": "is_test"})
    engine.scalar(f"SELECT loom_train('m', 'sps', 'label', '{text}')")
    info = json.loads(engine.scalar("SELECT loom_model_info('m')"))
    assert info["classes"] == [0.0, 1.0]
    assert info["options"]["split"]["rows"]["test"] == 8
    assert evaluate(engine, "m", "sps", "test")["rows"] == 8


def test_an_image_source_honours_the_split(engine, tmp_path):
    from PIL import Image

    from support.engines import readable_dir

    root = readable_dir()
    rng = np.random.default_rng(7)
    for name in ("a", "b", "c"):  # class c (label 2): the test rows only
        (root / name).mkdir()
        (root / name).chmod(0o755)
        for i in range(4):
            pixels = rng.integers(0, 255, size=(16, 16), dtype=np.uint8)
            Image.fromarray(pixels, "L").save(root / name / f"{i}.jpg")
            (root / name / f"{i}.jpg").chmod(0o644)
    engine.scalar(f"SELECT loom_load('images', '{root}', 'ph')")
    engine.rows("CREATE TABLE phs AS SELECT *, label = 2 AS is_test FROM ph")
    opts = {**BASE, "format": "pcr", "image_size": 16, "color": "gray", "split_column": "is_test"}
    engine.scalar(f"SELECT loom_train('m', 'phs', 'label', '{json.dumps(opts)}')")
    info = json.loads(engine.scalar("SELECT loom_model_info('m')"))
    assert info["classes"] == [0.0, 1.0]
    assert info["options"]["split"]["rows"]["test"] == 4
    assert evaluate(engine, "m", "phs", "test")["rows"] == 4
