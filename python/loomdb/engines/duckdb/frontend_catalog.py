"""Run SQL text through loomdb's front-end with this connection's catalog.  No paper section."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loomdb.frontend import statements as rewritten
from loomdb.store.sql_catalog import DbCatalog


def statements(conn: Any, sql: str) -> Iterator[str]:
    return rewritten(sql, "duckdb", DbCatalog(conn.database()))
