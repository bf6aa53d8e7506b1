"""Building blocks of the rewrites: ``SELECT loom_x('…', …)`` calls and values read from a tree.
No paper section.

Everything a user typed reaches the generated SQL as a string literal built by sqlglot
(single quotes doubled) or as a quoted identifier; option objects are JSON text from
``json.dumps``.  The engine validates names and options again.

Names are read as the engine reads them: on PostgreSQL an unquoted name is folded to lower case
(``CREATE INDEX Mixed_F`` is index ``mixed_f``, ``WITH (label = Y)`` column ``y``, as psql's
access methods see them); a quoted one is kept as written.  DuckDB keeps names as written and
matches them whatever their case (``catalog.index_spelled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomSyntaxError
from loomdb.frontend.catalog import Catalog
from loomdb.options import sql_number
from loomdb.store.names import fold

# dialects whose unquoted names the engine folds to lower case
FOLDS = ("postgres",)


def token_name(token: Token, dialect: str) -> str:
    """A name token's text as the engine reads it (unquoted names folded where it folds)."""
    quoted = token.token_type == TokenType.IDENTIFIER
    return token.text if quoted or dialect not in FOLDS else fold(token.text)


def fold_names(tree: exp.Expression, tokens: list[Token], dialect: str) -> exp.Expression:
    """``tree`` with its unquoted names folded as the engine folds them: identifiers, and the
    bare words of ``WITH (name = value)`` (sqlglot reads ``"Y"`` and ``Y`` there alike, so
    ``tokens`` tell which values were quoted)."""
    if dialect not in FOLDS:
        return tree
    tree = normalize_identifiers(tree, dialect=dialect)
    quoted = {
        key.text.lower()
        for key, eq, value in zip(tokens, tokens[1:], tokens[2:])
        if eq.token_type == TokenType.EQ and value.token_type == TokenType.IDENTIFIER
    }
    for prop in tree.find_all(exp.Property):
        value = prop.args.get("value")
        if isinstance(value, exp.Var) and prop.name.lower() not in quoted:
            value.set("this", fold(value.name))
    return tree


def loom_function(
    function: str, args: Sequence[exp.Expression], catalog: Catalog | None
) -> exp.Expression:
    """A call of loomdb's SQL function ``function``: named with the schema loomdb's functions
    are in where the catalog says calls must name it (PostgreSQL: the extension's, so that a
    function of the same signature another role made in a schema earlier on the search_path
    is never the one run), by its name alone otherwise (DuckDB; no catalog)."""
    call = exp.Anonymous(this=function, expressions=list(args))
    schema = catalog.functions_schema() if catalog is not None else None
    if schema is None:
        return call
    return exp.Dot(this=exp.to_identifier(schema, quoted=True), expression=call)


def loom_call(function: str, *args: str | None, dialect: str, catalog: Catalog | None) -> str:
    """``SELECT function('a', …)`` (``loom_function``): each argument a SQL string literal, or
    NULL for None."""
    values = [exp.null() if a is None else exp.Literal.string(a) for a in args]
    call = loom_function(function, values, catalog)
    return exp.select(call).sql(dialect=dialect, normalize_functions=False)


def table_text(table: exp.Table, dialect: str) -> str:
    """A table reference as SQL text: ``s.t``, or ``"My T"`` where the user quoted it."""
    bare = exp.Table(**{k: table.args.get(k) for k in ("this", "db", "catalog")})
    return bare.sql(dialect=dialect)


def _number(text: str) -> int | float:
    """A numeric literal's value, read as a WITH value's text is (``options.sql_number``)."""
    number = sql_number(text)
    return number if number is not None else float(text)


def literal_value(node: exp.Expression, what: str) -> Any:
    """A Python value for a constant written in SQL: number, true/false, string or NULL.

    A bare word (``nulls = skip``) or identifier is read as the string it spells.
    """
    if isinstance(node, exp.Ordered):  # a function-style argument list parsed as index columns
        node = node.this
    if isinstance(node, (exp.Placeholder, exp.Parameter)):
        raise LoomSyntaxError(
            f"{what} cannot be a query parameter ($1, ?)",
            hint="write the value itself: loomdb rewrites the statement before the engine "
            "binds parameters",
        )
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else _number(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_number:
        return -_number(node.this.this)
    if isinstance(node, (exp.Var, exp.Identifier)) or (
        isinstance(node, exp.Column) and not node.table
    ):
        return node.name
    raise LoomSyntaxError(
        f"{what} must be a number, true/false, a 'string' or a name; got {node.sql()} instead",
        hint="write constants only: no expressions, casts or qualified names",
    )


def string_value(node: exp.Expression, what: str) -> str:
    """A value that must be a name: a 'string' or a bare word."""
    value = literal_value(node, what)
    if not isinstance(value, str) or not value:
        raise LoomSyntaxError(
            f"{what} must be a name, as a 'string' or a bare word; got {node.sql()} instead",
            hint="quote the name: 'my_table'",
        )
    return value
