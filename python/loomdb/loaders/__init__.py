"""Loaders: outside data (a LIBSVM file, a folder of images…) into a table of either engine.

No paper section.  A loader reads a file or folder (a generator makes its rows) and yields
rows; :func:`load` makes the table and inserts them through the engine-neutral ``Database``
(``insert``), so one loader serves ``loomdb load KIND PATH TABLE`` (the file is read where the
command runs) and the SQL function ``loom_load(kind, path, table, options)`` (the file is read
by the database's process; in PostgreSQL that needs the ``pg_read_server_files`` role, as
``COPY … FROM 'file'`` does).
Unreadable input is skipped and counted, never silently kept.  Loaders are found by name like
formats and backends (:data:`KNOWN`, entry points ``loomdb.loaders``).
"""

from __future__ import annotations

import importlib
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from importlib.metadata import entry_points
from typing import Any, Protocol

from loomdb.errors import (
    LoomDatabaseError,
    LoomError,
    LoomNotFoundError,
    LoomOptionError,
    LoomStateError,
)
from loomdb.options import Boolean, Option, Options, parse_json
from loomdb.store.catalog import DATA_SCHEMA, SCHEMA
from loomdb.store.names import QUALIFIED, builtin, quote_ident, relation

KNOWN: dict[str, str] = {  # name → "module:Class"
    "libsvm": "loomdb.loaders.libsvm:LibsvmLoader",
    "sample": "loomdb.loaders.sample:SampleLoader",
    "zipf": "loomdb.loaders.zipf:ZipfLoader",
    "images": "loomdb.loaders.images:ImagesLoader",
    "mnist-jpeg": "loomdb.loaders.mnist_jpeg:MnistJpegLoader",
}
COMMON = Options("loom_load", Option("replace", Boolean(), False, "replace an existing table"))
FLUSH_ROWS = 4096
PROGRESS_S = 2.0


class Target(Protocol):
    """What a load needs of a database: DuckDB's and PostgreSQL's (in or outside the server)."""

    dialect: str

    def type(self, abstract: str) -> str: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def insert(self, relation: str, columns: Sequence[str], rows: Sequence[tuple]) -> None: ...

    def atomic(self) -> AbstractContextManager[Any]: ...

    def notice(self, message: str) -> None: ...

    def check_interrupt(self) -> None: ...


class Loader(Protocol):
    """What a loader implements: its options, the table's columns, and the rows of a path."""

    name: str
    options: Options
    reads_files: bool  # False: ``path`` names something the loader ships (no file is read)

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        """``(column, abstract type)`` of the table (types from ``store.db.TYPES``)."""
        ...

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        """The rows of ``path``; a row it cannot read is skipped and counted in ``skipped``."""
        ...

    skipped: int  # and optionally ``report``: a dict added to the load's summary


def names() -> list[str]:
    return sorted(set(KNOWN) | {ep.name for ep in entry_points(group="loomdb.loaders")})


def _loader(kind: str | None, path: str | None) -> Loader:
    """Loader ``kind``, refused where the call's kind, or the path it reads, is SQL's NULL."""
    if kind is None:
        raise LoomOptionError("the loader kind is NULL", hint=f"loaders: {', '.join(names())}")
    loader = get(kind)
    if path is None and loader.reads_files:
        raise LoomOptionError(
            f"{kind}: the path is NULL", hint="give the file or folder to read as text"
        )
    return loader


def get(name: str) -> Loader:
    if name in KNOWN:
        module, _, attr = KNOWN[name].partition(":")
        return getattr(importlib.import_module(module), attr)()
    for ep in entry_points(group="loomdb.loaders"):
        if ep.name == name:
            return ep.load()()
    raise LoomOptionError(f"unknown loader '{name}'", hint=f"loaders: {', '.join(names())}")


def load(db: Target, kind: str, path: str, table: str, options: str | None) -> dict[str, Any]:
    """Make ``table`` and fill it with what loader ``kind`` reads from ``path``."""
    loader = _loader(kind, path)
    opts = (COMMON + loader.options).parse(parse_json(options))
    if table is None:
        raise LoomOptionError("the table name is NULL", hint="give the table to make, as text")
    if not isinstance(table, str) or not QUALIFIED.match(table.strip()):
        raise LoomOptionError(
            f"invalid table name {table!r}", hint="a table name, optionally schema-qualified"
        )
    target = relation(table, db.dialect)
    _outside_loomdb(db, target)
    columns = _distinct(loader.columns(path, opts))
    started = time.monotonic()
    try:
        with db.atomic():  # a file that cannot be read rolls the new table back
            if opts["replace"]:
                _drop(db, target)
            body = ", ".join(f"{quote_ident(c)} {db.type(t)}" for c, t in columns)
            _create(db, f"CREATE TABLE {target} ({body})")
            quoted = [quote_ident(c) for c, _ in columns]
            total = _fill(db, loader, path, opts, target, quoted, f"loom_load {kind}")
    except OSError as e:
        raise unreadable(kind, path, e) from None
    return {
        "table": table,
        "rows": total,
        "skipped": loader.skipped,
        "seconds": round(time.monotonic() - started, 6),
        **getattr(loader, "report", {}),  # what a loader adds (images: classes, skipped files)
    }


def _outside_loomdb(db: Target, target: str) -> None:
    """Refuse a table in loomdb's own schemas (its catalog, its storage tables), named with
    the schema or by a current schema that is one of them: a load there could replace the
    catalog's tables ({"replace": true} on loom.models)."""
    parts = [p.replace('""', '"') for p in re.findall(r'"((?:[^"]|"")*)"', target)]
    if len(parts) >= 2:
        schema = parts[-2]
    else:
        schema = str(db.query(f"SELECT {builtin('current_schema', db.dialect)}()")[0][0])
    if db.dialect == "duckdb":  # its names are case-insensitive, quoted or not
        schema = schema.lower()
    if schema in (SCHEMA, DATA_SCHEMA):
        raise LoomOptionError(
            f"cannot load into {target}: {schema} is loomdb's own schema",
            hint="name the table in another schema (e.g. public.t on PostgreSQL, main.t on "
            "DuckDB), or SET the current schema to another one",
        )


def _distinct(columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The table's columns, refused where an option names one as another is named (a label
    called ``indices``): compared case-insensitively, as DuckDB's names are, so both engines
    refuse the same names."""
    folded = [c.casefold() for c, _ in columns]
    for i, (column, _) in enumerate(columns):
        first = columns[folded.index(folded[i])][0]
        if folded.index(folded[i]) != i:
            both = f"'{first}'" + (f" and '{column}'" if first != column else "")
            raise LoomOptionError(
                f"the table would have two columns named {both}",
                hint="each column needs a name of its own: give the option naming one (the "
                f"label) a name not among {', '.join(dict.fromkeys(c for c, _ in columns))}",
            )
    return columns


def _drop(db: Target, target: str) -> None:
    """The table ``{"replace": true}`` replaces; where it cannot be dropped (the name is a
    view's, PostgreSQL's views depend on it), the database's message with what to do."""
    try:
        db.execute(f"DROP TABLE IF EXISTS {target}")
    except LoomDatabaseError as e:
        hint = (e.hint or "").strip().rstrip(".") or (
            f'{{"replace": true}} drops the table {target} only, not a view of that name nor '
            "the views that depend on it (PostgreSQL): drop those yourself"
        )
        raise LoomDatabaseError(
            e.message, hint=f"{hint}, or load into another name", detail=e.detail
        ) from None


def _create(db: Target, statement: str) -> None:
    """The new table; where the database refuses it (one of that name exists, its schema does
    not, the role may not create there), its message with what to do."""
    try:
        db.execute(statement)
    except LoomDatabaseError as e:
        raise LoomDatabaseError(
            e.message,
            hint=e.hint
            or "the rows go to a new table: give a name no table has, in a schema that exists "
            'and you may create tables in, or replace the table with the option {"replace": true}',
            detail=e.detail,
        ) from None


def unreadable(kind: str, path: str, e: OSError) -> LoomError:
    """What a loader's missing or unreadable file means, as a LoomError with its fix."""
    where = e.filename if e.filename is not None else path
    reads = "the database's process reads it (loom_load); loomdb load reads it where it runs"
    if isinstance(e, FileNotFoundError):
        return LoomNotFoundError(
            f"{kind}: there is no file {where}", hint=f"check the path: {reads}"
        )
    if isinstance(e, IsADirectoryError):
        return LoomOptionError(
            f"{kind}: {where} is a folder, not a file", hint=f"give the file's path: {reads}"
        )
    if isinstance(e, NotADirectoryError):
        return LoomOptionError(
            f"{kind}: {where} is not a folder", hint=f"give the folder's path: {reads}"
        )
    return LoomStateError(
        f"{kind}: {where} could not be read: {e.strerror or e}",
        hint=f"check the file and its permissions: {reads}",
    )


def regular_file(kind: str, path: str) -> None:
    """Refuse ``path`` where it is no regular file (a link is followed): a device or a FIFO
    would be read for ever (``/dev/zero``) or until some process writes to it.  A path that is
    not there, or a folder, raises the OSError opening it would (``unreadable`` says it)."""
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise LoomOptionError(
            f"{kind}: {path} is not a regular file (a device, a pipe or a socket), whose reading "
            "might never end",
            hint="copy the data into a file and load that file",
        )


def _fill(db: Target, loader: Loader, path: str, opts, target, names, what) -> int:
    pending: list[tuple] = []
    total, last = 0, time.monotonic()
    for row in loader.rows(path, opts):
        pending.append(row)
        if len(pending) >= FLUSH_ROWS:
            db.insert(target, names, pending)
            total += len(pending)
            pending = []
            db.check_interrupt()
            if time.monotonic() - last >= PROGRESS_S:
                last = time.monotonic()
                db.notice(f"{what}: {total:,} rows loaded ({loader.skipped} skipped)")
    if pending:
        db.insert(target, names, pending)
        total += len(pending)
    return total


def loom_load(db: Target, kind: str, path: str, table: str, options: str | None) -> str:
    """The SQL function: the database's process reads ``path`` (PostgreSQL: with the rights of
    ``pg_read_server_files``, which the caller must hold)."""
    import json

    if db.dialect == "postgres" and _loader(kind, path).reads_files:
        # pg_catalog's, with its exact argument types: named alone, a pg_has_role(name, text,
        # text) on the caller's search_path, which the caller may create, is the better match
        # for the literals and would let it read the server's files without the role
        allowed = db.query(
            "SELECT pg_catalog.pg_has_role(CURRENT_USER, "
            "CAST('pg_read_server_files' AS pg_catalog.name), CAST('MEMBER' AS pg_catalog.text))"
        )
        if not (allowed and allowed[0][0]):
            raise LoomStateError(
                "loom_load reads files on the database server: that needs the "
                "pg_read_server_files role",
                hint="GRANT pg_read_server_files TO you, or load from your machine with "
                "loomdb load KIND PATH TABLE --dsn …",
            )
    return json.dumps(load(db, kind, path, table, options))
