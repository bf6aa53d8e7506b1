"""The UDF catalogue: every SQL function declared once in ``udfs/catalogue.toml``.
No paper section.

``load()`` parses it into :class:`Udf` records; the PostgreSQL install script (``pgsql``) and
the DuckDB registration (``loomdb.engines.duckdb.functions``) are derived from them.
"""

from __future__ import annotations

import importlib
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from loomdb.errors import LoomError
from loomdb.store.db import TYPES

CATALOGUE = Path(__file__).with_name("catalogue.toml")


@dataclass(frozen=True)
class Arg:
    name: str
    type: str
    default: str | None = None


@dataclass(frozen=True)
class Udf:
    name: str
    args: tuple[Arg, ...]
    returns: str
    volatility: str
    parallel: str
    strict: bool
    vectorized: bool
    call: str
    comment: str

    def callable(self) -> Any:
        module, _, attr = self.call.partition(":")
        return getattr(importlib.import_module(module), attr)


def _arg(text: str) -> Arg:
    decl, _, default = text.partition("=")
    name, typ = decl.split(None, 1)
    typ = typ.strip()
    if typ not in TYPES:
        raise LoomError(f"udfs catalogue: unknown type {typ!r} in {text!r}")
    return Arg(name, typ, default.strip() or None)


@cache
def load() -> tuple[Udf, ...]:
    with open(CATALOGUE, "rb") as f:
        raw = tomllib.load(f)
    out = []
    for fn in raw["function"]:
        out.append(
            Udf(
                name=fn["name"],
                args=tuple(_arg(a) for a in fn["args"]),
                returns=fn["returns"],
                volatility=fn["volatility"],
                parallel=fn["parallel"],
                strict=bool(fn.get("strict", False)),
                vectorized=bool(fn.get("vectorized", False)),
                call=fn["call"],
                comment=fn["comment"],
            )
        )
    return tuple(out)


def by_name() -> dict[str, Udf]:
    return {u.name: u for u in load()}
