"""loomdb's SQL front-end: a pure statement rewriter built on sqlglot.

``process(sql, dialect, catalog)`` splits a script into statements (:mod:`.script`) and rewrites
each (:mod:`.rewrite`): loomdb's own forms — ``CREATE INDEX … USING mlweaving|toc|dense``
(:mod:`.create_index`), DoppioDB's ``create_mlweaving`` / ``train_mlweaving`` /
``infer_mlweaving`` (:mod:`.doppio`), ``DROP INDEX`` / ``REINDEX INDEX`` of a loomdb index
(:mod:`.maintenance`) — become calls of loomdb's SQL functions (named with the schema
``Catalog.functions_schema`` gives: on PostgreSQL the extension's); every other statement is
returned exactly as written.  ``statements`` does the same lazily, rewriting each statement only
when the one before it has run (a script may create the index its next statement drops).  The
DuckDB connection and ``loomdb sql`` run ``pieces`` and ``rewritten`` through
``steps.Script``, which does the same and says, when a statement fails, what had run.
"""

from __future__ import annotations

from collections.abc import Iterator

from loomdb.frontend.catalog import Catalog
from loomdb.frontend.rewrite import may_claim, rewrite
from loomdb.frontend.script import DIALECTS, plain, split


def pieces(sql: str, dialect: str) -> list[str]:
    """The statements of ``sql`` as written, none rewritten yet: pass each to :func:`rewritten`
    just before it runs (a script may create the index its next statement drops).  One plain
    statement (``script.plain``: no semicolon, comment or backslash) is itself, stripped,
    without tokenizing it."""
    if dialect in DIALECTS and plain(sql):
        return [stripped] if (stripped := sql.strip()) else []
    return split(sql, dialect)


def rewritten(piece: str, dialect: str, catalog: Catalog | None = None) -> str:
    """One statement of :func:`pieces` rewritten; one that names no form of loomdb's
    (``rewrite.may_claim``) is itself, without tokenizing it."""
    return rewrite(piece, dialect, catalog) if may_claim(piece) else piece


def statements(sql: str, dialect: str, catalog: Catalog | None = None) -> Iterator[str]:
    """The statements to run, each rewritten just before it is handed out (:func:`pieces`,
    :func:`rewritten`)."""
    for piece in pieces(sql, dialect):
        yield rewritten(piece, dialect, catalog)


def process(sql: str, dialect: str, catalog: Catalog | None = None) -> list[str]:
    """Every statement of ``sql``, rewritten for ``dialect`` ("duckdb" or "postgres")."""
    return list(statements(sql, dialect, catalog))


__all__ = ["Catalog", "pieces", "process", "rewrite", "rewritten", "split", "statements"]
