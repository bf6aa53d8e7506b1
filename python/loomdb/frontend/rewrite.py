"""One statement in, the statement to run out: loomdb's forms rewritten, all others unchanged.

The statement's tokens decide first whether it may be loomdb's (``CREATE INDEX … USING
mlweaving|toc|dense``, ``CREATE INDEX … ON create_mlweaving(…)|train_mlweaving(…)``,
``infer_mlweaving(…)`` anywhere, ``DROP INDEX``, ``REINDEX``).  Anything else is returned as
the original text without being parsed, never as sqlglot's regenerated text, so engine-specific
syntax sqlglot would misread is never altered.  ``EXPLAIN`` and ``PREPARE … AS``, which sqlglot
keeps as a word and a string, have the query they wrap rewritten when it holds
``infer_mlweaving(…)``.

A statement that is loomdb's but that sqlglot cannot read — a parse error, or sqlglot's silent
fallback to ``exp.Command`` — raises LoomSyntaxError naming the expected form; a ``DROP INDEX``
sqlglot cannot read passes through, for the engine to judge.
"""

from __future__ import annotations

import difflib

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomOptionError, LoomSyntaxError
from loomdb.frontend.calls import fold_names
from loomdb.frontend.catalog import Catalog
from loomdb.frontend.create_index import (
    CREATE_FORM,
    create_index_call,
    formats,
    index_format,
    refuse_qualified_options,
)
from loomdb.frontend.doppio import (
    CREATE,
    FORMS,
    INFER,
    TRAIN,
    doppio_call,
    doppio_function,
    infer_query,
)
from loomdb.frontend.maintenance import (
    drop_index_call,
    refuse_alter,
    refuse_several_drops,
    reindex_call,
)
from loomdb.frontend.script import DIALECTS, tokenize

_WORDS = (TokenType.VAR, TokenType.IDENTIFIER)


def _followed_by(tokens: list[Token], first: TokenType, words: tuple[str, ...]) -> bool:
    """Whether a ``first`` token is directly followed by a bare word out of ``words``."""
    return any(
        a.token_type == first and b.token_type in _WORDS and b.text.lower() in words
        for a, b in zip(tokens, tokens[1:])
    )


def _calls(tokens: list[Token], function: str) -> bool:
    return any(
        a.token_type == TokenType.VAR and a.text.lower() == function and b.text == "("
        for a, b in zip(tokens, tokens[1:])
    )


def may_claim(text: str) -> bool:
    """Whether ``text`` holds a word every form :func:`claim` knows needs (``INDEX``, which
    ``REINDEX`` holds too, or ``infer_mlweaving``), compared as the tokens are, case folded; a
    statement without one is never rewritten, and need not be tokenized to know it."""
    upper = text.upper()
    return "INDEX" in upper or INFER.upper() in upper


# words that may stand between CREATE and INDEX: a loomdb index refuses each, so it must see them
_CREATE_MODIFIERS = {"OR", "REPLACE", "UNIQUE", "TEMP", "TEMPORARY"}


def _creates_index(words: list[str]) -> bool:
    """``CREATE [OR REPLACE] [UNIQUE] [TEMP] INDEX …``: CREATE, modifiers, then INDEX."""
    if words[:1] != ["CREATE"] or "INDEX" not in words:
        return False
    return all(w in _CREATE_MODIFIERS for w in words[1 : words.index("INDEX")])


def claim(tokens: list[Token]) -> str | None:
    """Which of loomdb's forms the statement may be: create, drop, reindex, alter (``ALTER
    INDEX``, ``COMMENT ON INDEX``: refused of a loomdb index), infer, or None."""
    words = [t.text.upper() for t in tokens[:6]]
    if words[:1] == ["REINDEX"]:
        return "reindex"
    if words[:2] == ["DROP", "INDEX"]:
        return "drop"
    if words[:2] == ["ALTER", "INDEX"] or words[:3] == ["COMMENT", "ON", "INDEX"]:
        return "alter"
    if _creates_index(words):
        ours = _followed_by(tokens, TokenType.USING, formats()) or any(
            _calls(tokens, f) for f in (CREATE, TRAIN)
        )
        if ours:
            return "create"
        _refuse_unknown_method(tokens)
    return "infer" if _calls(tokens, INFER) else None


def _refuse_unknown_method(tokens: list[Token]) -> None:
    """``USING weaving`` (a typo) or ``USING x … WITH (label = …)``: a loomdb index meant, with
    a method loomdb does not have — say which it has instead of letting the engine guess."""
    methods = formats()
    for a, b in zip(tokens, tokens[1:]):
        if a.token_type != TokenType.USING or b.token_type not in _WORDS:
            continue
        method = b.text.lower()
        close = difflib.get_close_matches(method, methods, n=1, cutoff=0.6)
        labelled = any(
            w.token_type == TokenType.WITH
            and p.token_type == TokenType.L_PAREN
            and x.text.lower() == "label"
            for w, p, x in zip(tokens, tokens[1:], tokens[2:])
        )
        if close or labelled:
            raise LoomSyntaxError(
                f"unknown index method '{b.text}'"
                + (f" (did you mean '{close[0]}'?)" if close else ""),
                hint=f"loomdb's index methods are {', '.join(sorted(set(methods)))}",
            )


def _expected(form: str) -> str:
    if form == "create":
        return f"{CREATE_FORM}, or {FORMS[CREATE]}, or {FORMS[TRAIN]}"
    return FORMS[INFER]


def _parse(statement: str, dialect: str, form: str) -> exp.Expression | None:
    """The statement's tree; None for a DROP sqlglot cannot read (it is the engine's)."""
    snippet = statement if len(statement) <= 80 else statement[:77] + "..."
    try:
        trees = [t for t in sqlglot.parse(statement, read=dialect) if t is not None]
    except (ParseError, ValueError) as e:  # ValueError: sqlglot's, for `label = ""`
        if form == "drop":
            return None
        first = e.errors[0] if isinstance(e, ParseError) and e.errors else {}
        where = f" near {first.get('highlight')!r}" if first.get("highlight") else ""
        raise LoomSyntaxError(
            f"cannot read {snippet!r}{where}", hint=f"write {_expected(form)}"
        ) from None
    if len(trees) != 1:
        raise LoomSyntaxError(f"{snippet!r} holds {len(trees)} statements; rewrite takes one")
    tree = trees[0]
    if isinstance(tree, exp.Command) or not isinstance(tree, exp.Expression):
        if form == "drop":
            return None
        raise LoomSyntaxError(
            f"cannot read {snippet!r}: sqlglot understood only its first word",
            hint=f"write {_expected(form)}",
        )
    return tree


def _create(tree: exp.Expression, dialect: str, catalog: Catalog | None) -> str | None:
    if not isinstance(tree, exp.Create) or str(tree.args.get("kind") or "").upper() != "INDEX":
        return None
    function = doppio_function(tree)
    if function is not None:
        return doppio_call(tree, function, dialect, catalog)
    fmt = index_format(tree)
    return create_index_call(tree, fmt, dialect, catalog) if fmt is not None else None


# statements sqlglot keeps as a command word and a string, which wrap a statement of their own
_WRAPPERS = {"EXPLAIN": ("ANALYZE", "ANALYSE", "VERBOSE"), "PREPARE": ()}


def _wrapped_start(statement: str, tokens: list[Token], dialect: str) -> int | None:
    """Where the query ``EXPLAIN [ANALYZE | VERBOSE | (…)]`` or ``PREPARE name [(…)] AS`` wraps
    begins in ``statement``, when it holds ``infer_mlweaving(…)``; else None."""
    word = tokens[0].text.upper() if tokens and tokens[0].token_type == TokenType.COMMAND else ""
    if word not in _WRAPPERS:
        return None
    start = tokens[0].end + 1
    try:
        tail = tokenize(statement[start:], dialect)
    except TokenError:
        return None
    depth, first = 0, None
    for i, token in enumerate(tail):
        kind = token.token_type
        option = kind == TokenType.L_PAREN or token.text.upper() in _WRAPPERS[word]
        if word == "EXPLAIN" and depth == 0 and not option:
            first = i
            break
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if word == "PREPARE" and depth == 0 and kind == TokenType.ALIAS:
            first = i + 1
            break
    if first is None or first >= len(tail) or claim(tail[first:]) != "infer":
        return None
    return start + tail[first].start


def rewrite(statement: str, dialect: str, catalog: Catalog | None = None) -> str:
    """The statement to run instead of ``statement``, or ``statement`` itself, unchanged.

    ``dialect`` is ``"duckdb"`` or ``"postgres"``; ``catalog`` answers what the rewrites need
    to know of the database (without one, DROP/REINDEX pass through and DoppioDB forms that need
    a look-up raise LoomStateError).
    """
    if dialect not in DIALECTS:
        raise LoomOptionError(
            f"unknown SQL dialect {dialect!r}", hint=f"use one of {', '.join(DIALECTS)}"
        )
    try:
        tokens = tokenize(statement, dialect)
    except TokenError:
        return statement  # not readable as SQL: the engine reports it
    form = claim(tokens)
    inner = _wrapped_start(statement, tokens, dialect) if form is None else None
    if inner is not None:  # EXPLAIN or PREPARE of a query with infer_mlweaving: rewrite that
        return statement[:inner] + rewrite(statement[inner:], dialect, catalog)
    if form is None:
        return statement
    if form == "reindex":
        return reindex_call(statement, tokens, dialect, catalog) or statement
    if form == "alter":
        refuse_alter(tokens, dialect, catalog)
        return statement
    tree = _parse(statement, dialect, form)
    if tree is None:
        refuse_several_drops(tokens, dialect, catalog)  # a DROP sqlglot cannot read: several?
        return statement
    tree = fold_names(tree, tokens, dialect)
    if form == "drop":
        out = drop_index_call(tree, dialect, catalog) if isinstance(tree, exp.Drop) else None
    elif form == "create":
        refuse_qualified_options(statement, tokens)
        out = _create(tree, dialect, catalog)
    else:
        out = infer_query(tree, statement, tokens, dialect, catalog)
    return out or statement
