"""Identifiers from users: validated, then quoted.  Nothing a user typed is pasted into SQL.

Model and index names are plain identifiers.  A ``source`` is either a (schema-qualified) table
or view name, or one SELECT statement, checked with sqlglot and wrapped as a subquery.
"""

from __future__ import annotations

import re

from loomdb.errors import LoomOptionError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
QUALIFIED = re.compile(
    r'^(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")(?:\.(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")){0,2}$'
)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def check_name(name: object, what: str = "model") -> str:
    """A model or index name: letters, digits and underscores, at most 63, not a digit first."""
    if not isinstance(name, str) or not NAME.match(name):
        raise LoomOptionError(
            f"invalid {what} name {name!r}",
            hint=f"a {what} name is 1-63 letters, digits or underscores, not starting with a digit",
        )
    return name


def relation(source: object, dialect: str) -> str:
    """SQL text for a ``FROM`` clause: a quoted table name or a parenthesised SELECT."""
    if not isinstance(source, str) or not source.strip():
        raise LoomOptionError("source must be a table name or a SELECT statement; got nothing")
    text = source.strip().rstrip(";").strip()
    if QUALIFIED.match(text):
        parts = re.findall(r'"(?:[^"]|"")+"|[^.]+', text)
        return ".".join(
            p if p.startswith('"') else quote_ident(p.lower() if dialect == "postgres" else p)
            for p in parts
        )
    return "(" + _checked_select(text, dialect) + ") AS loom_source"


def _checked_select(text: str, dialect: str) -> str:
    import sqlglot
    from sqlglot import exp

    try:
        statements = sqlglot.parse(text, read=dialect)
    except sqlglot.errors.ParseError as e:
        raise LoomOptionError(
            f"source is neither a table name nor a SELECT sqlglot can read: {str(e)[:200]}",
            hint="pass a table or view name, or one SELECT statement",
        ) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise LoomOptionError(
            "source must be a table name or exactly one SELECT statement",
            hint="wrap other statements in a view first",
        )
    return text
