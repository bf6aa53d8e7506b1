"""An index's minibatches are written to a staged table that becomes the index's storage table
only in the transaction recording the index: a layout that fails leaves neither, and a reindex
that fails leaves the old index as it was (``layout.build``, ``Database.staged``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loomdb.errors import LoomDatabaseError
from loomdb.store import layout, storage

pytestmark = pytest.mark.postgres

LOOM_TABLES = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'loom_data'"
NAN = "CAST('NaN' AS DOUBLE PRECISION)"


def load(engine, n: int = 2000) -> None:
    X = np.random.default_rng(3).normal(size=(n, 2))
    engine.load("src", X, (X[:, 0] > 0).astype(float))


def index_row(engine) -> list[tuple]:
    return engine.rows("SELECT uid, batches FROM loom.indexes WHERE name = 'ix'")


@pytest.fixture
def failing_write(monkeypatch):
    """Once called, DuckDB's layouts (in this process) write each minibatch as soon as it is
    encoded, and the third write fails as a full disk would; returns the relations written."""
    made: list[str] = []
    real = storage.write

    def write(db, relation, rows):
        made.append(relation)
        if len(made) == 3:
            raise LoomDatabaseError("no space left on device")
        real(db, relation, rows)

    def arm() -> list[str]:
        monkeypatch.setattr(layout, "FLUSH_BYTES", 0)
        monkeypatch.setattr(storage, "write", write)
        return made

    return arm


def test_a_refused_source_leaves_no_table_and_no_index(engine):
    load(engine)
    engine.rows(f'UPDATE src SET "x1" = {NAN} WHERE "x0" = (SELECT max("x0") FROM src)')
    with pytest.raises(engine.errors, match="NaN or infinite"):
        engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{}')")
    assert engine.rows(LOOM_TABLES) == [] and index_row(engine) == []
    engine.rows(f'UPDATE src SET "x1" = 0 WHERE "x1" = {NAN}')
    made = json.loads(engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{}')"))
    assert made["rows"] == 2000 and engine.rows(LOOM_TABLES) == [("ix",)]


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_a_layout_failing_midway_leaves_no_table_and_no_index(engine, failing_write):
    load(engine)
    written = failing_write()
    with pytest.raises(engine.errors, match="no space left"):
        engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{\"batch_size\": 100}')")
    assert len(written) == 3 and all("staged$" in r for r in written)
    assert engine.rows(LOOM_TABLES) == [] and index_row(engine) == []


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_a_reindex_failing_midway_leaves_the_old_index_readable(engine, failing_write):
    load(engine)
    engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{\"batch_size\": 100}')")
    before = index_row(engine)
    failing_write()
    with pytest.raises(engine.errors, match="no space left"):
        engine.scalar("SELECT loom_reindex('ix')")
    assert index_row(engine) == before and engine.rows(LOOM_TABLES) == [("ix",)]
    trained = engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"ix\"}')")
    assert json.loads(trained)["rows"] == 2000


def test_a_reindex_replaces_the_storage_table(engine):
    load(engine)
    engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{\"batch_size\": 100}')")
    before = index_row(engine)
    engine.scalar("SELECT loom_reindex('ix')")
    after = index_row(engine)
    assert after[0][0] != before[0][0] and after[0][1] == before[0][1] == 20
    assert engine.rows(LOOM_TABLES) == [("ix",)]
    trained = engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"ix\"}')")
    assert json.loads(trained)["rows"] == 2000


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_duckdb_drops_a_staged_table_its_process_abandoned(engine):
    load(engine)
    abandoned = 'loom_data."staged$' + "0" * 32 + '"'  # a process killed mid-layout left it
    engine.con.duckdb.execute(f"CREATE TABLE {abandoned} (batch BIGINT)")
    engine.con.duckdb.execute('CREATE TABLE loom_data."staged$mine" (batch BIGINT)')
    engine.scalar("SELECT loom_create_index('ix', 'src', 'y', '{}')")
    assert sorted(engine.rows(LOOM_TABLES)) == [("ix",), ("staged$mine",)]
