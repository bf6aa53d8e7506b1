"""An index's fingerprint of its source (``store/layout.check_fresh``) on PostgreSQL: each value
hashed by its type's function, the row their XOR (``engines/postgres/dialect.signature_query``),
which sees a value changed, moved to another row or column, or turned NULL; fingerprints earlier
versions recorded (the row hashed as a record, or its text) still checked their own way."""

from __future__ import annotations

import psycopg
import pytest

from loomdb.engines.postgres import dialect

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("how", [dialect.RECORD_HASH, dialect.TEXT_HASH], ids=["record", "text"])
def test_an_index_fingerprinted_by_an_earlier_version_is_checked_its_way(pg_dsn, how):
    """Indexes record a fingerprint of their source; earlier versions hashed each row as a
    record or its text, loomdb now hashes each value.  An index recorded an earlier way stays
    fresh, and still goes stale when its source changes."""
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS printed_src")
        c.execute(
            "CREATE TABLE printed_src AS SELECT i::float8 AS a, (i % 2)::float8 AS y "
            "FROM generate_series(1, 600) i"
        )
        c.execute(
            "SELECT loom_create_index('printed', 'printed_src', 'y', '{\"format\": \"dense\"}')"
        )
        (recorded,) = c.execute(
            "SELECT source_signature FROM loom.indexes WHERE name = 'printed'"
        ).fetchone()
        assert recorded.startswith(dialect.COLUMN_HASH)
        columns = ['CAST("a" AS double precision)', 'CAST("y" AS double precision)']
        old = c.execute(dialect.signature_query("printed_src", columns, None, how))
        n, total = old.fetchone()
        assert f"{n}:{total}" != recorded.removeprefix(dialect.COLUMN_HASH)
        c.execute(
            "UPDATE loom.indexes SET source_signature = %s WHERE name = 'printed'",
            [f"{how}{n}:{total}"],
        )
        train = (
            "SELECT loom_train('printed_m', NULL, 'y', '{\"index\": \"printed\", "
            '"epochs": 1, "replace": true, "progress": false}\')'
        )
        c.execute(train)  # fresh: the earlier fingerprint, computed its own way
        c.execute("UPDATE printed_src SET a = a + 1 WHERE a = 7")
        with pytest.raises(psycopg.Error, match="older than the last change"):
            c.execute(train)
        c.execute("SELECT loom_drop_model('printed_m'), loom_drop_index('printed')")
        c.execute("DROP TABLE printed_src")


CHANGES = {  # each a change of the source that training would see
    "a value": "UPDATE fp_src SET a = a + 0.5 WHERE id = 3",
    "two rows' labels swapped": "UPDATE fp_src SET y = 1 - y WHERE id IN (1, 2)",
    "a row's two values swapped": "UPDATE fp_src SET a = b, b = a WHERE id = 4",
    "a value turned NULL": "UPDATE fp_src SET b = NULL WHERE id = 5",
    "a row deleted": "DELETE FROM fp_src WHERE id = 6",
    "an array element": "UPDATE fp_src SET v = ARRAY[v[2], v[1]] WHERE id = 7",
    "a byte": "UPDATE fp_src SET raw = '\\x00ff' WHERE id = 8",
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_values_hash_sees_what_training_would(pg_dsn, change):
    """The fingerprint of every type a source may hold (numbers, arrays, bytes) changes with
    each change in ``CHANGES``, and not without one."""
    columns = ["CAST(a AS FLOAT8)", "CAST(b AS FLOAT8)", "CAST(y AS FLOAT8)", "n", "v", "raw"]
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS fp_src")
        c.execute(
            "CREATE TABLE fp_src AS SELECT i AS id, i * 1.5 AS a, i * 1.5 + 1 AS b, "
            "(i % 2)::float8 AS y, i::int4 AS n, ARRAY[i, i + 1]::float8[] AS v, "
            "decode(lpad(to_hex(i), 4, '0'), 'hex') AS raw FROM generate_series(1, 20) i"
        )
        types = [
            t
            for (t,) in c.execute(
                "SELECT atttypid::int FROM pg_attribute WHERE attrelid = 'fp_src'::regclass "
                "AND attname IN ('a', 'b', 'y', 'n', 'v', 'raw') ORDER BY attnum"
            )
        ]
        types[:3] = [701, 701, 701]  # the casts
        query = dialect.signature_query("fp_src", columns, None, dialect.COLUMN_HASH, types)
        before = c.execute(query).fetchone()
        assert c.execute(query).fetchone() == before  # the same source, the same fingerprint
        c.execute(CHANGES[change])
        assert c.execute(query).fetchone() != before
        c.execute("DROP TABLE fp_src")
