"""loomdb's SQL front-end: ``process(sql, dialect, catalog)`` → the statements to run.

Used by ``loomdb.connect()``'s ``execute``/``sql`` and by ``loomdb sql`` on both engines.
"""

from __future__ import annotations

from collections.abc import Iterator

from loomdb.frontend.ddl import Catalog, rewrite
from loomdb.frontend.script import split


def statements(sql: str, dialect: str, catalog: Catalog | None = None) -> Iterator[str]:
    """The statements to run, each rewritten only when the one before it has run (a script
    may create the index its next statement drops)."""
    for text, toks in split(sql, dialect):
        yield rewrite(text, toks, dialect, catalog)


def process(sql: str, dialect: str, catalog: Catalog | None = None) -> list[str]:
    """All statements rewritten up front (for scripts that do not depend on themselves)."""
    return list(statements(sql, dialect, catalog))


__all__ = ["Catalog", "process", "rewrite", "split", "statements"]
