"""``CREATE INDEX … USING mlweaving | toc | dense | pcr`` in psql: the Python half of the index
access methods whose C half (``index_am/loomdb_am.c``) hands every build over here.  No paper
section.

``build(db, oid)`` runs for ``loom._index_am_build(oid)``, which PostgreSQL's build callback
calls for ``CREATE INDEX``, ``REINDEX`` and every rebuild PostgreSQL does on its own
(``TRUNCATE``, ``VACUUM FULL``, ``CLUSTER``, a column type change).  It runs as PostgreSQL runs
an index build: as the table's owner (who becomes the loomdb index's owner), inside a
security-restricted operation.  It reads the index's definition from the system catalogs —
the relation's name is the loomdb index's name, its columns the features, its table the
source, its ``WITH`` options loomdb's options with ``label`` — and lays the table out with
``loom_create_index``'s own code.  A build always starts afresh from the definition, so
``ALTER INDEX … SET (…)`` then ``REINDEX`` changes the options, and ``ALTER INDEX … RENAME``
then ``REINDEX`` the loomdb name.  ``check(db, method, options)`` validates the ``WITH``
options when PostgreSQL asks (``CREATE INDEX``, ``ALTER INDEX … SET``), and
``altered(db, oid)`` what every ``ALTER INDEX`` left (``RESET (label)`` is never asked about).

Which loomdb index a relation holds is ``loom.index_relations`` (relation OID → name; the
extension's ``index_am.sql``, which also drops the loomdb index when the relation is dropped).
Decisions, each the simplest that never loses or mixes up an index:

- loomdb names are global, relation names per schema: a relation whose name is already a
  loomdb index of another relation, or of ``loom_create_index``, is refused.  One exception:
  a loomdb index of that name on the *same* table and with no relation is taken over (rebuilt
  from this definition): that is what restoring a dump does.
- an empty table (``TRUNCATE`` included) gives an index without a layout: its old layout is
  dropped and ``REINDEX`` lays it out once rows are there.
- ``CONCURRENTLY``, partitions, temporary tables, expressions and ``WHERE`` are refused with
  what to do instead; PostgreSQL itself refuses ``UNIQUE``, ``INCLUDE`` and ``DESC``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loomdb.errors import (
    LoomConflictError,
    LoomError,
    LoomOptionError,
    LoomStateError,
    LoomSyntaxError,
)
from loomdb.functions.index import create_index
from loomdb.options import with_value
from loomdb.store import catalog, formats, layout
from loomdb.store.names import check_name, is_table_name
from loomdb.store.source import columns_of, resolve

RELATIONS = f"{catalog.SCHEMA}.index_relations"
# WITH names the statement itself fixes, and where the statement says them instead
STATEMENT_OPTIONS = {
    "format": "USING {method}",
    "features": "the column list: USING {method} (col, …)",
    "if_not_exists": "CREATE INDEX IF NOT EXISTS",
}
FORM = "CREATE INDEX name ON table USING {method} (col, …) WITH (label = y, option = value, …)"

_DESCRIBE = """
SELECT c.relname, a.amname, coalesce(c.reloptions, '{}') AS reloptions, i.indrelid,
       pg_catalog.quote_ident(tn.nspname::pg_catalog.text) OPERATOR(pg_catalog.||) '.'
           OPERATOR(pg_catalog.||) pg_catalog.quote_ident(t.relname::pg_catalog.text) AS source,
       i.indisready, t.relispartition, t.relpersistence = 't' AS temporary,
       i.indexprs IS NOT NULL OR 0 = ANY (i.indkey::int2[]) AS expressions,
       i.indpred IS NOT NULL AS predicate,
       pg_catalog.pg_has_role(t.relowner, 'USAGE') AS owns_table,
       ARRAY(SELECT att.attname::text
             FROM pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(attnum, pos)
             JOIN pg_catalog.pg_attribute AS att
               ON att.attrelid = i.indrelid AND att.attnum = k.attnum
             ORDER BY k.pos) AS columns
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
JOIN pg_catalog.pg_am AS a ON a.oid = c.relam
JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
JOIN pg_catalog.pg_namespace AS tn ON tn.oid = t.relnamespace
WHERE i.indexrelid = $1::oid
"""


@dataclass(frozen=True)
class Definition:
    """A loomdb index relation as the system catalogs define it."""

    oid: int
    name: str
    method: str
    reloptions: list[str]
    table_oid: int
    source: str
    ready: bool
    partition: bool
    temporary: bool
    expressions: bool
    predicate: bool
    owns_table: bool
    columns: list[str]


def describe(db: Any, oid: int) -> Definition:
    rows = db.query(_DESCRIBE, [oid])
    if not rows or rows[0][1] not in formats.KNOWN:
        raise LoomStateError(
            f"relation {oid} is not a loomdb index",
            hint="loom._index_am_build is called by CREATE INDEX … USING mlweaving|toc|dense|pcr",
        )
    name, method, reloptions, table_oid, source, *flags, columns = rows[0]
    ready, partition, temporary, expressions, predicate, owns_table = map(bool, flags)
    return Definition(
        int(oid), name, method, list(reloptions), int(table_oid), source, ready, partition,
        temporary, expressions, predicate, owns_table, list(columns),
    )  # fmt: skip


def options(method: str, reloptions: list[str]) -> tuple[str, dict[str, Any]]:
    """``(label, options)`` from the relation's ``WITH`` options, checked against the format."""
    form = FORM.format(method=method)
    given: dict[str, Any] = {}
    for item in reloptions:
        if not isinstance(item, str) or "=" not in item:  # loom._index_am_check called by hand
            raise LoomSyntaxError(
                f"WITH options are 'name=value' texts; got {json.dumps(item)}", hint=form
            )
        key, _, text = item.partition("=")
        if key in given:
            raise LoomSyntaxError(f"WITH names the option '{key}' twice", hint="name it once")
        given[key] = with_value(text)
    label = given.pop("label", None)
    if label is None:
        raise LoomSyntaxError(
            f"a loomdb {method} index names no label column",
            hint=f"add WITH (label = column): {form}",
        )
    if not isinstance(label, str) or not label:
        raise LoomSyntaxError(
            f"the label must be a column name; got {json.dumps(label)} instead", hint=form
        )
    for taken, where in STATEMENT_OPTIONS.items():
        if taken in given:
            raise LoomSyntaxError(
                f"the '{taken}' option is written in the statement itself, not in WITH",
                hint=f"write {where.format(method=method)}",
            )
    fmt = formats.get(method)
    fmt.check(layout.options_of(fmt).parse({**given, "format": method}))
    return label, given


def check(db: Any, method: str, reloptions: list[str]) -> None:
    """Refuse ``WITH`` options a loomdb ``method`` index cannot take (amoptions)."""
    if method not in formats.KNOWN:
        raise LoomStateError(
            f"'{method}' is not a loomdb index method",
            hint=f"loomdb's methods: {', '.join(sorted(formats.KNOWN))}",
        )
    options(method, reloptions)


def altered(db: Any, oid: int) -> None:
    """Refuse what ``ALTER INDEX`` left a loomdb index relation that its next build could not
    take (the ``ddl_command_end`` trigger of ``index_am.sql``): PostgreSQL checks options only
    while some remain (``RESET (label)`` is never checked), and nothing checks that the label
    is a column of the table; the next ``REINDEX``, ``TRUNCATE`` or ``VACUUM FULL`` would fail."""
    d = describe(db, oid)
    fix = f"ALTER INDEX {d.name} SET (label = column), a column of {d.source} not indexed"
    try:
        label, _ = options(d.method, d.reloptions)
        _, available = columns_of(db, d.source)
        label = resolve(label, available, "label", d.source)
    except LoomError as e:
        hint = f"{fix} ({e.hint})" if e.hint else fix
        raise type(e)(f"index {d.name}: {e.message}", hint=hint) from None
    if label in d.columns:
        raise LoomOptionError(
            f"index {d.name}: its label '{label}' is also one of its columns", hint=fix
        )


def _refuse_unsupported(d: Definition) -> None:
    hint_function = f"use loom_create_index('{d.name}', source, label, options)"
    if not d.ready:
        raise LoomSyntaxError(
            "a loomdb index cannot be built CONCURRENTLY",
            hint="write CREATE INDEX or REINDEX INDEX without CONCURRENTLY; "
            f"drop the invalid index PostgreSQL left: DROP INDEX {d.name}",
        )
    if d.partition:
        raise LoomSyntaxError(
            f"a loomdb index cannot be built on a partition ({d.source})",
            hint=f"{hint_function} with the partitioned table as the source",
        )
    if d.temporary:
        raise LoomSyntaxError(
            f"a loomdb index cannot be built on the temporary table {d.source}",
            hint="train on the table directly: loom_train(model, table, label)",
        )
    if d.expressions or d.predicate:
        what = "expressions" if d.expressions else "a WHERE clause"
        raise LoomSyntaxError(
            f"a loomdb index takes plain columns, not {what}",
            hint=f"{hint_function} over a view or a SELECT that computes or filters them",
        )
    if not d.owns_table:
        raise LoomStateError(
            f"only the owner of {d.source} builds its loomdb index {d.name}",
            hint="PostgreSQL builds an index as the table's owner: REINDEX INDEX runs it so",
        )


def _release_previous(db: Any, d: Definition) -> None:
    """Drop what this relation held before (a rebuild): found by its OID, or by its name when
    the OID it was registered under is gone (PostgreSQL replaced the relation)."""
    rows = db.query(
        f"DELETE FROM {RELATIONS} WHERE relation = $1::oid OR (name = $2 AND NOT EXISTS "
        "(SELECT 1 FROM pg_catalog.pg_class AS c WHERE c.oid = relation)) RETURNING name",
        [d.oid, d.name],
    )
    for (previous,) in rows:
        if catalog.index_exists(db, previous):
            layout.drop(db, previous)
    if not rows and catalog.index_exists(db, d.name):
        source = catalog.get_index(db, d.name).table
        if catalog.index_relation(db, d.name) is None and _same_table(db, source, d.table_oid):
            db.notice(f"index {d.name}: taking over the loomdb index of that name on {source}")
            layout.drop(db, d.name)


def _same_table(db: Any, source: str, table_oid: int) -> bool:
    if not is_table_name(source):
        return False
    rows = db.query("SELECT pg_catalog.to_regclass($1)::oid = $2::oid", [source, table_oid])
    return bool(rows and rows[0][0])


def _refuse_taken(db: Any, d: Definition) -> None:
    held = catalog.index_relation(db, d.name)
    if held is None and not catalog.index_exists(db, d.name):
        return
    by = f"the index {held}" if held else "an index made by loom_create_index"
    raise LoomOptionError(
        f"the loomdb index name '{d.name}' is taken by {by}",
        hint="loomdb index names are one namespace across schemas: "
        "name this index differently, or drop the other one",
    )


def _register(db: Any, d: Definition) -> None:
    try:
        db.execute(
            f"INSERT INTO {RELATIONS} (relation, name) VALUES ($1::oid, $2)", [d.oid, d.name]
        )
    except LoomConflictError:
        raise LoomConflictError(
            f"the loomdb index name '{d.name}' belongs to another role",
            hint="name this index differently",
        ) from None


def build(db: Any, oid: int) -> tuple[float, float]:
    """Lay the table of loomdb index relation ``oid`` out; ``(heap rows, index rows)``."""
    d = describe(db, oid)
    _refuse_unsupported(d)
    check_name(d.name, "index")
    label, given = options(d.method, d.reloptions)
    _release_previous(db, d)
    _refuse_taken(db, d)
    if not db.query(f"SELECT EXISTS (SELECT 1 FROM {d.source})")[0][0]:
        db.notice(f"index {d.name}: {d.source} is empty; REINDEX INDEX {d.name} lays it out")
        _register(db, d)
        return 0.0, 0.0
    opts = {**given, "format": d.method, "features": d.columns}
    summary = json.loads(create_index(db, d.name, d.source, label, json.dumps(opts)))
    _register(db, d)
    return float(summary["rows"] + summary["skipped"]), float(summary["rows"])
