"""Storage formats, found by name: dense, toc, mlweaving, pcr, and third parties' (entry points).

No paper section; the registry is shaped like the backends' (fsspec's ``registry.py``):
:data:`KNOWN` maps a name to a lazily imported class, :func:`register` adds one at run time,
the entry-point group ``loomdb.formats`` adds installed ones, and :func:`get` names the known
formats when asked for another.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from loomdb.errors import LoomOptionError

KNOWN = {
    "dense": "loomdb.store.formats.dense:DenseFormat",
    "toc": "loomdb.store.formats.toc:TocFormat",
    "mlweaving": "loomdb.store.formats.weave:WeaveFormat",
    "pcr": "loomdb.store.formats.pcr:PcrFormat",
}
ALIASES = {"weave": "mlweaving"}
DEFAULT = "dense"

_registry: dict[str, Any] = {}


def register(name: str, cls: Any, clobber: bool = False) -> None:
    """Make ``cls`` available as storage format ``name``."""
    if name in _registry and not clobber and _registry[name] is not cls:
        raise LoomOptionError(f"a storage format named '{name}' is already registered")
    _registry[name] = cls


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="loomdb.formats")}


def names() -> list[str]:
    return sorted(set(KNOWN) | set(_registry) | set(_entry_points()))


def _load(name: str) -> Any:
    if name in _registry:
        return _registry[name]
    if name in KNOWN:
        module, _, attr = KNOWN[name].partition(":")
        cls = getattr(importlib.import_module(module), attr)
    elif name in _entry_points():
        cls = _entry_points()[name].load()
    else:
        raise LoomOptionError(
            f"unknown storage format '{name}'", hint=f"formats: {', '.join(names())}"
        )
    _registry[name] = cls
    return cls


def get(name: str | None = None) -> Any:
    """An instance of storage format ``name`` (default ``dense``)."""
    key = name or DEFAULT
    return _load(ALIASES.get(key, key))()
