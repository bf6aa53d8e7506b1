"""Identifiers and sources from users: validated, then quoted.  Nothing typed is pasted into SQL.

No paper section.  Model and index names are plain identifiers (:data:`NAME_PATTERN`, also a
CHECK constraint on the catalog).  A ``source`` is either a (schema-qualified) table or view
name, which becomes quoted identifiers, or exactly one read-only query, which sqlglot parses
and *regenerates*: what runs is sqlglot's own text of the one query it understood, never the
text as given, so a second statement or a data-modifying clause cannot ride along.
"""

from __future__ import annotations

import re

from loomdb.errors import LoomOptionError

NAME_PATTERN = "[A-Za-z_][A-Za-z0-9_]{0,62}"
NAME = re.compile(f"^{NAME_PATTERN}$")
# an unquoted part as both engines' lexers read one: letters beyond ASCII count as letters.
# The classes say which ASCII characters they leave out (\u0080-\U0010ffff, every character
# past ASCII, written as a range took 10 ms to compile, in every process that imports loomdb)
_FIRST = r"[^\x00-@\[-^`{-\x7f]"  # A-Z, _, a-z and every character past ASCII
_NEXT = r"[^\x00-#%-/:-@\[-^`{-\x7f]"  # those, 0-9 and $
_PART = rf'(?:{_FIRST}{_NEXT}*|"(?:[^"]|"")+")'
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """An unquoted name as PostgreSQL folds it: ASCII letters to lower case, no other letter
    (``DONNÉES`` is ``donnÉes``; ``str.lower`` would make it another name)."""
    return name.translate(_ASCII_LOWER)


QUALIFIED = re.compile(rf"^{_PART}(?:\.{_PART}){{0,2}}$")


def builtin(function: str, dialect: str) -> str:
    """The engine's own ``function``: on PostgreSQL pg_catalog's, never a function of that name
    another role created on the search_path (an exact match for an argument type wins over
    pg_catalog's polymorphic or cast-needing one: CVE-2018-1058)."""
    return f"pg_catalog.{function}" if dialect == "postgres" else function


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as a string literal both engines read as ``text`` whatever the session's
    settings: quotes doubled, and a value holding a backslash as an escape string
    (``E'…'``, backslashes doubled), which PostgreSQL's ``standard_conforming_strings``
    leaves alone (off, a plain ``'x\\'`` would end at the escaped quote, and the rest of the
    value would be read as SQL).  DuckDB reads ``E'…'`` the same."""
    quoted = text.replace("'", "''")
    if "\\" in text:
        return "E'" + quoted.replace("\\", "\\\\") + "'"
    return "'" + quoted + "'"


def check_name(name: object, what: str = "model") -> str:
    """A model or index name: letters, digits and underscores, at most 63, not a digit first."""
    if name is None:  # SQL's NULL (a subquery that found nothing), not Python's None
        raise LoomOptionError(
            f"the {what} name is NULL",
            hint=f"pass the {what}'s name as text (a subquery giving it may have found no row)",
        )
    if not isinstance(name, str) or not NAME.match(name):
        shown = repr(name) if not isinstance(name, str) or len(name) < 80 else repr(name[:77])
        raise LoomOptionError(
            f"invalid {what} name {shown}",
            hint=f"{what} names are 1-63 ASCII letters (a-z, A-Z), digits or underscores, not "
            "starting with a digit",
        )
    return name


def is_table_name(source: str) -> bool:
    return bool(QUALIFIED.match(source.strip()))


def relation(source: object, dialect: str) -> str:
    """SQL text for a ``FROM`` clause: a quoted table name or a parenthesised query."""
    if not isinstance(source, str) or not source.strip():
        raise LoomOptionError(
            "source must be a table name or a SELECT statement; got nothing",
            hint="name the table or view to read (schema.table where needed), or pass one "
            "SELECT statement",
        )
    text = source.strip().rstrip(";").strip()
    if QUALIFIED.match(text):
        parts = re.findall(r'"(?:[^"]|"")+"|[^.]+', text)
        return ".".join(
            p if p.startswith('"') else quote_ident(fold(p) if dialect == "postgres" else p)
            for p in parts
        )
    return "(" + checked_query(text, dialect) + ") AS loom_source"


def same_source(a: str, b: str, dialect: str) -> bool:
    """Whether sources ``a`` and ``b`` name the same relation by the engine's rules for names:
    on PostgreSQL an unquoted part folded to lower case (``'PTS'`` is ``pts``, ``'"PTS"'``
    another table), on DuckDB every part compared whatever its case, quoted or not.  A query
    is the same source only as the same text.  By name alone: ``catalog.same_source`` also
    fills a schema in (``public.t`` is ``t``)."""
    a, b = a.strip().rstrip(";").strip(), b.strip().rstrip(";").strip()
    if not (QUALIFIED.match(a) and QUALIFIED.match(b)):
        return a == b
    left, right = relation(a, dialect), relation(b, dialect)
    return left.lower() == right.lower() if dialect == "duckdb" else left == right


# Clauses a source query may not hold: it is read, never written through.
_WRITES = ("Insert", "Update", "Delete", "Merge", "Command", "Create", "Drop", "Alter", "Into")


def checked_query(text: str, dialect: str) -> str:
    """sqlglot's regenerated text of the one read-only query in ``text``."""
    import sqlglot
    from sqlglot import exp

    hint = "pass a table or view name, or one SELECT statement"
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as e:
        first = str(e).splitlines()[0][:200]
        raise LoomOptionError(
            f"source is neither a table name nor a SELECT loomdb can read: {first}", hint=hint
        ) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise LoomOptionError(
            "source must be a table name or exactly one SELECT statement",
            hint="wrap other statements in a view first",
        )
    query = statements[0]
    for node in query.walk():
        kind = type(node).__name__
        if kind in _WRITES or (isinstance(node, exp.Lock)):
            raise LoomOptionError(
                f"source must only read: it holds {kind.upper()}",
                hint="make the query read-only, or wrap it in a view",
            )
    return query.sql(dialect=dialect)
