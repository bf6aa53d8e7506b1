"""DuckDB's shuffled reads of a source (engines/duckdb/database.py): the rows are sorted before
their values are computed, and arrive in the shuffle key's order all the same, in chunks, on
DuckDB's threads, through a filter."""

from __future__ import annotations

import numpy as np

import loomdb

ROWS = 300_000  # three of DuckDB's row groups: its threads scan them in parallel


def test_a_shuffled_read_arrives_in_the_shuffle_keys_order_as_computed_values():
    db = loomdb.connect(":memory:", progress=False).database()
    db.execute(
        f"CREATE TABLE t AS SELECT i AS id, (i % 7)::DOUBLE AS a, 'c' || (i % 5) AS s "
        f"FROM range({ROWS}) r(i)"
    )
    exprs = ['CAST("id" AS DOUBLE)', "(CASE WHEN s = 'c1' THEN 1.0 ELSE 0.0 END)", "a * 2"]
    chunks = list(db.read_matrix("t", exprs, "a <> 3", 42, 8192))
    got = np.concatenate(chunks)
    # the order of the same sort with the values computed first (how the read was written)
    expected = db.query(
        "SELECT CAST(id AS DOUBLE) FROM (SELECT *, row_number() OVER () AS loom_rn FROM t "
        "WHERE a <> 3) loom_a ORDER BY hash(loom_rn, 42), loom_rn"
    )
    ids = got[:, 0].astype(np.int64)
    assert len(chunks) > 1 and got.flags.c_contiguous
    assert np.array_equal(got[:, 0], np.array(expected)[:, 0])
    assert not np.array_equal(ids, np.sort(ids))  # shuffled
    assert np.array_equal(got[:, 1], (ids % 5 == 1).astype(float))
    assert np.array_equal(got[:, 2], (ids % 7) * 2.0)
    stored = np.concatenate(list(db.read_matrix("t", exprs, None, None, 8192)))
    assert np.array_equal(stored[:, 0], np.arange(ROWS))  # without a seed: as stored
