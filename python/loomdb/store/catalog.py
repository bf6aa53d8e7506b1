"""The catalog: ``loom.models`` and ``loom.indexes``, declared once for both engines.

Arrays and nested values are stored as JSON text so both engines read them the same way
(``coefficients::jsonb`` in PostgreSQL, ``coefficients::JSON`` in DuckDB).
"""

from __future__ import annotations

import json
from typing import Any

from loomdb.errors import LoomNotFoundError, LoomOptionError
from loomdb.store.db import Queryable

SCHEMA = "loom"

TABLES: dict[str, list[tuple[str, str]]] = {
    "models": [
        ("name", "text"),
        ("uid", "text"),
        ("kind", "text"),
        ("coefficients", "text"),
        ("intercept", "text"),
        ("feature_names", "text"),
        ("classes", "text"),
        ("standardization", "text"),
        ("options", "text"),
        ("history", "text"),
        ("rows_processed", "bigint"),
        ("rows_skipped", "bigint"),
        ("timings", "text"),
        ("storage_format", "text"),
        ("backend", "text"),
        ("source", "text"),
        ("label", "text"),
        ("report", "text"),
        ("created_at", "timestamp"),
    ],
    "indexes": [
        ("name", "text"),
        ("source", "text"),
        ("label", "text"),
        ("columns", "text"),
        ("format", "text"),
        ("options", "text"),
        ("stats", "text"),
        ("label_counts", "text"),
        ("rows", "bigint"),
        ("skipped", "bigint"),
        ("batches", "bigint"),
        ("bytes", "bigint"),
        ("storage_table", "text"),
        ("source_signature", "text"),
        ("built_at", "timestamp"),
    ],
}
JSON_COLUMNS = {
    "coefficients",
    "intercept",
    "feature_names",
    "classes",
    "standardization",
    "options",
    "history",
    "timings",
    "report",
    "columns",
    "stats",
    "label_counts",
}


def ddl(type_of: Any) -> list[str]:
    """``CREATE SCHEMA``/``CREATE TABLE`` statements; ``type_of`` maps abstract types."""
    out = [f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"]
    for table, cols in TABLES.items():
        body = ", ".join(
            f"{c} {type_of(t)}" + (" PRIMARY KEY" if c == "name" else "") for c, t in cols
        )
        out.append(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} ({body})")
    return out


def _insert(db: Queryable, table: str, row: dict[str, Any]) -> None:
    cols = [c for c, _ in TABLES[table] if c != "created_at" and c != "built_at"]
    stamp = "created_at" if table == "models" else "built_at"
    values = [json.dumps(row.get(c)) if c in JSON_COLUMNS else row.get(c) for c in cols]
    marks = ", ".join(f"${i + 1}" for i in range(len(cols)))
    db.execute(
        f"INSERT INTO {SCHEMA}.{table} ({', '.join(cols)}, {stamp}) "
        f"VALUES ({marks}, CURRENT_TIMESTAMP)",
        values,
    )


def _get(db: Queryable, table: str, name: str) -> dict[str, Any] | None:
    cols = [c for c, _ in TABLES[table]]
    rows = db.query(f"SELECT {', '.join(cols)} FROM {SCHEMA}.{table} WHERE name = $1", [name])
    if not rows:
        return None
    return {
        c: (json.loads(v) if c in JSON_COLUMNS and v is not None else v)
        for c, v in zip(cols, rows[0])
    }


def _delete(db: Queryable, table: str, name: str) -> None:
    bump()
    db.execute(f"DELETE FROM {SCHEMA}.{table} WHERE name = $1", [name])


_generation = 0


def generation() -> int:
    """Counts this process's writes to the catalog: a cheap invalidation key for caches."""
    return _generation


def bump() -> None:
    global _generation
    _generation += 1


def put_model(db: Queryable, row: dict[str, Any]) -> None:
    _delete(db, "models", row["name"])
    _insert(db, "models", row)
    bump()


def get_model(db: Queryable, name: str) -> dict[str, Any]:
    row = _get(db, "models", name)
    if row is None:
        raise LoomNotFoundError(
            f"model '{name}' does not exist",
            hint="train it with loom_train, or list models with SELECT name FROM loom.models",
        )
    return row


def model_exists(db: Queryable, name: str) -> bool:
    return bool(db.query(f"SELECT 1 FROM {SCHEMA}.models WHERE name = $1", [name]))


def drop_model(db: Queryable, name: str) -> None:
    get_model(db, name)
    _delete(db, "models", name)


def put_index(db: Queryable, row: dict[str, Any]) -> None:
    _insert(db, "indexes", row)


def get_index(db: Queryable, name: str) -> dict[str, Any]:
    row = _get(db, "indexes", name)
    if row is None:
        raise LoomNotFoundError(
            f"index '{name}' does not exist",
            hint="create it with loom_create_index or CREATE INDEX … USING; "
            "list them with SELECT name FROM loom.indexes",
        )
    return row


def index_exists(db: Queryable, name: str) -> bool:
    return bool(db.query(f"SELECT 1 FROM {SCHEMA}.indexes WHERE name = $1", [name]))


def delete_index(db: Queryable, name: str) -> None:
    _delete(db, "indexes", name)


def require_absent(db: Queryable, name: str, what: str) -> None:
    exists = model_exists(db, name) if what == "model" else index_exists(db, name)
    if exists:
        drop = "loom_drop_model" if what == "model" else "loom_drop_index"
        raise LoomOptionError(
            f"{what} '{name}' already exists",
            hint=f"drop it first with {drop}('{name}'), or choose another name",
        )
