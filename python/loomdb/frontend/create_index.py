"""``CREATE INDEX … USING mlweaving | toc | dense (…) WITH (label = y, …)`` → ``loom_create_index``.

::

    CREATE INDEX [IF NOT EXISTS] name ON [schema.]table USING format (col, …)
        WITH (label = y, option = value, …)
    →  SELECT loom_create_index('name', 'schema.table', 'y',
                                '{"format": "format", "features": ["col", …], "option": value}')

``format`` is the user-facing name (``mlweaving``, ``toc``, ``dense``; ``weave`` is another name
for ``mlweaving``, offered with the others, and written as ``mlweaving``); the engine maps it to
its storage format.  WITH values keep their JSON type: numbers stay numbers, ``true``/``false``
booleans, ``NULL`` null (the option's default); a string's or bare word's text is read as psql's
access methods read it (``options.with_value``: ``'64'`` is 64, ``'{"a": …}'`` an object, other
text itself).  An empty column
list leaves ``features`` out: the index then takes every column but the label.  What a B-tree
index may say but a loomdb index cannot (UNIQUE, CONCURRENTLY, WHERE, INCLUDE, TABLESPACE,
expressions, DESC) is rejected rather than silently ignored.
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomSyntaxError
from loomdb.frontend.calls import literal_value, loom_call, table_text
from loomdb.frontend.catalog import Catalog
from loomdb.options import with_value


def formats() -> tuple[str, ...]:
    """loomdb's index methods: the storage formats' registry (third-party ones included)."""
    from loomdb.store.formats import ALIASES, names

    return (*names(), *ALIASES)


CREATE_FORM = (
    "CREATE INDEX name ON table USING mlweaving (col, …) WITH (label = y, option = value, …)"
)
# IndexParameters the form uses; any other one set is a clause loomdb indexes do not have
_OURS = {"using", "columns", "with_storage"}
# WITH names sqlglot parses into a property class of their own, dropping the name
_NAMED_PROPERTIES = {
    "FileFormatProperty": "format",
    "LocationProperty": "location",
    "SchemaCommentProperty": "comment",
}
# Create flags a loomdb index cannot honour (IF NOT EXISTS is honoured: it is "exists")
_FLAGS = {"unique": "UNIQUE", "concurrently": "CONCURRENTLY", "replace": "OR REPLACE"}
_FLAG_HINTS = {
    "replace": "drop the index first (DROP INDEX name), or write CREATE INDEX IF NOT EXISTS",
}


def index_format(tree: exp.Create) -> str | None:
    """The loomdb format named by ``USING`` (an alias as the format it names: ``weave`` is
    ``mlweaving``), or None when the index is not loomdb's."""
    from loomdb.store.formats import ALIASES

    index = tree.this
    params = index.args.get("params") if isinstance(index, exp.Index) else None
    using = params.args.get("using") if params is not None else None
    fmt = using.name.lower() if using is not None else ""
    return ALIASES.get(fmt, fmt) if fmt in formats() else None


def create_properties(tree: exp.Create) -> str | None:
    """What ``CREATE … INDEX`` says besides its flags (``TEMPORARY``), as SQL, or None."""
    properties = tree.args.get("properties")
    if properties is None or not properties.expressions:
        return None
    return " ".join(p.sql() for p in properties.expressions)


def _unsupported(what: str, fmt: str, hint: str | None = None) -> LoomSyntaxError:
    return LoomSyntaxError(
        f"a loomdb {fmt} index does not take {what}",
        hint=hint or f"write {CREATE_FORM}",
    )


def _check_clauses(tree: exp.Create, params: exp.IndexParameters, fmt: str) -> None:
    for flag, words in _FLAGS.items():
        if tree.args.get(flag):
            raise _unsupported(words, fmt, _FLAG_HINTS.get(flag))
    if extra := create_properties(tree):
        raise _unsupported(
            extra, fmt, "a loomdb index is stored in the database: drop it when it is done with"
        )
    for key, value in params.args.items():
        if value and key not in _OURS:
            hint = "index a view that filters the rows instead" if key == "where" else None
            raise _unsupported(key.upper().replace("_", " "), fmt, hint)


def _decimal_point(before: Token, after: Token | None) -> bool:
    """Whether a dot between these tokens begins a number (``= .5``, ``= -.5``)."""
    signs = (TokenType.EQ, TokenType.DASH, TokenType.PLUS)
    return after is not None and after.token_type == TokenType.NUMBER and before.token_type in signs


def refuse_qualified_options(statement: str, tokens: list[Token]) -> None:
    """Refuse a dotted name in ``WITH (…)`` (``label = t.y``, ``a.b = 1``): sqlglot reads the
    value as its last part and the name as nothing, so ``t.y`` would silently be ``y``."""
    opened = [
        i
        for i, (w, p) in enumerate(zip(tokens, tokens[1:]))
        if w.token_type == TokenType.WITH and p.token_type == TokenType.L_PAREN
    ]
    depth, start = 0, None
    first = opened[-1] + 1 if opened else len(tokens)
    for before, token, after in zip(
        tokens[first - 1 :], tokens[first:], [*tokens[first + 1 :], None]
    ):
        kind = token.token_type
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if kind in (TokenType.L_PAREN, TokenType.COMMA) and depth == 1:
            start = token.end + 1
        elif kind == TokenType.DOT and start is not None and not _decimal_point(before, after):
            text = statement[start:].split(",")[0].split(")")[0].strip()
            raise LoomSyntaxError(
                f"cannot read {text!r} as a WITH option: a qualified name",
                hint="write WITH (name = value, …), each value a number, true/false, "
                "a 'string' or a column name",
            )
        if depth == 0:
            return


def _feature(node: exp.Expression, fmt: str) -> str:
    if isinstance(node, exp.Ordered):
        if node.args.get("desc") or node.args.get("nulls_first"):
            raise _unsupported("DESC or NULLS FIRST on a column", fmt)
        node = node.this
    if not isinstance(node, exp.Column) or node.table:
        raise _unsupported(
            f"the expression {node.sql()}",
            fmt,
            "list plain column names; index a view to train on computed columns",
        )
    return node.name


def _option(prop: exp.Expression) -> tuple[str, exp.Expression]:
    """``(name, value node)`` of one ``name = value`` in WITH."""
    if type(prop) is exp.Property and prop.args.get("value") is not None:
        return prop.name.lower(), prop.args["value"]
    key = _NAMED_PROPERTIES.get(type(prop).__name__)
    if key is None or prop.this is None:
        raise LoomSyntaxError(
            f"cannot read {prop.sql()!r} as a WITH option", hint="write WITH (name = value, …)"
        )
    return key, prop.this


def _with_options(params: exp.IndexParameters) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for prop in params.args.get("with_storage") or []:
        key, value = _option(prop)
        if key in options:
            raise LoomSyntaxError(f"WITH names the option '{key}' twice", hint="name it once")
        read = literal_value(value, f"the WITH option '{key}'")
        options[key] = with_value(read) if isinstance(read, str) else read
    return options


def create_index_call(tree: exp.Create, fmt: str, dialect: str, catalog: Catalog | None) -> str:
    """The ``loom_create_index`` call for a parsed ``CREATE INDEX … USING fmt``."""
    index = tree.this
    params = index.args["params"]
    name, table = index.name, index.args.get("table")
    if not name:
        raise LoomSyntaxError(
            "a loomdb index needs a name: CREATE INDEX name ON …", hint=f"write {CREATE_FORM}"
        )
    if not isinstance(table, exp.Table):
        raise LoomSyntaxError(f"CREATE INDEX {name} names no table", hint=f"write {CREATE_FORM}")
    _check_clauses(tree, params, fmt)
    features = [_feature(c, fmt) for c in params.args.get("columns") or []]
    given = _with_options(params)
    if "label" not in given:
        raise LoomSyntaxError(
            f"CREATE INDEX {name} … USING {fmt} names no label column",
            hint=f"add WITH (label = column): {CREATE_FORM}",
        )
    label = given.pop("label")
    if not isinstance(label, str) or not label:
        raise LoomSyntaxError(
            f"the label must be a column name; got {json.dumps(label)} instead",
            hint=f"write {CREATE_FORM}",
        )
    for taken in ("format", "features", "if_not_exists"):
        if taken in given:
            raise LoomSyntaxError(
                f"the '{taken}' option is written in the statement itself, not in WITH",
                hint=f"write {CREATE_FORM} (IF NOT EXISTS after CREATE INDEX)",
            )
    options: dict[str, Any] = {"format": fmt}
    if features:
        options["features"] = features
    options.update(given)
    if tree.args.get("exists"):
        options["if_not_exists"] = True
    return loom_call(
        "loom_create_index",
        name,
        table_text(table, dialect),
        label,
        json.dumps(options),
        dialect=dialect,
        catalog=catalog,
    )
