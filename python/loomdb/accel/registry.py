"""The backend registry, shaped like fsspec's: known names → lazily imported classes.
No paper section.

``get(name)`` returns a backend instance or raises a :class:`LoomOptionError` naming the known
backends; ``register(name, cls)`` adds one at run time; packages add theirs through the
entry-point group ``loomdb.backends`` (``name = "package.module:Class"``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from loomdb.errors import LoomOptionError, LoomStateError

GPU_INSTALL = "pip install 'loomdb[gpu]' (CUDA 12) or 'loomdb[gpu-cuda13]' (CUDA 13)"
KNOWN: dict[str, dict[str, str]] = {
    "cpu": {"class": "loomdb.accel.cpu:CpuBackend", "install": ""},
    "gpu": {"class": "loomdb.accel.gpu:GpuBackend", "install": GPU_INSTALL},
    "fpga-sim": {"class": "loomdb.accel.fpga_sim:FpgaSimBackend", "install": ""},
}
ALIASES = {"numpy": "cpu"}
DEFAULT = "cpu"

_registry: dict[str, Any] = {}


def register(name: str, cls: Any, clobber: bool = False) -> None:
    """Make ``cls`` available as backend ``name``."""
    if name in _registry and not clobber and _registry[name] is not cls:
        raise LoomOptionError(f"a backend named '{name}' is already registered")
    _registry[name] = cls


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="loomdb.backends")}


def names() -> list[str]:
    return sorted(set(KNOWN) | set(_registry) | set(_entry_points()))


def _load(name: str) -> Any:
    name = ALIASES.get(name, name)
    if name in _registry:
        return _registry[name]
    if name in KNOWN:
        module, _, attr = KNOWN[name]["class"].partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as e:
            hint = KNOWN[name].get("install") or None
            raise LoomStateError(f"backend '{name}' cannot be loaded: {e}", hint=hint) from e
        _registry[name] = cls
        return cls
    eps = _entry_points()
    if name in eps:
        cls = eps[name].load()
        _registry[name] = cls
        return cls
    raise LoomOptionError(
        f"unknown backend '{name}'",
        hint=f"known backends: {', '.join(names())}; see loom_backends()",
    )


def get(name: str | None = None) -> Any:
    """An instance of backend ``name`` (default ``cpu``) that is usable here."""
    backend = _load(name or DEFAULT)()
    ok, why = backend.available()
    if not ok:
        raise LoomStateError(
            f"backend '{backend.name}' is not usable here: {why}",
            hint="train on another backend (leave 'backend' out for cpu); loom_backends() "
            "lists what can compute here",
        )
    return backend


def describe() -> list[dict[str, Any]]:
    """Every backend with whether it is usable here and, if not, why."""
    out = []
    for name in names():
        try:
            backend = _load(name)()
            ok, why = backend.available()
        except Exception as e:  # a broken third-party backend must not hide the others
            ok, why = False, str(e)
        out.append({"name": name, "available": ok, "reason": why})
    return out


def registered() -> Mapping[str, Any]:
    """A read-only view of the classes loaded so far."""
    return MappingProxyType(_registry)
