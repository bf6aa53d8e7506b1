"""A folder of JPEG photos, one sub-folder per class, into a table of images and labels.

No paper section (PCR's datasets are folders of JPEGs: "the training dataset stored in JPEG
format").  ``FOLDER/<class>/…/<file>`` becomes a row ``(file, class_name, label, image)``:
the path under FOLDER, the sub-folder's name, its class id — the position of the name among
the classes, sorted (or as listed in the ``classes`` option, so two folders loaded apart get
the same ids) — and the file's bytes, unchanged.  The label is a number because loomdb's
classifiers learn numeric labels; ``class_name`` keeps the name.

A file is kept only if it is a JPEG that decodes completely (``imaging.pixels``) and that a
pcr index can lay out: jpegtran transcodes it without a warning (``imaging.transcode``; Pillow
decodes some corrupt data without a word, jpegtran does not).  A GIF, a truncated or corrupt
JPEG, anything else, a file directly in FOLDER or in a sub-folder not listed in ``classes`` is
skipped and counted (the summary names the first few and why), never kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loomdb.codecs import jpeg_scans
from loomdb.codecs.jpeg_scans import MAX_BYTES
from loomdb.errors import (
    LoomDataError,
    LoomError,
    LoomNotFoundError,
    LoomOptionError,
    LoomStateError,
)
from loomdb.imaging import pixels, pool, transcode
from loomdb.options import Names, Option, Options, Text

NAMED_SKIPS = 20  # skipped files named in the summary
CHUNK = 64  # files checked at a time (in parallel)


def image_columns(options: dict[str, Any]) -> list[tuple[str, str]]:
    """The table every image loader makes (its four column names distinct, on either engine:
    DuckDB folds case even in quoted names, so names differing only in case are refused)."""
    columns = [
        ("file", "text"),
        ("class_name", "text"),
        (options["label"], "integer"),
        (options["image"], "bytes"),
    ]
    seen: dict[str, str] = {}
    for name, _ in columns:
        other = seen.get(name.casefold())
        if other is not None:
            also = "" if other == name else f" ({other!r} and {name!r}: one name to DuckDB)"
            raise LoomOptionError(
                f"the loaded table would have two columns named {name!r}{also}",
                hint="give 'label' and 'image' names other than each other, 'file' and "
                "'class_name'",
            )
        seen[name.casefold()] = name
    return columns


IMAGE_OPTIONS = (
    Option("image", Text(), "image", "the image column's name"),
    Option("label", Text(), "label", "the class id column's name"),
)


def _readable(path: Path) -> tuple[bytes | None, str]:
    """The file's bytes when it is a complete JPEG, else None and why."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return None, f"larger than {MAX_BYTES:,} bytes"
        data = path.read_bytes()
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    try:
        pixels.check_readable(data)
        jpeg_scans.split(transcode.progressive(data))  # what a pcr index lays out
    except LoomStateError:  # no Pillow or jpegtran here: no file is the reason
        raise
    except LoomError as e:
        return None, e.message
    return data, ""


class ImagesLoader:
    name = "images"
    options = Options(
        "images",
        *IMAGE_OPTIONS,
        Option(
            "classes",
            Names("class names"),
            None,
            "class names in label order (default: sub-folders)",
        ),
    )
    reads_files = True
    skipped = 0
    report: dict[str, Any] = {}

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        return image_columns(options)

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        folder = Path(path)
        if not folder.is_dir():
            raise LoomNotFoundError(
                f"{path} is not a folder", hint="give FOLDER with one sub-folder per class"
            )
        classes = options["classes"] or sorted(
            d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".")
        )
        if not classes:
            raise LoomDataError(
                f"{path} has no sub-folders: an image's class is its sub-folder's name",
                hint="arrange the files as FOLDER/<class>/<file>.jpg",
            )
        ids = {name: i for i, name in enumerate(classes)}
        self.skipped = 0
        skips: dict[str, str] = {}
        self.report = {"classes": ids, "skipped_files": skips}
        batch: list[tuple[Path, str]] = []
        for file in sorted(p for p in folder.rglob("*") if not p.is_dir()):
            parts = file.relative_to(folder).parts
            name = parts[0] if len(parts) > 1 else ""
            if name not in ids:
                self._skip(skips, folder, file, "not in a class sub-folder")
                continue
            if not file.is_file():  # never read: a pipe would block, a broken link fails
                self._skip(skips, folder, file, "not a regular file (a broken link, a pipe…)")
                continue
            batch.append((file, name))
            if len(batch) >= CHUNK:
                yield from self._checked(batch, folder, ids, skips)
                batch = []
        yield from self._checked(batch, folder, ids, skips)

    def _checked(self, batch, folder: Path, ids: dict[str, int], skips: dict) -> Iterator[tuple]:
        for (file, name), (data, why) in zip(batch, pool.map_all(_readable, [f for f, _ in batch])):
            if data is None:
                self._skip(skips, folder, file, why)
                continue
            yield str(file.relative_to(folder)), name, ids[name], data

    def _skip(self, skips: dict, folder: Path, file: Path, why: str) -> None:
        self.skipped += 1
        if len(skips) < NAMED_SKIPS:
            skips[os.fspath(file.relative_to(folder))] = why
