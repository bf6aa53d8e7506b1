"""Profile a source of images: an image column (bytea / BLOB) and a numeric label.

No paper section (PCR starts from "the training dataset stored in JPEG format").  Counts, NULLs,
the label's statistics and classes are computed in SQL as for numeric sources
(``store/source.py``), and so is the images' total size (``octet_length``), which decides
whether a train without an index keeps its layout in memory.  The features' statistics come
from the decoded images during the layout pass (``store/formats/pcr_records.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.errors import LoomDataError, LoomOptionError
from loomdb.store.db import Database
from loomdb.store.names import builtin, quote_ident
from loomdb.store.settle import column_stats
from loomdb.store.source import (
    USABLE,
    SourceProfile,
    columns_of,
    count_rows,
    label_counts,
    number,
    resolve,
)

IMAGE = "bytes"


def _image_column(source: str, available: dict[str, str], features: list[str] | None) -> str:
    if features is not None:
        if len(features) != 1:
            raise LoomOptionError(
                f"a pcr index reads one image column; got {len(features)} columns",
                hint="name the bytea/BLOB column of JPEG images, e.g. USING pcr (image)",
            )
        column = resolve(features[0], available, "image column", source)
        if available[column] != IMAGE:
            raise LoomDataError(
                f"column '{column}' of {source} is not bytea/BLOB: it cannot hold JPEG images",
                hint="store each image's file bytes in a bytea (PostgreSQL) or BLOB (DuckDB)",
            )
        return column
    found = [c for c, kind in available.items() if kind == IMAGE]
    if len(found) != 1:
        raise LoomDataError(
            f"{source} has {len(found)} bytea/BLOB columns; a pcr index reads exactly one",
            hint='name the image column: USING pcr (image), or {"features": ["image"]}',
        )
    return found[0]


def profile_images(
    db: Database,
    source: str,
    label: str,
    features: list[str] | None,
    nulls: str,
    split: Any = None,
) -> SourceProfile:
    """The profile of a source of JPEG images and labels (features: the image column), of
    the rows ``split`` (a ``store.split.Split``) leaves for training where given."""
    rel, every = columns_of(db, source)
    if not isinstance(label, str) or not label:
        raise LoomOptionError(
            "label must name the column to learn",
            hint="pass the label column's name as text, e.g. 'y'",
        )
    available = split.others(every, source, label, features) if split else every
    label = resolve(label, available, "label", source)
    if available[label] not in USABLE:
        raise LoomDataError(
            f"label column '{label}' is {available[label]}, not numeric or boolean",
            hint="store a class id (loomdb load images writes one) or cast it in a SELECT source",
        )
    image = _image_column(source, available, features)
    kinds = {image: IMAGE, label: available[label]}
    rel, held_out = split.narrow(db, rel, every, source) if split else (rel, None)
    null_kind = ("a NULL image or label",) * 2
    rows, with_nulls, where = count_rows(db, source, rel, [image, label], nulls, null_kind)
    prof = SourceProfile(source, rel, label, [image], kinds, rows, 0, {})
    prof.skipped, prof.where, prof.split = with_nulls, where, held_out
    label_sql = number(label, kinds[label], db.type("double"))
    stats = column_stats(db, rel, [label_sql], where)[0]
    if not np.isfinite(stats[:2]).all():
        raise LoomDataError(f"label column '{label}' of {source} holds NaN or infinite values")
    prof.stats = {"label": np.nan_to_num(stats)}
    prof.label_counts = label_counts(db, rel, label_sql, where)
    filtered = f" WHERE {where}" if where else ""
    total, length = builtin("sum", db.dialect), builtin("octet_length", db.dialect)
    size = db.query(f"SELECT {total}({length}({quote_ident(image)})) FROM {rel}{filtered}")[0][0]
    prof.size = int(size or 0)
    return prof


def read_images(db: Database, prof: SourceProfile, seed: int | None, chunk: int):
    """``[(image bytes, label), …]`` chunks of the source, shuffled with ``seed`` (Bismarck:
    once, at layout)."""
    image = prof.features[0]
    label = number(prof.label, prof.kinds[prof.label], db.type("double"))
    return db.read_rows(prof.relation, [quote_ident(image), label], prof.where, seed, chunk)
