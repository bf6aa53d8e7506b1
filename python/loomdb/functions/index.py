"""``loom_create_index``, ``loom_drop_index``, ``loom_reindex``: lay a source out for learning.

No paper section of its own: the layout is ``store.layout``'s, the formats cite theirs.
"""

from __future__ import annotations

import json
import time
from typing import Any

from loomdb.errors import LoomConflictError, LoomOptionError, LoomStateError
from loomdb.options import Boolean, Option, Options, parse_json
from loomdb.seams import IndexInfo
from loomdb.store import catalog, formats, layout
from loomdb.store.names import check_name

INDEX = Options(
    "loom_create_index",
    Option(
        "if_not_exists",
        Boolean(),
        False,
        "true: an index of that name already there is kept, and its summary returned",
    ),
    Option("progress", Boolean(), True, "report the layout (NOTICE in PostgreSQL)"),
)


def _summary(info: IndexInfo, seconds: float | None = None) -> str:
    out: dict[str, Any] = {
        "name": info.name,
        "source": info.source,
        "label": info.label,
        "format": info.format,
        "rows": info.rows,
        "skipped": info.skipped,
        "batches": info.batches,
        "bytes": info.bytes,
        "batch_size": info.options.get("batch_size"),
        "features": info.columns,
    }
    if info.options.get("sparse"):  # its array columns, width and the columns its rows hold
        out["sparse"] = {**info.options["sparse"], "columns": len(info.stats["columns"])}
    if "slimml" in info.stats:  # groups, their sizes, generation time (store/grouped.py)
        out["slimml"] = info.stats["slimml"]
    if seconds is not None:
        out["seconds"] = round(seconds, 6)
    return json.dumps(out)


def create_index(
    db: Any, name: str, source: str | None, label: str | None, options: str | None
) -> str:
    check_name(name, "index")
    given = parse_json(options)
    fmt = formats.get(given.get("format") if isinstance(given.get("format"), str) else None)
    opts = (INDEX + layout.options_of(fmt)).parse(given)
    exists, quiet = opts.pop("if_not_exists"), not opts.pop("progress")
    held = catalog.index_relation(db, name)
    if held is not None:
        raise LoomOptionError(
            f"the index name '{name}' is held by the PostgreSQL index {held}",
            hint=f"choose another name, or drop that one first: DROP INDEX {held}",
        )
    if catalog.index_exists(db, name):
        if exists:
            return _summary(catalog.get_index(db, name))
        catalog.require_absent(db, name, "index")
    catalog.require_no_case_twin(db, name)
    started = time.perf_counter()
    what = f"loom_create_index {name}"
    try:
        info = layout.build(db, name, source or "", label or "", opts, what, quiet)
    except LoomConflictError:  # another session built it meanwhile: if_not_exists takes that one
        if not exists or not catalog.index_exists(db, name):
            raise
        return _summary(catalog.get_index(db, name))
    seconds = time.perf_counter() - started
    if not quiet:
        db.notice(
            f"index {name}: {info.rows} rows ({info.skipped} skipped) laid out as {info.format} "
            f"in {info.batches} batches, {info.bytes:,} bytes"
        )
    return _summary(info, seconds)


def drop_index(db: Any, name: str) -> str:
    check_name(name, "index")
    held = catalog.index_relation(db, name)
    if held is not None:
        raise LoomStateError(
            f"index '{name}' belongs to the PostgreSQL index {held} (CREATE INDEX … USING)",
            hint=f"drop it with DROP INDEX {held}",
        )
    with db.atomic():
        damage = layout.drop(db, name)
    if damage is None:
        return json.dumps({"dropped": name})
    db.notice(f"{damage}; dropped all the same")
    return json.dumps({"dropped": name, "damaged": damage})


def reindex(db: Any, name: str) -> str:
    check_name(name, "index")
    started = time.perf_counter()
    info = layout.rebuild(db, name, f"loom_reindex {name}")
    return _summary(info, time.perf_counter() - started)
