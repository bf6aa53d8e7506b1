"""Run SQL text through loomdb's front-end with this connection's catalog.  No paper section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loomdb import frontend
from loomdb.store.sql_catalog import DbCatalog


def pieces(conn: Any, sql: str) -> tuple[list[str], Callable[[str], str]]:
    """The statements of ``sql`` not yet rewritten, and what rewrites one just before it runs
    (the catalog opened when a statement first needs it)."""
    catalog: list[DbCatalog] = []

    def rewrite(piece: str) -> str:
        if not frontend.may_claim(piece):
            return piece
        if not catalog:
            catalog.append(DbCatalog(conn.database()))
        return frontend.rewritten(piece, "duckdb", catalog[0])

    return frontend.pieces(sql, "duckdb"), rewrite
