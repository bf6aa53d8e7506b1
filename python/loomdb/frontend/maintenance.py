"""``DROP INDEX`` and ``REINDEX`` of loomdb indexes → ``loom_drop_index`` / ``loom_reindex``.
No paper section.

::

    DROP INDEX [IF EXISTS] [CONCURRENTLY] name   →  SELECT loom_drop_index('name')
    REINDEX INDEX [CONCURRENTLY] name            →  SELECT loom_reindex('name')
    REINDEX TABLE [CONCURRENTLY] table           →  SELECT loom_reindex('a');
    REINDEX SCHEMA [CONCURRENTLY] schema            SELECT loom_reindex('b') …   (DuckDB)
    REINDEX DATABASE
    REINDEX [(…)] TABLE table                    →  DO $$ BEGIN REINDEX [(…)] TABLE table;
                                                       PERFORM loom_reindex('each'); … END $$
    REINDEX [(…)] SCHEMA schema                  →  REINDEX [(…)] SCHEMA schema;
    REINDEX [(…)] DATABASE name                     DO $$ BEGIN PERFORM loom_reindex('each');
                                                       … END $$               (PostgreSQL)

Only names the catalog knows as loomdb indexes are rewritten; every other statement passes
through unchanged, so the engine drops its own indexes.  ``DROP INDEX IF EXISTS`` of a name that
is no loomdb index therefore reaches the engine as written, which does nothing (or drops its own
index of that name); that is why ``loom_drop_index`` takes the name alone.  ``CONCURRENTLY`` is
accepted and ignored (a loomdb index is dropped or rebuilt in one transaction); ``CASCADE``, and
several names in one statement of which one is loomdb's, are refused.  A loomdb index belongs
to no schema: ``DROP INDEX main.w`` or ``REINDEX INDEX main.w`` of loomdb index ``w`` is refused
with the statement to write (it reached the engine, which found no index ``main.w`` or, with
``IF EXISTS``, did nothing), unless the engine has an index of that qualified name.

One rule on both engines: ``REINDEX TABLE t``, ``REINDEX SCHEMA s`` and ``REINDEX DATABASE``
rebuild, with the engine's own indexes, every loomdb index built on ``t``, on a table (or view)
of ``s``, or in the database (found as ``names.same_source`` reads table names), through
``loom_reindex``.  DuckDB has no ``REINDEX`` (its parser's error came back): there each is one
``loom_reindex`` statement, each rebuild committed on its own (``loom_reindex`` commits on a
connection of its own), and a failed one is reported with those that ran and those that did
not (``steps.Script``); a ``REINDEX`` that finds no loomdb index is refused, and so is
``REINDEX SYSTEM`` (no loomdb index is on a system catalog).  On PostgreSQL, which rebuilds
only the indexes it holds (``CREATE INDEX … USING`` ones among them), ``REINDEX TABLE t`` runs
in a ``DO`` block with a ``loom_reindex`` of each of the others — every index of the table
rebuilt, in one transaction; ``REINDEX SCHEMA`` and ``REINDEX DATABASE`` cannot run in a
transaction block, so theirs run after the statement, in one ``DO`` block (all rebuilt or
none).  ``CONCURRENTLY`` cannot run in a block and is refused there, with the statements to
write; ``REINDEX SYSTEM`` passes.

Names are read as the engine reads them (``calls.token_name``: on PostgreSQL unquoted ones
folded to lower case; quotes removed); the catalog decides what matches and passes the name as
it spells it (on DuckDB, whose identifiers ignore case, ``DROP INDEX WI`` drops ``wi``).

``ALTER INDEX`` and ``COMMENT ON INDEX`` of a loomdb index are refused (``refuse_alter``):
they reached the engine, which has no such index (DuckDB's parser has no ``ALTER INDEX``).

sqlglot cannot parse ``REINDEX`` (PostgreSQL's tokenizer keeps its tail as one string), so that
statement is read from its tokens: the tail after ``REINDEX`` is tokenized again.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomSyntaxError
from loomdb.frontend.calls import loom_call, token_name
from loomdb.frontend.catalog import Catalog
from loomdb.frontend.script import tokenize


def _ours(parts: list[str], verb: str, catalog: Catalog) -> str | None:
    """The loomdb index a name (its parts) names, or None; a schema-qualified name of one is
    refused, unless the engine has an index of that qualified name (the engine's to judge)."""
    found = catalog.index_name(parts[-1]) if parts else None
    if found is None or len(parts) == 1:
        return found
    if catalog.engine_index(parts[-2], parts[-1]):
        return None
    raise LoomSyntaxError(
        f"{verb} {'.'.join(parts)}: loomdb index {found} belongs to no schema",
        hint=f"write {verb} {found}",
    )


def drop_index_call(tree: exp.Drop, dialect: str, catalog: Catalog | None) -> str | None:
    """The ``loom_drop_index`` call, or None when no loomdb index is dropped."""
    if str(tree.args.get("kind") or "").upper() != "INDEX" or catalog is None:
        return None
    tables = tree.args.get("tables") or [tree.this]
    names = [[p.name for p in t.parts] for t in tables if isinstance(t, exp.Table)]
    ours = [found for n in names if (found := _ours(n, "DROP INDEX", catalog)) is not None]
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
    return loom_call("loom_drop_index", ours[0], dialect=dialect, catalog=catalog)


def _drop_names(tokens: list[Token], dialect: str) -> list[list[str]]:
    """The names ``DROP INDEX [CONCURRENTLY] [IF EXISTS] a, s.b [CASCADE]`` lists, read from
    its tokens (sqlglot cannot parse several names); a name that is not one is left out."""
    words = [t.text.upper() for t in tokens]
    start = 2
    for skip in (["CONCURRENTLY"], ["IF", "EXISTS"]):
        if words[start : start + len(skip)] == skip:
            start += len(skip)
    end = len(tokens) - (words[-1:] in (["CASCADE"], ["RESTRICT"]))
    names: list[list[str]] = []
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
    would drop the others and leave it (or, with ``IF EXISTS``, skip it without a word); and
    one of a schema-qualified loomdb index (``_ours``)."""
    if catalog is None:
        return
    names = _drop_names(tokens, dialect)
    ours = [f for n in names if (f := _ours(n, "DROP INDEX", catalog)) is not None]
    if len(names) > 1 and ours:
        raise LoomSyntaxError(
            f"DROP INDEX names several indexes and {ours[0]} is a loomdb index",
            hint=f"drop loomdb indexes one per statement: DROP INDEX {ours[0]}",
        )


def _name(tokens: list[Token], dialect: str) -> list[str] | None:
    """The parts of ``a`` or ``s.a`` from name tokens (identifiers separated by dots), as the
    engine reads them, else None."""
    parts, dots = tokens[0::2], tokens[1::2]
    if not parts or len(tokens) % 2 == 0 or any(d.token_type != TokenType.DOT for d in dots):
        return None
    if any(p.token_type in (TokenType.STRING, TokenType.NUMBER) for p in parts):
        return None
    return [token_name(p, dialect) for p in parts]


def _options(tail: list[Token]) -> list[Token]:
    """The tokens of PostgreSQL's leading option list, ``(VERBOSE, CONCURRENTLY)``, if any."""
    if not tail or tail[0].token_type != TokenType.L_PAREN:
        return []
    close = next((i for i, t in enumerate(tail) if t.token_type == TokenType.R_PAREN), None)
    return tail[: close + 1] if close is not None else []


def _no_reindex(what: str, hint: str) -> LoomSyntaxError:
    return LoomSyntaxError(f"DuckDB has no REINDEX: {what}", hint=hint)


def _dollar_quoted(body: str) -> str:
    """``body`` between dollar quotes whose tag it does not hold."""
    tag = "loomdb"
    while f"${tag}$" in body:
        tag += "_"
    return f"${tag}${body}${tag}$"


def _rebuilds(ours: list[str], catalog: Catalog) -> str:
    """``PERFORM loom_reindex('a');`` for each index, a ``DO`` block's lines."""
    return "".join(
        "PERFORM "
        + loom_call("loom_reindex", name, dialect="postgres", catalog=catalog).removeprefix(
            "SELECT "
        )
        + ";\n"
        for name in ours
    )


def _no_concurrently(kind: str, named: str, where: str, ours: list[str]) -> LoomSyntaxError:
    """``REINDEX kind CONCURRENTLY named`` of loomdb indexes: refused, with what to write."""
    each = "; ".join(f"REINDEX INDEX {name}" for name in ours)
    name = f" {named}" if named else ""
    return LoomSyntaxError(
        f"REINDEX {kind} CONCURRENTLY{name} cannot rebuild loomdb's indexes {where} "
        f"({', '.join(ours)}): loomdb rebuilds an index in one transaction",
        hint=f"write REINDEX {kind}{name} without CONCURRENTLY, or rebuild them one per "
        f"statement ({each}) and PostgreSQL's own with REINDEX … CONCURRENTLY",
    )


def _postgres_reindex_table(
    statement: str, table: str, concurrently: bool, catalog: Catalog
) -> str | None:
    """PostgreSQL's ``REINDEX TABLE table`` rebuilds the indexes it holds, ``CREATE INDEX …
    USING`` ones among them, not those ``loom_create_index`` made on the table: the statement
    and their ``loom_reindex`` calls in one ``DO`` block (one transaction); None where there
    are none.  ``CONCURRENTLY`` cannot run in a block: refused, with what to write."""
    ours = catalog.indexes_on(table)
    if not ours:
        return None
    if concurrently:
        raise _no_concurrently("TABLE", table, "on it", ours)
    body = f"\nBEGIN\n{statement.strip()}\n;\n{_rebuilds(ours, catalog)}END\n"
    return "DO " + _dollar_quoted(body)


def _reindex_table(table: str, dialect: str, catalog: Catalog) -> str:
    """``REINDEX TABLE table`` on DuckDB: a ``loom_reindex`` call of each loomdb index on it,
    one statement each (each rebuild commits on its own; what ran is said if one fails:
    ``steps.Script``); none is refused."""
    return _each_rebuilt(catalog.indexes_on(table), f"on table {table}", dialect, catalog)


def _each_rebuilt(ours: list[str], where: str, dialect: str, catalog: Catalog) -> str:
    """DuckDB: one ``loom_reindex`` statement for each of ``ours``, the loomdb indexes
    ``where``; none is refused."""
    if not ours:
        raise _no_reindex(
            f"there is no loomdb index to rebuild {where}",
            hint="SELECT name, source FROM loom.indexes lists loomdb's indexes",
        )
    return ";\n".join(
        loom_call("loom_reindex", name, dialect=dialect, catalog=catalog) for name in ours
    )


def _reindex_all(
    statement: str,
    named: tuple[str | None, str],
    dialect: str,
    concurrently: bool,
    catalog: Catalog,
) -> str | None:
    """``REINDEX SCHEMA schema`` (``schema``) or ``REINDEX DATABASE`` (None): every loomdb
    index built on a table of the schema, or of the database, rebuilt as ``REINDEX TABLE``
    rebuilds them.  On PostgreSQL its statement runs first (it cannot run in a transaction
    block), then theirs in one ``DO`` block: all of them rebuilt, or none; None where there are
    none.  On DuckDB one ``loom_reindex`` each; none is refused, as ``REINDEX TABLE``.
    ``named``: the schema (None for a database) and the name as the statement wrote it."""
    schema, written = named
    ours = catalog.indexes_in(schema)
    where = f"in schema {schema}" if schema is not None else "in this database"
    if dialect == "duckdb":
        return _each_rebuilt(ours, where, dialect, catalog)
    if not ours:
        return None
    if concurrently:
        kind = "SCHEMA" if schema is not None else "DATABASE"
        raise _no_concurrently(kind, written, where, ours)
    block = "DO " + _dollar_quoted(f"\nBEGIN\n{_rebuilds(ours, catalog)}END\n")
    return f"{statement.strip()};\n{block}"


def _whole(kind: str, rest: list[Token], dialect: str) -> tuple[bool, str | None]:
    """Whether ``REINDEX kind rest`` is ``SCHEMA name`` or ``DATABASE [name]``, and the
    schema it names (None for a database).  DuckDB's ``REINDEX DATABASE`` takes no name:
    loomdb rebuilds the indexes of the database it is connected to."""
    parts = _name(rest, dialect) if rest else None
    if kind == "SCHEMA":
        return parts is not None and len(parts) == 1, parts[0] if parts else None
    if kind == "DATABASE" and rest and dialect == "duckdb":
        raise _no_reindex(
            "REINDEX DATABASE takes no name here",
            hint="write REINDEX DATABASE: it rebuilds the loomdb indexes of this database",
        )
    return kind == "DATABASE" and (not rest or (parts is not None and len(parts) == 1)), None


def reindex_call(
    statement: str, tokens: list[Token], dialect: str, catalog: Catalog | None
) -> str | None:
    """The ``loom_reindex`` call for ``REINDEX INDEX name`` of a loomdb index, the calls for
    ``REINDEX TABLE t``, ``REINDEX SCHEMA s`` or ``REINDEX DATABASE`` where there are loomdb
    indexes (DuckDB: one statement each; PostgreSQL: with its own statement); else None, or on
    DuckDB a LoomSyntaxError.  PostgreSQL's option list, ``REINDEX (VERBOSE) …``, is read past
    on both engines."""
    if catalog is None or not tokens:
        return None
    text = statement[tokens[0].end + 1 :]
    try:
        tail = tokenize(text, dialect)
    except TokenError:
        return None
    options = _options(tail)  # read past on DuckDB too, as its CONCURRENTLY is
    tail = tail[len(options) :]
    kind = tail[0].text.upper() if tail else ""
    concurrently = [t.text.upper() for t in tail[1:2]] == ["CONCURRENTLY"]
    rest = tail[1 + concurrently :]
    concurrently |= any(t.text.upper() == "CONCURRENTLY" for t in options)
    parts = _name(rest, dialect) if rest else None
    whole, schema = _whole(kind, rest, dialect)
    if kind == "INDEX" and parts is not None:
        found = _ours(parts, "REINDEX INDEX", catalog)
        if found is not None:
            return loom_call("loom_reindex", found, dialect=dialect, catalog=catalog)
    elif kind == "TABLE" and parts is not None:
        table = text[rest[0].start : rest[-1].end + 1]
        if dialect == "duckdb":
            return _reindex_table(table, dialect, catalog)
        return _postgres_reindex_table(statement, table, concurrently, catalog)
    elif whole:
        written = text[rest[0].start : rest[-1].end + 1] if rest else ""
        return _reindex_all(statement, (schema, written), dialect, concurrently, catalog)
    if dialect != "duckdb":
        return None
    raise _no_reindex(
        f"{statement.strip()[:80]!r} names no loomdb index",
        hint="loomdb rebuilds its own indexes: REINDEX INDEX name, REINDEX TABLE table, "
        "REINDEX SCHEMA schema or REINDEX DATABASE (SELECT name, source FROM loom.indexes "
        "lists them)",
    )


def _leading_name(tokens: list[Token], dialect: str) -> list[str] | None:
    """The parts of the name ``a`` or ``s.a`` that ``tokens`` begin with (``_name``)."""
    end = 1
    while end + 1 < len(tokens) and tokens[end].token_type == TokenType.DOT:
        end += 2
    return _name(tokens[:end], dialect) if tokens else None


def _altered(tokens: list[Token], dialect: str, catalog: Catalog) -> str | None:
    """The loomdb index ``ALTER INDEX [IF EXISTS] name …`` or ``COMMENT ON INDEX name …``
    names (a schema-qualified name of one too, unless the engine has an index of that name)."""
    words = [t.text.upper() for t in tokens]
    start = 3 if words[:1] == ["COMMENT"] else 2
    start += 2 * (words[start : start + 2] == ["IF", "EXISTS"])
    parts = _leading_name(tokens[start:], dialect)
    found = catalog.index_name(parts[-1]) if parts else None
    if found is None or (parts and len(parts) > 1 and catalog.engine_index(*parts[-2:])):
        return None
    return found


def refuse_alter(tokens: list[Token], dialect: str, catalog: Catalog | None) -> None:
    """Refuse ``ALTER INDEX`` and ``COMMENT ON INDEX`` of a loomdb index, which reached the
    engine: DuckDB's parser error, or "does not exist".  Its name is its storage table's and
    every layout's, and models name it (``index``): a new name is a new index, built again.
    PostgreSQL's own statements about a ``CREATE INDEX … USING`` index are its to run."""
    found = _altered(tokens, dialect, catalog) if catalog is not None else None
    if found is None:
        return
    words = [t.text.upper() for t in tokens]
    built = (
        f"SELECT source, format, columns, label, options FROM loom.indexes WHERE name = '{found}'"
    )
    if words[0] == "COMMENT":
        raise LoomSyntaxError(
            f"loomdb index {found} takes no COMMENT: it is no index of the engine's",
            hint=f"comment on its source table instead ({built} shows it)",
        )
    if "RENAME" in words:
        new = _as_written(tokens[-1]) if words[-2:-1] == ["TO"] else "new_name"
        raise LoomSyntaxError(
            f"loomdb index {found} cannot be renamed: its layout is stored under its name",
            hint=f"build it again as {new} (CREATE INDEX {new} ON … USING …, or "
            f"loom_create_index; {built} shows how it was built), then DROP INDEX {found}",
        )
    raise LoomSyntaxError(
        f"loomdb index {found} cannot be altered: it is no index of the engine's",
        hint=f"DROP INDEX {found} and create it again as it should be ({built} shows how it "
        "was built)",
    )


def _as_written(token: Token) -> str:
    """A name token as SQL: quoted (quotes doubled) where it was quoted."""
    if token.token_type != TokenType.IDENTIFIER:
        return token.text
    return '"' + token.text.replace('"', '""') + '"'
