"""The catalog: ``loom.models``, ``loom.model_versions``, ``loom.trials``, ``loom.indexes``,
``loom.grants``, ``loom.deployments``, ``loom.settings``.

No paper section.  Every catalog statement loomdb runs is in this module; rows travel as
:class:`IndexInfo` / :class:`ModelRecord`.  Arrays and nested values are JSON text so both
engines read them alike; numpy arrays (a sparse model's coefficients, a sparse layout's column
statistics) are written compactly by ``codecs.array_json`` and read back as numpy.  Nothing
read back from the catalog is ever pasted into SQL: names are checked by a CHECK constraint and
by :func:`check_name` and always quoted, a storage table is derived from its index's name
(:func:`storage_relation`), never stored.

In PostgreSQL each row has an ``owner`` (the role that wrote it; ``DEFAULT current_user``) and
row-level security makes other roles' rows invisible and untouchable unless a model is granted
(``loom.grants``); see ``engines/postgres/security.sql``.  DuckDB has no roles: ``owner`` is NULL.

Versions: ``loom.models`` holds each model's current version (``version``; NULL in a row an
older loomdb wrote, read as 1) and ``loom.model_versions`` its other versions, rows of the same
columns.  A retrain moves the current row there and writes version n + 1; choosing a version
moves rows back and forth in SQL (their content never leaves the database), so every reader
of ``loom.models`` stays correct and a model's current row is still one row.  Numbers only
grow: n + 1 is above every number the model has given, a dropped one included — dropping a
version writes the newest number into the current row's ``report`` (``newest_version``) when
the current row's own number is lower (that row is never dropped alone), so no number is given
twice, with no change to the catalog's shape.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import fields
from typing import Any

from loomdb.codecs import array_json
from loomdb.errors import (
    LoomConflictError,
    LoomFormatError,
    LoomNotFoundError,
    LoomOptionError,
    LoomStateError,
)
from loomdb.seams import IndexInfo, ModelRecord, read_as
from loomdb.store.db import Queryable
from loomdb.store.names import NAME_PATTERN, check_name, is_table_name, quote_ident, relation
from loomdb.store.names import same_source as same_name

SCHEMA = "loom"
DATA_SCHEMA = "loom_data"  # storage tables: a schema of their own, nothing of loomdb's code in it
VERSION = 3  # of the catalog's shape; loom.settings('catalog_version')

TABLES: dict[str, list[tuple[str, str]]] = {
    "models": [
        ("name", "name"),
        ("owner", "role"),
        ("uid", "text"),
        ("kind", "text"),
        ("coefficients", "json"),
        ("intercept", "json"),
        ("feature_names", "json"),
        ("classes", "json"),
        ("standardization", "json"),
        ("options", "json"),
        ("history", "json"),
        ("rows_processed", "bigint"),
        ("rows_skipped", "bigint"),
        ("timings", "json"),
        ("storage_format", "text"),
        ("backend", "text"),
        ("source", "text"),
        ("label", "text"),
        ("report", "json"),
        ("created_at", "timestamp"),
        ("version", "integer"),
    ],
    "trials": [  # loom_tune's trials, kept with the model they chose (functions/tune.py)
        ("model", "name"),
        ("owner", "role"),
        ("trial", "integer"),
        ("status", "text"),
        ("options", "json"),
        ("score", "double"),
        ("seconds", "double"),
        ("error", "text"),
        ("created_at", "timestamp"),
        ("metric", "text"),  # what scored the trial ("validation loss", …; functions/tune.py)
        ("version", "integer"),  # the model's version the search made (NULL: an older loomdb's)
    ],
    "indexes": [
        ("name", "name"),
        ("owner", "role"),
        ("uid", "text"),
        ("source", "text"),
        ("label", "text"),
        ("columns", "json"),
        ("format", "text"),
        ("format_version", "integer"),
        ("options", "json"),
        ("stats", "json"),
        ("label_counts", "json"),
        ("rows", "bigint"),
        ("skipped", "bigint"),
        ("batches", "bigint"),
        ("bytes", "bigint"),
        ("source_signature", "text"),
        ("built_at", "timestamp"),
    ],
    "grants": [
        ("model", "name"),
        ("owner", "role"),
        ("grantee", "text"),
        ("granted_at", "timestamp"),
    ],
    "deployments": [
        ("schema_name", "text"),
        ("function", "text"),
        ("owner", "role"),
        ("model", "name"),
        ("kind", "text"),
        ("arity", "integer"),
        ("deployed_at", "timestamp"),
    ],
    "settings": [("key", "text"), ("value", "text")],
}
TABLES["model_versions"] = list(TABLES["models"])  # a model's versions but the current one
# columns added since a table was first released: ALTER TABLE … ADD COLUMN IF NOT EXISTS
ADDED = {"models": ["version"], "trials": ["metric", "version"]}
KEYS = {
    "models": "name",
    "model_versions": "name, version",
    "trials": "model, trial",
    "indexes": "name",
    "grants": "model, grantee",
    "deployments": "schema_name, function",
    "settings": "key",
}
# Each role's grants and deployments are keyed apart: a row another role wrote (row-level
# security hides it) never collides with, and so never blocks, the owner's own.
PER_ROLE_KEYS = ("grants", "deployments", "trials")
STAMPS = {
    "models": "created_at",
    "trials": "created_at",
    "indexes": "built_at",
    "grants": "granted_at",
    "deployments": "deployed_at",
}


def _column(dialect: str, name: str, kind: str) -> str:
    pg = dialect == "postgres"
    if kind == "name":
        check = (
            f"{name} ~ '^{NAME_PATTERN}$'" if pg else f"regexp_full_match({name}, '{NAME_PATTERN}')"
        )
        return f"{name} text NOT NULL CHECK ({check})"
    if kind == "role":
        return f"{name} name NOT NULL DEFAULT current_user" if pg else f"{name} VARCHAR"
    spelled = {
        "text": "text",
        "json": "text",
        "bigint": "bigint",
        "integer": "integer",
        "double": "double precision" if pg else "DOUBLE",
        "timestamp": "timestamptz" if pg else "TIMESTAMP",
    }[kind]
    return f"{name} {spelled}"


def ddl(dialect: str, tables: tuple[str, ...] = tuple(TABLES)) -> list[str]:
    """``CREATE SCHEMA``/``CREATE TABLE`` statements of the catalog (or of ``tables``)."""
    out = [f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}", f"CREATE SCHEMA IF NOT EXISTS {DATA_SCHEMA}"]
    for table in tables:
        cols = TABLES[table]
        body = ", ".join(_column(dialect, c, t) for c, t in cols)
        key = KEYS[table]
        if dialect == "postgres" and table in PER_ROLE_KEYS:
            key = f"owner, {key}"
        out.append(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} ({body}, PRIMARY KEY ({key}))")
        kinds = dict(cols)
        out += [
            f"ALTER TABLE {SCHEMA}.{table} ADD COLUMN IF NOT EXISTS "
            + _column(dialect, c, kinds[c])
            for c in ADDED.get(table, [])
        ]
    return out


def storage_relation(name: str) -> str:
    """The storage table of index ``name``: derived from the (checked) name, quoted."""
    return f"{DATA_SCHEMA}.{quote_ident(check_name(name, 'index'))}"


# -- rows <-> records --------------------------------------------------------------------------


def _insert(db: Queryable, table: str, values: dict[str, Any]) -> None:
    # a NULL is left out (the column's default is NULL): an untyped parameter would be text
    cols = [c for c, _ in TABLES[table] if values.get(c) is not None]
    kinds = dict(TABLES[table])
    params = [
        json.dumps(values[c], default=array_json.default) if kinds[c] == "json" else values[c]
        for c in cols
    ]
    marks = ", ".join(f"${i + 1}" for i in range(len(cols)))
    stamp = STAMPS.get(table)
    stamp_col, stamp_val = (f", {stamp}", ", CURRENT_TIMESTAMP") if stamp else ("", "")
    db.execute(
        f"INSERT INTO {SCHEMA}.{table} ({', '.join(cols)}{stamp_col}) VALUES ({marks}{stamp_val})",
        params,
    )


def _select(
    db: Queryable, table: str, where: str, params: list[Any], extra: str | None = None
) -> list[dict[str, Any]]:
    cols = [c for c, _ in TABLES[table]]
    kinds = dict(TABLES[table])
    listed = ", ".join(cols) + (f", {extra} AS _version" if extra else "")
    rows = db.query(f"SELECT {listed} FROM {SCHEMA}.{table} WHERE {where}", params)
    names = cols + (["_version"] if extra else [])
    return [
        {
            c: _json_column(table, r, c, v) if kinds.get(c) == "json" and v is not None else v
            for c, v in zip(names, r)
        }
        for r in rows
    ]


# what a row of a catalog table describes, and the function that drops it
_DROPS = {"models": ("model", "loom_drop_model"), "indexes": ("index", "loom_drop_index")}


def _json_column(table: str, row: tuple, column: str, value: Any) -> Any:
    """A json column's value, or a LoomFormatError naming the row when it is not JSON (edited
    by hand)."""
    try:
        return json.loads(value, object_hook=array_json.hook)
    except (ValueError, TypeError):
        raise _json_damaged(table, row[0], column, "not JSON") from None


def _json_damaged(table: str, name: str, column: str, what: str) -> LoomFormatError:
    thing, drop = _DROPS.get(table, (f"loom.{table} row", None))
    return LoomFormatError(
        f"{thing} '{name}' is damaged: its catalog column {column} is {what}",
        hint=f"drop it with {drop}('{name}') and build it again"
        if drop
        else f"delete the row from loom.{table}",
    )


def row_owner(db: Queryable, table: str, name: str) -> tuple[str | None] | None:
    """``(owner,)`` of row ``name`` of catalog ``table`` (models, indexes), read alone, no JSON
    parsed: what dropping a damaged row needs (the owner is None on DuckDB, which has no
    roles); None when there is no such row."""
    rows = db.query(f"SELECT owner FROM {SCHEMA}.{table} WHERE name = $1", [name])
    return (rows[0][0],) if rows else None


def _record(cls: Any, row: dict[str, Any]) -> Any:
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})


def _values(record: Any) -> dict[str, Any]:
    skip = {"owner", "created_at", "built_at"}
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name not in skip}


# -- models ------------------------------------------------------------------------------------


def _missing(what: str, name: str) -> LoomNotFoundError:
    listing = "models" if what == "model" else "indexes"
    create = "train it with loom_train" if what == "model" else "create it with loom_create_index"
    return LoomNotFoundError(
        f"{what} '{name}' does not exist",
        hint=f"{create}, or list them with SELECT name FROM {SCHEMA}.{listing}",
    )


def get_model(db: Queryable, name: str) -> ModelRecord:
    rows = _select(db, "models", "name = $1", [check_name(name, "model")])
    if not rows:
        raise _missing("model", name)
    return _record(ModelRecord, rows[0])


#: the first key of the advisory locks :func:`hold_model` takes ('loom' in ASCII), the second
#: being the model name's hash: a class of keys of loomdb's own
MODEL_LOCKS = 0x6C6F6F6D


def hold_model(db: Queryable, name: str) -> None:
    """Before a call writes model ``name`` (a train, a drop, a version chosen), wait for any
    other transaction writing it to end, and make those that come later wait for this one:
    each then reads the model as the one before left it.  Without that wait, on PostgreSQL,
    a drop meeting a retrain deleted some of the model's rows as they were before it and
    found its current row replaced, and a retrain meeting a drop kept a version the drop
    had deleted.  A transaction-level advisory lock, on PostgreSQL.  DuckDB's transactions
    never wait, and two that write different rows both commit (a deploy inserting the
    model's function while a drop deleted the model left the function of a dropped model):
    there each writer first deletes the model's current row and writes it back unchanged
    (DuckDB finds two transactions deleting one row, but not two updating it), so that the
    later of two is refused (``LoomConflictError``)."""
    if db.dialect != "postgres":
        current = db.query(
            f"SELECT COALESCE(version, 1) FROM {SCHEMA}.models WHERE name = $1", [name]
        )
        if current:
            _archive(db, name)
            where = "name = $1 AND version = $2"
            _move(db, "model_versions", "models", where, [name, current[0][0]])
        return
    db.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock(CAST($1 AS pg_catalog.int4), "
        "pg_catalog.hashtext(CAST($2 AS pg_catalog.text)))",
        [MODEL_LOCKS, name],
    )


def model_exists(db: Queryable, name: str) -> bool:
    return bool(db.query(f"SELECT 1 FROM {SCHEMA}.models WHERE name = $1", [name]))


def _version_sql(dialect: str) -> str:
    """What changes whenever a model's row changes (a retrain, or an UPDATE by hand)."""
    if dialect == "postgres":
        return "uid || ':' || xmin::text"
    return (
        "uid || ':' || CAST(hash(kind, coefficients, intercept, feature_names, classes, "
        "standardization) AS VARCHAR)"
    )


def model_version(db: Queryable, name: str) -> str | None:
    """The model's version (see ``_version_sql``), or None when there is no such model."""
    rows = db.query(
        f"SELECT {_version_sql(db.dialect)} FROM {SCHEMA}.models WHERE name = $1", [name]
    )
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def get_model_versioned(db: Queryable, name: str) -> tuple[str, ModelRecord]:
    """The model and its version, read together."""
    rows = _select(db, "models", "name = $1", [check_name(name, "model")], _version_sql(db.dialect))
    if not rows:
        raise _missing("model", name)
    version = rows[0].pop("_version")
    return str(version), _record(ModelRecord, rows[0])


def put_model(db: Queryable, record: ModelRecord, replace: bool) -> None:
    """Write a model row (a new uid) as the model's next version; ``replace`` first keeps the
    current row (this role's) in ``loom.model_versions``."""
    record.uid = uuid.uuid4().hex
    if replace:
        _archive(db, record.name)
    record.version = newest_version(db, record.name) + 1
    try:
        _insert(db, "models", _values(record))
    except LoomConflictError:
        raise taken("model", record.name) from None


# -- versions: the current one in loom.models, the others in loom.model_versions -------------


def _mine(dialect: str) -> str:
    """A row this role may move: its own (a superuser's: any); row-level security would refuse
    writing another role's row into ``loom.model_versions`` with an unhelpful message."""
    if dialect != "postgres":
        return "TRUE"
    return (
        "(owner = current_user OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles "
        "WHERE rolname = current_user AND rolsuper))"
    )


def _move(db: Queryable, source: str, target: str, where: str, params: list[Any]) -> None:
    """Move the rows of ``source`` matching ``where`` (and :func:`_mine`) into ``target``, with
    their owner (PostgreSQL: by identity too, ``owner_role``, which security.sql adds)."""
    cols = [c for c, _ in TABLES["models"]] + (["owner_role"] if db.dialect == "postgres" else [])
    picked = ", ".join("COALESCE(version, 1)" if c == "version" else c for c in cols)
    condition = f"{where} AND {_mine(db.dialect)}"
    db.execute(
        f"INSERT INTO {SCHEMA}.{target} ({', '.join(cols)}) "
        f"SELECT {picked} FROM {SCHEMA}.{source} WHERE {condition}",
        params,
    )
    db.execute(f"DELETE FROM {SCHEMA}.{source} WHERE {condition}", params)


def _archive(db: Queryable, name: str) -> None:
    _move(db, "models", "model_versions", "name = $1", [name])


def make_current(db: Queryable, name: str, version: int) -> None:
    """Make old ``version`` of model ``name`` its current one, keeping the current one."""
    if version == current_version(db, name):
        return
    if not db.query(
        f"SELECT 1 FROM {SCHEMA}.model_versions WHERE name = $1 AND version = $2", [name, version]
    ):
        raise _no_version(name, version)
    _archive(db, name)
    _move(db, "model_versions", "models", "name = $1 AND version = $2", [name, version])


def current_version(db: Queryable, name: str) -> int:
    rows = db.query(f"SELECT COALESCE(version, 1) FROM {SCHEMA}.models WHERE name = $1", [name])
    if not rows:
        raise _missing("model", name)
    return int(rows[0][0])


def newest_version(db: Queryable, name: str) -> int:
    """The highest version number model ``name`` has given (0: none): of its rows, or one
    since dropped, as a row's ``report`` remembers it (:data:`NEWEST`)."""
    rows = db.query(
        f"SELECT COALESCE(version, 1), report FROM {SCHEMA}.models WHERE name = $1 "
        f"UNION ALL SELECT version, report FROM {SCHEMA}.model_versions WHERE name = $1",
        [name],
    )
    return max((max(int(v), _remembered(r)) for v, r in rows), default=0)


#: The key of a model row's ``report`` that remembers the newest version number the model has
#: given when that version was dropped, so that no number is given twice (``drop_version``)
NEWEST = "newest_version"


def _remembered(report: str | None) -> int:
    parsed = json.loads(report) if report else None
    value = parsed.get(NEWEST) if isinstance(parsed, dict) else None
    return value if isinstance(value, int) else 0


def _remember_newest(db: Queryable, name: str, newest: int) -> None:
    """Write ``newest`` into the current row's report, unless its own number says it: the
    current row is the one a version drop never deletes (another row that remembered it may
    go, and the number with it)."""
    rows = db.query(
        f"SELECT COALESCE(version, 1), report FROM {SCHEMA}.models WHERE name = $1", [name]
    )
    if not rows or int(rows[0][0]) >= newest or _remembered(rows[0][1]) == newest:
        return
    report = {**(json.loads(rows[0][1]) if rows[0][1] else {}), NEWEST: newest}
    db.execute(
        f"UPDATE {SCHEMA}.models SET report = $2 WHERE name = $1 AND {_mine(db.dialect)}",
        [name, json.dumps(report)],
    )


def versions_of(db: Queryable, name: str) -> list[dict[str, Any]]:
    """Each version of model ``name`` this role sees, oldest first: version, current,
    created_at, options, history."""
    rows = db.query(
        f"SELECT COALESCE(version, 1), TRUE, created_at, options, history FROM {SCHEMA}.models "
        f"WHERE name = $1 UNION ALL SELECT version, FALSE, created_at, options, history "
        f"FROM {SCHEMA}.model_versions WHERE name = $1 ORDER BY 1",
        [check_name(name, "model")],
    )
    keys = ("version", "current", "created_at", "options", "history")
    out = [dict(zip(keys, r)) for r in rows]
    for row in out:
        row["options"] = json.loads(row["options"]) if row["options"] else {}
        row["history"] = json.loads(row["history"]) if row["history"] else []
    return out


def drop_version(db: Queryable, name: str, version: int) -> None:
    """Delete an old version of model ``name`` (never the current one) and the trials of the
    search that made it; the current row remembers the newest number given, which may have
    been this one's."""
    if version == current_version(db, name):
        raise LoomStateError(
            f"version {version} is the current version of model '{name}'",
            hint=f"deploy another version first (loom_deploy('{name}', "
            f"'{{\"version\": n}}')), or drop the whole model with loom_drop_model('{name}')",
        )
    newest = newest_version(db, name)
    if not db.query(
        f"DELETE FROM {SCHEMA}.model_versions WHERE name = $1 AND version = $2 RETURNING name",
        [name, version],
    ):
        raise _no_version(name, version)
    db.execute(f"DELETE FROM {SCHEMA}.trials WHERE model = $1 AND version = $2", [name, version])
    _remember_newest(db, name, newest)


def _no_version(name: str, version: int) -> LoomNotFoundError:
    return LoomNotFoundError(
        f"model '{name}' has no version {version}",
        hint=f"list its versions with SELECT * FROM loom_model_versions('{name}')",
    )


def taken(what: str, name: str) -> LoomConflictError:
    return LoomConflictError(
        f"{what} '{name}' was written by another session or belongs to another role",
        hint=f"choose another {what} name, or retry if another train of it just finished",
    )


def drop_model(db: Queryable, name: str) -> str | None:
    """Delete the model, its versions, its grants and its trials; its owner.  Reads the owner
    alone, no JSON parsed, so a damaged row (``damaged``'s hint says to drop it) drops too."""
    found = row_owner(db, "models", check_name(name))
    if found is None:
        raise _missing("model", name)
    (owner,) = found
    db.execute(f"DELETE FROM {SCHEMA}.grants WHERE model = $1", [name])
    delete_trials(db, name)
    db.execute(f"DELETE FROM {SCHEMA}.model_versions WHERE name = $1", [name])
    if not db.query(f"DELETE FROM {SCHEMA}.models WHERE name = $1 RETURNING name", [name]):
        raise LoomStateError(  # visible through a grant, but not this role's to drop
            f"model '{name}' belongs to {owner}: only its owner may drop it",
            hint="ask its owner to drop it",
        )
    return owner


def require_absent(db: Queryable, name: str, what: str) -> None:
    exists = model_exists(db, name) if what == "model" else index_exists(db, name)
    if exists:
        drop = "loom_drop_model" if what == "model" else "loom_drop_index"
        raise LoomOptionError(
            f"{what} '{name}' already exists",
            hint=f"drop it first with {drop}('{name}'), or choose another name",
        )


def grant(db: Queryable, model: str, grantee: str) -> None:
    """Grant ``model`` to role ``grantee`` (or public), on its owner's behalf.  The row names
    the model's owner and the grantee by identity too (``owner_role``, ``grantee_role``:
    security.sql), so the grant never passes to a role created later under either name."""
    get_model(db, model)
    db.execute(f"DELETE FROM {SCHEMA}.grants WHERE model = $1 AND grantee = $2", [model, grantee])
    db.execute(
        f"INSERT INTO {SCHEMA}.grants (model, owner, owner_role, grantee, grantee_role, "
        "granted_at) SELECT m.name, m.owner, m.owner_role, $2, "
        "(SELECT r.oid::pg_catalog.regrole FROM pg_catalog.pg_roles AS r WHERE r.rolname = $2), "
        f"CURRENT_TIMESTAMP FROM {SCHEMA}.models AS m WHERE m.name = $1",
        [model, grantee],
    )


def revoke(db: Queryable, model: str, grantee: str) -> int:
    get_model(db, model)
    before = db.query(
        f"SELECT count(*) FROM {SCHEMA}.grants WHERE model = $1 AND grantee = $2", [model, grantee]
    )[0][0]
    db.execute(f"DELETE FROM {SCHEMA}.grants WHERE model = $1 AND grantee = $2", [model, grantee])
    return int(before)


def grantees(db: Queryable, model: str) -> list[str]:
    rows = db.query(
        f"SELECT grantee FROM {SCHEMA}.grants WHERE model = $1 ORDER BY grantee", [model]
    )
    return [r[0] for r in rows]


# -- trials: loom_tune's search, one row per trial ----------------------------------------------


def put_trials(db: Queryable, model: str, trials: list[dict[str, Any]], version: int) -> None:
    """Replace the model's trials (of this role: row-level security hides the others') with
    ``trials``: dicts of trial, status, options, score, seconds, error, metric, of the search
    that made ``version`` of the model."""
    delete_trials(db, model)
    for t in trials:
        _insert(db, "trials", {"model": model, **t, "version": version})


def delete_trials(db: Queryable, model: str) -> None:
    db.execute(f"DELETE FROM {SCHEMA}.trials WHERE model = $1", [model])


def trials_of(db: Queryable, model: str) -> list[dict[str, Any]]:
    """The trials of the search that made the model's current version, in trial order (none
    for a version loom_tune did not make: a loom_train of the name, or one rolled back to).  A
    row an older loomdb wrote names no version, which it did not record: it is listed."""
    rows = _select(db, "trials", "model = $1 ORDER BY trial", [check_name(model, "model")])
    if not rows:
        return rows
    current = current_version(db, model)
    return [r for r in rows if r.get("version") in (None, current)]


# -- deployments: native SQL functions made from models ----------------------------------------


def deployments_of(db: Queryable, model: str, owner: str | None) -> list[tuple[str, str, str, int]]:
    """``(schema, function, kind, arity)`` of every function ``owner`` deployed from ``model``
    (only the model's owner deploys it: a row of another role's is not acted on)."""
    rows = db.query(
        f"SELECT schema_name, function, kind, arity FROM {SCHEMA}.deployments "
        "WHERE model = $1 AND owner IS NOT DISTINCT FROM $2 ORDER BY schema_name, function",
        [model, owner],
    )
    return [(str(s), str(f), str(k), int(a)) for s, f, k, a in rows]


def deployments_named(db: Queryable, function: str) -> list[tuple[str, str, str, int]]:
    """``(schema, function, model, arity)`` of every deployment this role sees whose function
    is named ``function`` in any case (the caller compares the names as its engine does)."""
    rows = db.query(
        f"SELECT schema_name, function, model, arity FROM {SCHEMA}.deployments "
        "WHERE lower(function) = lower($1) ORDER BY schema_name, function",
        [function],
    )
    return [(str(s), str(f), str(m), int(a)) for s, f, m, a in rows]


def put_deployment(
    db: Queryable, schema: str, function: str, model: str, kind: str, arity: int
) -> None:
    delete_deployment(db, schema, function)
    row = {
        "schema_name": schema,
        "function": function,
        "model": model,
        "kind": kind,
        "arity": arity,
    }
    _insert(db, "deployments", row)


def delete_deployment(db: Queryable, schema: str, function: str) -> None:
    db.execute(
        f"DELETE FROM {SCHEMA}.deployments WHERE schema_name = $1 AND function = $2",
        [schema, function],
    )


# -- indexes -----------------------------------------------------------------------------------


def get_index(db: Queryable, name: str) -> IndexInfo:
    rows = _select(db, "indexes", "name = $1", [check_name(name, "index")])
    if not rows:
        held = index_relation(db, name)
        if held is not None:  # CREATE INDEX … USING on an empty table (or TRUNCATE)
            raise LoomStateError(
                f"index '{name}' has no layout: {held}'s table was empty when it was built",
                hint=f"REINDEX INDEX {held} once the table has rows",
            )
        raise _missing("index", name)
    row = rows[0]
    try:
        row["label_counts"] = {float(k): int(v) for k, v in (row["label_counts"] or {}).items()}
    except (ValueError, TypeError, AttributeError):
        raise _json_damaged("indexes", name, "label_counts", "not counts by label") from None
    return _record(IndexInfo, row)


def index_exists(db: Queryable, name: str) -> bool:
    return bool(db.query(f"SELECT 1 FROM {SCHEMA}.indexes WHERE name = $1", [name]))


def index_spelled(db: Queryable, name: str) -> str | None:
    """The index ``name`` names, as the catalog spells it: on DuckDB, whose identifiers ignore
    case, one whose name differs from it in case only (``require_no_case_twin`` keeps it
    one); on PostgreSQL ``name`` itself.  None when there is none."""
    if index_exists(db, name):
        return name
    if db.dialect != "duckdb":
        return None
    rows = db.query(f"SELECT name FROM {SCHEMA}.indexes WHERE lower(name) = lower($1)", [name])
    return str(rows[0][0]) if len(rows) == 1 else None


def index_format(db: Queryable, name: str) -> str | None:
    """The storage format index ``name`` was built with (None: no such index)."""
    rows = db.query(f"SELECT format FROM {SCHEMA}.indexes WHERE name = $1", [name])
    return str(rows[0][0]) if rows and isinstance(rows[0][0], str) else None


def require_no_case_twin(db: Queryable, name: str) -> None:
    """Refuse index ``name`` on DuckDB where another index's name differs from it in case only:
    DuckDB's table names ignore case, so the two storage tables would be one (PostgreSQL
    quotes them: its index names are case-sensitive)."""
    if db.dialect != "duckdb":
        return
    rows = db.query(
        f"SELECT name FROM {SCHEMA}.indexes WHERE lower(name) = lower($1) AND name <> $1",
        [name],
    )
    if rows:
        raise LoomConflictError(
            f"index '{rows[0][0]}' already exists, and '{name}' differs from it only in case: "
            "DuckDB's storage tables ignore case",
            hint="choose a name that differs in more than case, or drop that one first "
            f"with loom_drop_index('{rows[0][0]}')",
        )


def put_index(db: Queryable, info: IndexInfo) -> None:
    values = _values(info)
    values["label_counts"] = {repr(k): v for k, v in info.label_counts.items()}
    try:
        _insert(db, "indexes", values)
    except LoomConflictError:
        raise taken("index", info.name) from None


def index_relation(db: Queryable, name: str) -> str | None:
    """The PostgreSQL index relation (``schema.name``) holding loomdb index ``name`` — one
    made by ``CREATE INDEX … USING`` — or None (always None in DuckDB).  The table it reads,
    ``loom.index_relations``, is kept by ``engines/postgres/index_am.py``."""
    if db.dialect != "postgres":
        return None
    # pg_catalog's quote_ident(text) and ||, never a role's quote_ident(name) (an exact match
    # for the columns' type) on the search_path
    rows = db.query(
        "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) OPERATOR(pg_catalog.||) '.' "
        "OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname::pg_catalog.text) "
        f"FROM {SCHEMA}.index_relations AS r "
        "JOIN pg_catalog.pg_class AS c ON c.oid = r.relation "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace WHERE r.name = $1",
        [name],
    )
    return str(rows[0][0]) if rows else None


def delete_index(db: Queryable, name: str) -> None:
    """Delete index ``name``'s row; refused when there is none (PostgreSQL: another session
    deleted it after this one read it — a drop waited for — so that a rebuild does not record
    the index again, nor a second drop say it dropped it)."""
    if not db.query(f"DELETE FROM {SCHEMA}.indexes WHERE name = $1 RETURNING name", [name]):
        raise _missing("index", name)


_QUALIFIED_PG = (
    "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) OPERATOR(pg_catalog.||) '.' "
    "OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname::pg_catalog.text), "
    "c.relpersistence::pg_catalog.text FROM pg_catalog.pg_class AS c "
    "JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
    "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)"
)
_RELATIONS_DUCK = (
    "SELECT database_name, schema_name, n FROM (SELECT database_name, schema_name, table_name AS "
    "n FROM duckdb_tables() UNION ALL SELECT database_name, schema_name, view_name FROM "
    "duckdb_views()) WHERE lower(n) = lower($1) AND database_name <> 'temp'"
)


def qualified(db: Queryable, source: str) -> str | None:
    """The table or view ``source`` names here and now, schema-qualified as the engine resolves
    it (PostgreSQL: ``to_regclass`` under the search_path; DuckDB: the first schema of its
    search path, then ``main``, holding it; a qualified name as it is), quoted; None for a
    query, a temporary table, or a name that finds none."""
    text = source.strip().rstrip(";").strip()
    if not is_table_name(text):
        return None
    if db.dialect == "postgres":
        rows = db.query(_QUALIFIED_PG, [text])
        return str(rows[0][0]) if rows and rows[0][1] != "t" else None
    parts = relation(text, db.dialect)[1:-1].split('"."')  # "a"."b" → a, b (quotes doubled)
    if len(parts) > 1:
        return relation(text, db.dialect)
    (home, path), *_ = db.query("SELECT current_database(), current_setting('search_path')")
    name = parts[0].replace('""', '"')
    rows = db.query(_RELATIONS_DUCK, [name])
    found = {(str(d).lower(), str(s).lower()): (str(s), str(n)) for d, s, n in rows}
    for entry in [*(e.strip() for e in str(path or "").split(",") if e.strip()), "main"]:
        bits = [b.strip('"').lower() for b in entry.split(".")]
        where = (bits[0] if len(bits) > 1 else str(home).lower(), bits[-1])
        if where in found:  # as the catalog spells them; another database's name as well
            named = [*([] if where[0] == str(home).lower() else [where[0]]), *found[where]]
            return ".".join(quote_ident(p) for p in named)
    return None


def _relation_id(db: Queryable, source: str) -> Any:
    """What table ``source`` names here and now, with the schema filled in as the engine fills
    it (PostgreSQL: its OID by ``to_regclass``, None where there is none; DuckDB: its lower-case
    parts under the current schema); None for a query."""
    text = source.strip().rstrip(";").strip()
    if not is_table_name(text):
        return None
    if db.dialect == "postgres":
        rows = db.query(
            "SELECT pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid", [text]
        )
        return rows[0][0] if rows else None
    parts = relation(qualified(db, text) or text, db.dialect).lower()[1:-1].split('"."')
    if len(parts) == 1:
        parts.insert(0, str(db.query("SELECT current_schema()")[0][0]).lower())
    return tuple(parts)


def same_source(db: Queryable, a: str, b: str) -> bool:
    """Whether sources ``a`` and ``b`` name the same relation: as the engine reads names
    (``names.same_source``: ``'PTS'`` is ``pts``), or as the same table once its schema is
    filled in (``'pts'`` is ``'public.pts'``, which psql's ``CREATE INDEX … USING`` records)."""
    if same_name(a, b, db.dialect):
        return True
    left = _relation_id(db, a)
    return left is not None and left == _relation_id(db, b)


def indexes_on(db: Queryable, source: str, fmt: str | None = None) -> list[str]:
    """The indexes (of format ``fmt``, or any) built on ``source``, newest first: on the table
    ``source`` names (:func:`same_source`: ``'PTS'`` finds an index built on ``pts``, and
    ``'pts'`` one built on ``'public.pts'``), however either was spelled."""
    rows = db.query(
        f"SELECT name, source, format, stats FROM {SCHEMA}.indexes ORDER BY built_at DESC, name"
    )
    return [
        str(n)
        for n, s, f, stats in rows
        if (fmt is None or f == fmt)
        and isinstance(s, str)
        and same_source(db, _recorded_table(s, stats), source)
    ]


def _recorded_table(source: str, stats: Any) -> str:
    """What an index row reads as its source (``IndexInfo.table``), from its columns' text:
    ``source`` where its stats (damaged or not) record no table."""
    try:
        return read_as(source, json.loads(stats))
    except (TypeError, ValueError):
        return source


_SCHEMA_PG = (
    "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class AS c "
    "JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
    "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)"
)


def _schema_of(db: Queryable, source: str) -> str | None:
    """The schema of the table or view ``source`` names here and now (DuckDB: lower case, of
    this database), or None: a query, a table in another database, a name that finds none."""
    text = source.strip().rstrip(";").strip()
    if not is_table_name(text):
        return None
    if db.dialect == "postgres":
        rows = db.query(_SCHEMA_PG, [text])
        return str(rows[0][0]) if rows else None
    parts = _relation_id(db, text)
    return str(parts[0]) if parts is not None and len(parts) == 2 else None


def indexes_in(db: Queryable, schema: str | None) -> list[str]:
    """The indexes built on a table or view of ``schema`` (as the engine reads the name: on
    DuckDB whatever its case), or every index where ``schema`` is None; by name."""
    rows = db.query(f"SELECT name, source, stats FROM {SCHEMA}.indexes ORDER BY name")
    if schema is None:
        return [str(n) for n, _, _ in rows]
    wanted = schema.lower() if db.dialect == "duckdb" else schema
    return [
        str(n)
        for n, s, stats in rows
        if isinstance(s, str) and _schema_of(db, _recorded_table(s, stats)) == wanted
    ]


def index_for(db: Queryable, source: str, fmt: str) -> str | None:
    """The newest index of format ``fmt`` built on ``source`` (:func:`indexes_on`), if any."""
    found = indexes_on(db, source, fmt)
    return found[0] if found else None


def engine_index(db: Queryable, schema: str, name: str) -> bool:
    """Whether the engine has an index relation ``schema.name`` of its own (DuckDB's names
    compared whatever their case; PostgreSQL's as given, already folded)."""
    if db.dialect == "duckdb":
        query = (
            "SELECT 1 FROM duckdb_indexes() WHERE lower(schema_name) = lower($1) "
            "AND lower(index_name) = lower($2)"
        )
    else:
        query = (
            "SELECT 1 FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n "
            "ON n.oid = c.relnamespace WHERE n.nspname::pg_catalog.text = $1 "
            "AND c.relname::pg_catalog.text = $2 AND c.relkind IN ('i', 'I')"
        )
    return bool(db.query(query, [schema, name]))


# -- settings ----------------------------------------------------------------------------------


def exists(db: Queryable) -> bool:
    """Whether the database holds loomdb's catalog (a read-only file may not)."""
    return _table_exists(db, SCHEMA, "settings")


def storage_exists(db: Queryable, name: str) -> bool:
    """Whether index ``name``'s storage table is there (it may have been dropped by hand)."""
    return _table_exists(db, DATA_SCHEMA, check_name(name, "index"))


def _table_exists(db: Queryable, schema: str, table: str) -> bool:
    """Whether loomdb's database has table ``schema.table`` (DuckDB's names compared whatever
    their case, PostgreSQL's exactly)."""
    if db.dialect == "postgres":  # information_schema's columns are a domain any role's = of
        rows = db.query(  # that type would be an exact match for: pg_catalog's own tables
            "SELECT pg_catalog.count(*) FROM pg_catalog.pg_class AS c "
            "JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
            "WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name "
            "AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.name",
            [schema, table],
        )
        return bool(rows and rows[0][0])
    rows = db.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 "
        "AND lower(table_name) = lower($2)",
        [schema, table],
    )
    return bool(rows and rows[0][0])


def database_id(db: Queryable, writable: bool) -> str:
    """The database's own id, made once (so caches never mix two databases); a read-only
    database without a catalog gets a fresh one each time it is opened."""
    if exists(db):
        found = setting(db, "database_id")
        if found:
            return found
    fresh = uuid.uuid4().hex
    if writable:
        put_setting(db, "database_id", fresh)
    return fresh


def setting(db: Queryable, key: str) -> str | None:
    rows = db.query(f"SELECT value FROM {SCHEMA}.settings WHERE key = $1", [key])
    return rows[0][0] if rows else None


def put_setting(db: Queryable, key: str, value: str) -> None:
    db.execute(f"DELETE FROM {SCHEMA}.settings WHERE key = $1", [key])
    db.execute(f"INSERT INTO {SCHEMA}.settings (key, value) VALUES ($1, $2)", [key, value])
