"""``loom_create_index``, ``loom_drop_index``, ``loom_reindex``: lay a source out for learning."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from loomdb.api.train_options import LAYOUT
from loomdb.batch import Batch
from loomdb.options import parse_json, validate
from loomdb.store import catalog, formats
from loomdb.store.db import Database
from loomdb.store.names import check_name, quote_ident
from loomdb.store.source import profile

READ_CHUNK = 8192
DEFAULT_BATCH = 32


def storage_table(name: str) -> str:
    return f"{catalog.SCHEMA}.{quote_ident('ix_' + name)}"


def layout_options(given: dict[str, Any]) -> dict[str, Any]:
    fmt = formats.get(given.get("format") or "dense")
    opts = validate(given, [*LAYOUT, *getattr(fmt, "OPTIONS", [])])
    return with_format_defaults(opts, fmt)


def with_format_defaults(opts: dict[str, Any], fmt: Any) -> dict[str, Any]:
    if opts.get("batch_size") is None:
        opts["batch_size"] = getattr(fmt, "default_batch_size", DEFAULT_BATCH)
    opts["format"] = fmt.name
    return opts


def build(
    db: Database, name: str, source: str, label: str, opts: dict[str, Any], quiet: bool = False
) -> dict[str, Any]:
    """Profile ``source``, write its minibatches in ``opts['format']``, record the index."""
    fmt = formats.get(opts["format"])
    started = time.perf_counter()
    prof = profile(db, source, label, opts["features"], opts["nulls"])
    table = storage_table(name)
    with db.atomic():
        fmt.create(db, table)
        chunks = db.read_matrix(prof.relation, prof.columns, prof.where, opts["seed"], READ_CHUNK)
        written = fmt.write(db, table, chunks, {**opts, "profile": prof})
        row = {
            "name": name,
            "source": source,
            "label": prof.label,
            "columns": prof.features,
            "format": fmt.name,
            "options": {k: v for k, v in opts.items() if k not in ("features", "if_not_exists")},
            "stats": prof.stats_json(),
            "label_counts": {repr(k): v for k, v in prof.label_counts.items()},
            "rows": prof.rows,
            "skipped": prof.skipped,
            "batches": written["batches"],
            "bytes": written["bytes"],
            "storage_table": table,
            "source_signature": db.signature(prof.relation, prof.columns, prof.where),
        }
        catalog.put_index(db, row)
    row["seconds"] = round(time.perf_counter() - started, 6)
    if not quiet:
        db.notice(
            f"index {name}: {prof.rows} rows ({prof.skipped} skipped) laid out as {fmt.name} "
            f"in {written['batches']} batches, {written['bytes']:,} bytes"
        )
    return row


def drop(db: Database, name: str) -> None:
    info = catalog.get_index(db, name)
    with db.atomic():
        db.execute(f"DROP TABLE IF EXISTS {info['storage_table']}")
        catalog.delete_index(db, name)


def read_batches(db: Database, info: dict[str, Any], **kwargs: Any) -> Iterator[Batch]:
    """The stored batches of an index (``first``/``stop`` select a range of batch numbers)."""
    fmt = formats.get(info["format"])
    return fmt.batches(
        db, info["storage_table"], info["options"], n_features=len(info["columns"]), **kwargs
    )


def _summary(row: dict[str, Any]) -> str:
    keys = ("name", "source", "label", "format", "rows", "skipped", "batches", "bytes", "seconds")
    return json.dumps({k: row[k] for k in keys if k in row} | {"features": row["columns"]})


def create_index(db: Database, name: str, source: str, label: str, options: str | None) -> str:
    check_name(name, "index")
    opts = layout_options(parse_json(options))
    if catalog.index_exists(db, name):
        if opts["if_not_exists"]:
            return _summary(catalog.get_index(db, name))
        catalog.require_absent(db, name, "index")
    return _summary(build(db, name, source, label, opts))


def drop_index(db: Database, name: str) -> str:
    check_name(name, "index")
    drop(db, name)
    return json.dumps({"dropped": name})


def reindex(db: Database, name: str) -> str:
    check_name(name, "index")
    info = catalog.get_index(db, name)
    opts = {**info["options"], "features": info["columns"]}
    with db.atomic():
        drop(db, name)
        row = build(db, name, info["source"], info["label"], layout_options(opts))
    return _summary(row)
