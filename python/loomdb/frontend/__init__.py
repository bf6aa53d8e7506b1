"""loomdb's SQL front-end: a pure statement rewriter built on sqlglot.

``process(sql, dialect, catalog)`` splits a script into statements (:mod:`.script`) and rewrites
each (:mod:`.rewrite`): loomdb's own forms — ``CREATE INDEX … USING mlweaving|toc|dense``
(:mod:`.create_index`), DoppioDB's ``create_mlweaving`` / ``train_mlweaving`` /
``infer_mlweaving`` (:mod:`.doppio`), ``DROP INDEX`` / ``REINDEX INDEX`` of a loomdb index
(:mod:`.maintenance`) — become calls of loomdb's SQL functions; every other statement is
returned exactly as written.  ``statements`` does the same lazily, rewriting each statement only
when the one before it has run (a script may create the index its next statement drops); the
DuckDB connection and ``loomdb sql`` use it.
"""

from __future__ import annotations

from collections.abc import Iterator

from loomdb.frontend.catalog import Catalog
from loomdb.frontend.rewrite import may_claim, rewrite
from loomdb.frontend.script import DIALECTS, plain, split


def statements(sql: str, dialect: str, catalog: Catalog | None = None) -> Iterator[str]:
    """The statements to run, each rewritten just before it is handed out.  One plain
    statement that names no form of loomdb's (``script.plain``, ``rewrite.may_claim``) is
    handed out as ``split`` and ``rewrite`` would give it, stripped, without tokenizing it."""
    if dialect in DIALECTS and plain(sql) and not may_claim(sql):
        if stripped := sql.strip():
            yield stripped
        return
    for statement in split(sql, dialect):
        yield rewrite(statement, dialect, catalog)


def process(sql: str, dialect: str, catalog: Catalog | None = None) -> list[str]:
    """Every statement of ``sql``, rewritten for ``dialect`` ("duckdb" or "postgres")."""
    return list(statements(sql, dialect, catalog))


__all__ = ["Catalog", "process", "rewrite", "split", "statements"]
