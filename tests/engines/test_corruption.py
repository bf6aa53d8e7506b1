"""Stored layouts prove themselves whole: a missing, duplicated, swapped or altered row is a
LoomFormatError naming the index and the fix, on both engines and every format."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.postgres

FORMATS = ["dense", "toc", "mlweaving"]
TAMPERING = {
    "missing": "DELETE FROM loom_data.{ix} WHERE batch = 1 AND part = 1",
    "missing batch": "DELETE FROM loom_data.{ix} WHERE batch = 2",
    "duplicated": "INSERT INTO loom_data.{ix} SELECT * FROM loom_data.{ix} WHERE batch = 1",
    "swapped": (
        "UPDATE loom_data.{ix} SET payload = (SELECT payload FROM loom_data.{ix} "
        "WHERE batch = 2 AND part = 1) WHERE batch = 1 AND part = 1"
    ),
    "from another index": (
        "UPDATE loom_data.{ix} SET payload = (SELECT payload FROM loom_data.{ix}_twin "
        "WHERE batch = 1 AND part = 1), checksum = (SELECT checksum FROM loom_data.{ix}_twin "
        "WHERE batch = 1 AND part = 1) WHERE batch = 1 AND part = 1"
    ),
    "null": "UPDATE loom_data.{ix} SET payload = NULL WHERE batch = 0 AND part = 0",
    "fewer rows": "UPDATE loom_data.{ix} SET rows = rows - 1 WHERE batch = 1",
    "null row count": "UPDATE loom_data.{ix} SET rows = NULL WHERE batch = 0 AND part = 0",
    "uid not hex": "UPDATE loom.indexes SET uid = 'not hex' WHERE name = '{ix}'",
    # the engine's bare "Table with name … does not exist" / "relation … does not exist"
    "storage table dropped": "DROP TABLE loom_data.{ix}",
}


@pytest.fixture
def indexed(engine):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, size=(1024, 6)).astype(float)
    engine.load("c_t", X, (X[:, 0] > 1).astype(float))
    return engine


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", list(TAMPERING))
def test_a_damaged_index_is_refused_with_the_fix(indexed, fmt, damage):
    engine, ix = indexed, f"c_{fmt}"
    opts = json.dumps({"format": fmt, "seed": 1})
    engine.scalar(f"SELECT loom_create_index('{ix}', 'c_t', 'y', '{opts}')")
    engine.scalar(f"SELECT loom_create_index('{ix}_twin', 'c_t', 'y', '{opts}')")
    engine.rows(TAMPERING[damage].format(ix=ix))
    with pytest.raises(engine.errors) as info:
        engine.scalar(
            f'SELECT loom_train(\'m\', NULL, \'y\', \'{{"index": "{ix}", "epochs": 1, '
            '"cache_mb": 0}\')'
        )
    message = str(info.value)
    assert f"index '{ix}' is damaged" in message
    assert f"loom_reindex('{ix}')" in message
    engine.scalar(f"SELECT loom_reindex('{ix}')")
    engine.scalar(f"SELECT loom_train('m', NULL, 'y', '{{\"index\": \"{ix}\", \"epochs\": 1}}')")


def test_a_model_whose_catalog_row_is_damaged_is_refused_and_can_be_dropped(indexed):
    """The damaged model's hint says to drop it: loom_drop_model read the whole row first and
    failed the same way."""
    engine = indexed
    engine.scalar("SELECT loom_train('c_m', 'c_t', 'y', '{\"epochs\": 1}')")
    engine.scalar("SELECT loom_deploy('c_m')")
    engine.rows("UPDATE loom.models SET coefficients = 'not json' WHERE name = 'c_m'")
    with pytest.raises(engine.errors, match=r"(?s)model 'c_m' is damaged.*loom_drop_model"):
        engine.scalar("SELECT loom_predict('c_m', ARRAY[1.0, 1.0, 1.0, 1.0, 1.0, 1.0])")
    dropped = json.loads(engine.scalar("SELECT loom_drop_model('c_m')"))
    assert dropped["dropped"] == "c_m" and len(dropped["functions"]) == 1
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'c_m'") == 0


@pytest.mark.parametrize("drop", ["SELECT loom_drop_index('c_x')", "DROP INDEX c_x"])
def test_an_index_whose_catalog_row_is_damaged_is_refused_and_can_be_dropped(indexed, drop):
    engine = indexed
    if drop.startswith("DROP") and engine.name == "postgres":
        pytest.skip("DROP INDEX of a loom_create_index index is loomdb's front-end's (DuckDB)")
    engine.scalar("SELECT loom_create_index('c_x', 'c_t', 'y', '{}')")
    engine.rows("UPDATE loom.indexes SET options = 'not json' WHERE name = 'c_x'")
    with pytest.raises(engine.errors) as info:
        engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"c_x\"}')")
    message = str(info.value)
    assert "index 'c_x' is damaged: its catalog column options is not JSON" in message
    assert "loom_drop_index('c_x')" in message and "JSONDecodeError" not in message
    engine.rows(drop)  # what can be dropped is: its storage table and its catalog row
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'loom_data'"
    assert engine.scalar(tables) == 0
    engine.scalar("SELECT loom_create_index('c_x', 'c_t', 'y', '{}')")


def test_a_storage_table_no_index_records_is_named_before_a_layout(indexed):
    """An index's catalog row deleted by hand leaves its storage table behind: an index of
    that name laid its rows out, then failed on the engine's bare "another entry with this
    name already exists" (PostgreSQL: "relation … already exists")."""
    engine = indexed
    engine.scalar("SELECT loom_create_index('c_x', 'c_t', 'y', '{}')")
    engine.rows("DELETE FROM loom.indexes WHERE name = 'c_x'")
    with pytest.raises(engine.errors) as info:
        engine.scalar("SELECT loom_create_index('c_x', 'c_t', 'y', '{}')")
    message = str(info.value)
    assert "loom_data" in message and "no index records" in message
    assert 'DROP TABLE loom_data."c_x"' in message and "already exists" not in message
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0
    engine.rows('DROP TABLE loom_data."c_x"')  # what the hint says
    engine.scalar("SELECT loom_create_index('c_x', 'c_t', 'y', '{}')")
