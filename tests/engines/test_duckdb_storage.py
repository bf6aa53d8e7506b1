"""DuckDB keeps an index's payloads as the format wrote them: a checkpoint does not compress them
again (they would be decompressed at every epoch's read)."""

from __future__ import annotations

import loomdb


def test_payloads_stay_uncompressed_through_a_checkpoint(tmp_path):
    con = loomdb.connect(str(tmp_path / "s.duckdb"), progress=False)
    con.execute(
        "CREATE TABLE t AS SELECT CAST(i % 7 AS DOUBLE) AS a, CAST(i % 3 AS DOUBLE) AS b, "
        "CAST(i % 2 AS DOUBLE) AS y FROM range(20000) r(i)"
    )
    for fmt in ("dense", "toc"):
        con.execute(f"SELECT loom_create_index('t_{fmt}', 't', 'y', '{{\"format\": \"{fmt}\"}}')")
    con.duckdb.execute("CHECKPOINT")
    for fmt in ("dense", "toc"):
        kinds = con.duckdb.sql(
            f"SELECT DISTINCT compression FROM pragma_storage_info('loom_data.t_{fmt}') "
            "WHERE column_name = 'payload' AND segment_type = 'BLOB'"
        ).fetchall()
        assert kinds == [("Uncompressed",)]
    trained = con.execute("SELECT loom_train('m', NULL, NULL, '{\"index\": \"t_toc\"}')")
    assert '"model": "m"' in trained.fetchone()[0]
    con.close()


def test_inserted_blobs_arrive_byte_for_byte():
    import duckdb

    from loomdb.engines.duckdb.database import DuckDatabase
    from loomdb.engines.duckdb.state import ConnectionState

    raw = duckdb.connect()
    raw.execute("CREATE TABLE s (n BIGINT, payload BLOB)")
    payloads = [b"", b"\x00\xff" * 3, memoryview(b"view"), bytearray(b"array"), None]
    rows = [(i, p) for i, p in enumerate(payloads)]
    db = DuckDatabase(raw, ConnectionState("test"))
    db.insert("s", ["n", "payload"], rows)
    db.insert("s", ["n", "payload"], rows[:4])  # without a NULL: one joined buffer
    got = raw.execute("SELECT n, payload FROM s ORDER BY n, payload IS NULL").fetchall()
    want = sorted(
        [(i, None if p is None else bytes(p)) for i, p in rows + rows[:4]],
        key=lambda r: (r[0], r[1] is None),
    )
    assert got == want
