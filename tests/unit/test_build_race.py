"""An index build reads its source in several statements (``store/layout.build``): where the
engine names a table's row versions (PostgreSQL's xmin and ctid), rows another session writes
between the layout read and the fingerprint would leave an index missing them under a
fingerprint that vouches for them.  DuckDB names none, so the versions are stood in here; the
versions themselves are tested on PostgreSQL (tests/engines/test_fingerprint.py)."""

from __future__ import annotations

import pytest

import loomdb
from loomdb.engines.duckdb.database import DuckDatabase


@pytest.mark.parametrize("written", [False, True], ids=["unwritten", "written meanwhile"])
def test_a_source_written_while_its_index_is_built_is_refused(monkeypatch, written):
    now = {"versions": "v1"}

    def read_first(self, table):
        return now["versions"]

    def fingerprinted(self, relation, columns, where, table):
        if written:
            now["versions"] = "v2"  # another session's rows committed during the layout
        return DuckDatabase.signature(self, relation, columns, where), now["versions"]

    monkeypatch.setattr(DuckDatabase, "row_versions", read_first)
    monkeypatch.setattr(DuckDatabase, "signature_and_versions", fingerprinted)
    con = loomdb.connect(progress=False)
    con.execute(
        "CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 2)::DOUBLE AS y FROM range(300) r(i)"
    )
    build = "SELECT loom_create_index('ix', 't', 'y', '{\"format\": \"dense\"}')"
    tables = "SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL"
    before = con.execute(tables).fetchall()
    if not written:
        con.execute(build).fetchall()
        assert con.execute("SELECT count(*) FROM loom.indexes").fetchone() == (1,)
        return
    with pytest.raises(loomdb.LoomStateError, match="was written to while index ix was built"):
        con.execute(build).fetchall()
    assert con.execute("SELECT count(*) FROM loom.indexes").fetchone() == (0,)
    assert con.execute(tables).fetchall() == before  # no storage table left behind
    con.close()
