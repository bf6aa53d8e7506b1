"""``DROP INDEX`` and ``REINDEX INDEX`` of a loomdb index → ``loom_drop_index`` / ``loom_reindex``.
No paper section.

::

    DROP INDEX [IF EXISTS] [CONCURRENTLY] name   →  SELECT loom_drop_index('name')
    REINDEX INDEX [CONCURRENTLY] name            →  SELECT loom_reindex('name')

Only names the catalog knows as loomdb indexes are rewritten; every other statement passes
through unchanged, so the engine drops its own indexes.  ``DROP INDEX IF EXISTS`` of a name that
is no loomdb index therefore reaches the engine as written, which does nothing (or drops its own
index of that name); that is why ``loom_drop_index`` takes the name alone.  ``CONCURRENTLY`` is
accepted and ignored (a loomdb index is dropped or rebuilt in one transaction); ``CASCADE``, and
several names in one statement of which one is loomdb's, are refused.  Names are read as the
engine reads them (``calls.token_name``: on PostgreSQL unquoted ones folded to lower case; quotes
removed, a schema kept as ``s.name``); the catalog decides what matches and passes the name as
it spells it (on DuckDB, whose identifiers ignore case, ``DROP INDEX WI`` drops ``wi``).

sqlglot cannot parse ``REINDEX`` (PostgreSQL's tokenizer keeps its tail as one string), so that
statement is read from its tokens: the tail after ``REINDEX`` is tokenized again.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomSyntaxError
from loomdb.frontend.calls import loom_call, qualified_name, token_name
from loomdb.frontend.catalog import Catalog
from loomdb.frontend.script import tokenize


def drop_index_call(tree: exp.Drop, dialect: str, catalog: Catalog | None) -> str | None:
    """The ``loom_drop_index`` call, or None when no loomdb index is dropped."""
    if str(tree.args.get("kind") or "").upper() != "INDEX" or catalog is None:
        return None
    tables = tree.args.get("tables") or [tree.this]
    names = [qualified_name(t) for t in tables if isinstance(t, exp.Table)]
    ours = [found for n in names if (found := catalog.index_name(n)) is not None]
    if not ours:
        return None
    if len(tables) > 1:
        raise LoomSyntaxError(
            f"DROP INDEX names several indexes and {ours[0]} is a loomdb index",
            hint=f"drop loomdb indexes one per statement: DROP INDEX {ours[0]}",
        )
    if tree.args.get("cascade"):
        raise LoomSyntaxError(
            f"DROP INDEX {ours[0]} CASCADE: a loomdb index has no dependent objects to cascade to",
            hint=f"write DROP INDEX {ours[0]}",
        )
    return loom_call("loom_drop_index", ours[0], dialect=dialect)


def _drop_names(tokens: list[Token], dialect: str) -> list[str]:
    """The names ``DROP INDEX [CONCURRENTLY] [IF EXISTS] a, s.b [CASCADE]`` lists, read from
    its tokens (sqlglot cannot parse several names); a name that is not one is left out."""
    words = [t.text.upper() for t in tokens]
    start = 2
    for skip in (["CONCURRENTLY"], ["IF", "EXISTS"]):
        if words[start : start + len(skip)] == skip:
            start += len(skip)
    end = len(tokens) - (words[-1:] in (["CASCADE"], ["RESTRICT"]))
    names: list[str] = []
    part: list[Token] = []
    for token in [*tokens[start:end], None]:
        if token is None or token.token_type == TokenType.COMMA:
            if (name := _name(part, dialect)) is not None:
                names.append(name)
            part = []
        else:
            part.append(token)
    return names


def refuse_several_drops(tokens: list[Token], dialect: str, catalog: Catalog | None) -> None:
    """Refuse a ``DROP INDEX`` of several names one of which is a loomdb index: the engine
    would drop the others and leave it (or, with ``IF EXISTS``, skip it without a word)."""
    names = _drop_names(tokens, dialect)
    ours = [f for n in names if catalog is not None and (f := catalog.index_name(n)) is not None]
    if len(names) > 1 and ours:
        raise LoomSyntaxError(
            f"DROP INDEX names several indexes and {ours[0]} is a loomdb index",
            hint=f"drop loomdb indexes one per statement: DROP INDEX {ours[0]}",
        )


def _name(tokens: list[Token], dialect: str) -> str | None:
    """``a`` or ``s.a`` from name tokens (identifiers separated by dots), else None."""
    parts, dots = tokens[0::2], tokens[1::2]
    if not parts or len(tokens) % 2 == 0 or any(d.token_type != TokenType.DOT for d in dots):
        return None
    if any(p.token_type in (TokenType.STRING, TokenType.NUMBER) for p in parts):
        return None
    return ".".join(token_name(p, dialect) for p in parts)


def reindex_call(
    statement: str, tokens: list[Token], dialect: str, catalog: Catalog | None
) -> str | None:
    """The ``loom_reindex`` call for ``REINDEX INDEX name`` of a loomdb index, else None."""
    if catalog is None or not tokens:
        return None
    try:
        tail = tokenize(statement[tokens[0].end + 1 :], dialect)
    except TokenError:
        return None
    words = [t.text.upper() for t in tail[:2]]
    if not words or words[0] != "INDEX":
        return None
    name = _name(tail[2:] if words[1:] == ["CONCURRENTLY"] and len(tail) > 2 else tail[1:], dialect)
    found = catalog.index_name(name) if name is not None else None
    return loom_call("loom_reindex", found, dialect=dialect) if found is not None else None
