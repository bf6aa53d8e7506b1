"""What the distributed runner sends its workers pickles with Python's own pickle: DuckDB's
reads hand over the stored minibatches as views of an Arrow result, which pickle refuses
(Dask then fell back to a deep serialisation, in which a finalizer once overflowed the stack
and failed a train)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import loomdb
from loomdb.distributed.runner import shippable
from loomdb.engines.duckdb.database import DuckDatabase
from loomdb.store import layout


def test_stored_minibatches_are_shipped_as_bytes():
    con = loomdb.connect(progress=False)
    rng = np.random.default_rng(0)
    con.execute("CREATE TABLE t (a DOUBLE, b DOUBLE, y DOUBLE)")
    rows = [(float(a), float(b), float(a > b)) for a, b in rng.normal(size=(600, 2))]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    con.execute("SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"toc\"}')").fetchall()
    laid = layout.open_index(DuckDatabase(con.duckdb.cursor(), con.state), "ix")
    stored = list(laid.read_stored(0, laid.info.batches, laid.fmt.parts(32)))
    assert any(isinstance(p, memoryview) for s in stored for p in s.parts)  # what DuckDB gives
    with pytest.raises(TypeError):
        pickle.dumps(stored)
    shipped = pickle.loads(pickle.dumps([shippable(s) for s in stored]))
    assert [(s.batch, s.rows) for s in shipped] == [(s.batch, s.rows) for s in stored]
    assert [[bytes(p) for p in s.parts] for s in stored] == [s.parts for s in shipped]
    con.close()
