"""PostgreSQL's packed reads (engines/postgres/dialect.py): the rows arrive in one order, the
shuffle key's or the stored one, whatever the chunk size and however many rows the caller
said the read returns; a shuffled read's chunks are about the size asked."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from loomdb.engines.postgres import dialect

pytestmark = pytest.mark.postgres

ROWS = 3001


@pytest.fixture(scope="module")
def conn(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        rng = np.random.default_rng(5)
        c.execute("DROP TABLE IF EXISTS packed_src")
        c.execute("CREATE TABLE packed_src (a float8, b integer, ix int4[], v float8[])")
        width = rng.integers(0, 4, ROWS)
        with c.cursor() as cur:
            cur.executemany(
                "INSERT INTO packed_src VALUES (%s, %s, %s, %s)",
                [
                    (float(rng.normal()), int(rng.integers(-9, 9)), list(range(k)), [0.5 * i] * k)
                    for i, k in enumerate(width.tolist())
                ],
            )
        yield c
        c.execute("DROP TABLE packed_src")


def _expected(conn, seed):
    query = dialect.rows_query("packed_src", ["a", "b", "cardinality(v)"], None, seed)
    return np.array(conn.execute(query).fetchall(), dtype=np.float64)


@pytest.mark.parametrize("seed", [7, None])
@pytest.mark.parametrize(
    "chunk,rows", [(64, ROWS), (1000, ROWS), (5000, ROWS), (64, 1), (7, 10**9)]
)
def test_dense_reads_come_in_one_order_whatever_the_chunks(conn, seed, chunk, rows):
    query = dialect.packed_rows_query("packed_src", ["a", "b"], None, seed, chunk, rows)
    chunks = [dialect.decode_packed_rows(bytes(b), 2) for (b,) in conn.execute(query).fetchall()]
    assert np.array_equal(np.vstack(chunks), _expected(conn, seed)[:, :2])
    sizes = [len(c) for c in chunks]
    if seed is None:  # stored order: chunks of exactly ``chunk`` rows
        assert sizes[:-1] == [chunk] * (len(sizes) - 1)
    elif rows == ROWS:  # shuffled, told the rows: about ``chunk`` rows a chunk
        assert chunk / 2 * 0.8 <= ROWS / len(sizes) <= chunk * 1.2


@pytest.mark.parametrize("seed", [7, None])
@pytest.mark.parametrize("chunk,rows", [(64, ROWS), (5000, ROWS), (64, 1)])
def test_sparse_reads_come_in_the_dense_order(conn, seed, chunk, rows):
    query = dialect.packed_sparse_query("packed_src", "a", "ix", "v", None, seed, chunk, rows)
    got = [dialect.decode_packed_sparse(bytes(h), bytes(b), 4) for h, b in conn.execute(query)]
    expected = _expected(conn, seed)
    assert np.array_equal(np.concatenate([y for y, _ in got]), expected[:, 0])
    lengths = np.concatenate([np.diff(rows.indptr) for _, rows in got])
    assert np.array_equal(lengths, expected[:, 2])


def test_a_shuffled_read_must_say_how_many_rows_it_returns():
    with pytest.raises(ValueError, match="number of rows"):
        dialect.packed_rows_query("packed_src", ["a"], None, 7, 64, None)
    assert "loom_g" in dialect.packed_rows_query("packed_src", ["a"], None, None, 64, None)


def test_a_train_reads_its_source_from_the_first_page(pg_dsn):
    """A scan that joined another one mid-table would number (and so shuffle) the rows
    differently: the train's transaction turns synchronize_seqscans off."""
    with psycopg.connect(pg_dsn) as c:  # one transaction
        c.execute(
            "CREATE TEMP TABLE seq_src AS SELECT g::float8 AS x, g % 2 AS y "
            "FROM generate_series(1, 50) g"
        )
        assert c.execute("SHOW synchronize_seqscans").fetchone()[0] == "on"
        c.execute("SELECT loom_train('seq_m', 'seq_src', 'y', '{\"epochs\": 1}')")
        assert c.execute("SHOW synchronize_seqscans").fetchone()[0] == "off"
        c.rollback()
        assert c.execute("SHOW synchronize_seqscans").fetchone()[0] == "on"
