"""An index's fingerprint of its source (``store/layout.check_fresh``) on PostgreSQL: the row's
values hashed (``engines/postgres/dialect.signature_query``), and a fingerprint an earlier
version recorded by hashing the row's text still checked its own way."""

from __future__ import annotations

import psycopg
import pytest

from loomdb.engines.postgres import dialect

pytestmark = pytest.mark.postgres


def test_an_index_fingerprinted_by_an_earlier_version_is_checked_its_way(pg_dsn):
    """Indexes record a fingerprint of their source; earlier versions hashed each row's text,
    loomdb now hashes the row's values (``hash_record_extended``, 6x faster here).  An index
    recorded the earlier way stays fresh, and still goes stale when its source changes."""
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
        assert recorded.startswith(dialect.RECORD_HASH)
        columns = ['CAST("a" AS double precision)', 'CAST("y" AS double precision)']
        old = c.execute(dialect.signature_query("printed_src", columns, None, record=False))
        n, total = old.fetchone()
        assert f"{n}:{total}" != recorded.removeprefix(dialect.RECORD_HASH)
        c.execute(
            "UPDATE loom.indexes SET source_signature = %s WHERE name = 'printed'", [f"{n}:{total}"]
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
