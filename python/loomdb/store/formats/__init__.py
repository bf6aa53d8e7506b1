"""Storage formats: how a profiled source becomes stored minibatch rows and is read back.

A format is found by name (``get``); the user-facing names are those of ``FORMATS``.
"""

from __future__ import annotations

import importlib
from typing import Any

from loomdb.errors import LoomOptionError

FORMATS = {
    "dense": "loomdb.store.formats.dense:DenseFormat",
    "toc": "loomdb.store.formats.toc:TocFormat",
    "mlweaving": "loomdb.store.formats.weave:WeaveFormat",
}
ALIASES: dict[str, str] = {"weave": "mlweaving"}


def names() -> list[str]:
    return sorted(FORMATS)


def get(name: str) -> Any:
    key = ALIASES.get(name, name)
    if key not in FORMATS:
        raise LoomOptionError(
            f"unknown storage format '{name}'", hint=f"formats: {', '.join(names())}"
        )
    module, _, attr = FORMATS[key].partition(":")
    return getattr(importlib.import_module(module), attr)()
