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


def _versioned_table(c: psycopg.Connection) -> None:
    """Table vs_src and its index vs, whatever a failed test before left."""
    c.execute("SELECT loom_drop_model(name) FROM loom.models WHERE name = 'vs_m'")
    c.execute("SELECT loom_drop_index(name) FROM loom.indexes WHERE name = 'vs'")
    c.execute("DROP TABLE IF EXISTS vs_src")
    c.execute(
        "CREATE TABLE vs_src AS SELECT i AS id, i * 0.1 AS a, sqrt(i) AS b, "
        "(i % 2)::float8 AS y FROM generate_series(1, 300) i"
    )
    c.execute(
        "SELECT loom_create_index('vs', 'vs_src', 'y', "
        '\'{"format": "dense", "features": ["a", "b"]}\')'
    )


VS_TRAIN = (
    'SELECT loom_train(\'vs_m\', NULL, \'y\', \'{"index": "vs", "epochs": 1, '
    '"replace": true, "progress": false}\')'
)


def test_a_table_whose_row_versions_are_as_recorded_is_fresh_without_hashing_its_values(
    pg_dsn,
):
    """A plain table's row versions and columns, recorded with the fingerprint in the same
    snapshot, vouch for it while they stay (no value is read: the fingerprint recorded here is
    one no table has); a new row version, even of the same values, falls to the
    fingerprint."""
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        _versioned_table(c)
        (versions,) = c.execute(
            "SELECT stats::json->>'versions' FROM loom.indexes WHERE name = 'vs'"
        ).fetchone()
        assert versions.startswith(dialect.VERSIONS)
        c.execute(
            "UPDATE loom.indexes SET source_signature = %s WHERE name = 'vs'",
            [f"{dialect.COLUMN_HASH}0:0"],
        )
        c.execute(VS_TRAIN)  # the row versions vouch
        c.execute("UPDATE vs_src SET a = a WHERE id = 1")
        with pytest.raises(psycopg.Error, match="older than the last change"):
            c.execute(VS_TRAIN)  # the fingerprint decides: the one recorded is no table's
        c.execute("SELECT loom_drop_model('vs_m'), loom_drop_index('vs')")
        c.execute("DROP TABLE vs_src")


VERSION_CHANGES = {  # each changes what training reads, each with new row versions or columns
    "a row inserted": "INSERT INTO vs_src VALUES (301, 1.5, 2.5, 1)",
    "a row deleted": "DELETE FROM vs_src WHERE id = 7",
    "a label (HOT update)": "UPDATE vs_src SET y = 1 - y WHERE id = 3",
    "rows replaced": "TRUNCATE vs_src; INSERT INTO vs_src SELECT i, i * 0.2, i, 1 "
    "FROM generate_series(1, 300) i",
    "a column retyped": "ALTER TABLE vs_src ALTER COLUMN b TYPE real",
    "two columns' names swapped": "ALTER TABLE vs_src RENAME a TO t; "
    "ALTER TABLE vs_src RENAME b TO a; ALTER TABLE vs_src RENAME t TO b",
    "the table replaced": "DROP TABLE vs_src; CREATE TABLE vs_src AS SELECT i AS id, "
    "i * 0.1 AS a, sqrt(i) AS b, ((i + 1) % 2)::float8 AS y FROM generate_series(1, 300) i",
}
UNCHANGED = {  # new row versions or places, the same values: the fingerprint finds it fresh
    "values set to themselves": "UPDATE vs_src SET a = a, b = b",
    "the table rewritten": "VACUUM FULL vs_src",
    "a column added": "ALTER TABLE vs_src ADD COLUMN note text",
}


@pytest.mark.parametrize("change", [*VERSION_CHANGES, *UNCHANGED])
def test_row_versions_tell_every_change_the_fingerprint_does(pg_dsn, change):
    """Each change of what training reads is refused as before the row versions were
    recorded; a table whose versions changed but not its values stays fresh."""
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        _versioned_table(c)
        c.execute(VS_TRAIN)
        c.execute({**VERSION_CHANGES, **UNCHANGED}[change])
        if change in VERSION_CHANGES:
            with pytest.raises(psycopg.Error, match="older than the last change"):
                c.execute(VS_TRAIN)
        else:
            c.execute(VS_TRAIN)
        c.execute("SELECT loom_drop_model('vs_m'), loom_drop_index('vs')")
        c.execute("DROP TABLE vs_src")
