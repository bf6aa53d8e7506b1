"""The UDF catalogue: every SQL function declared once in ``udfs/catalogue.toml``.
No paper section.

``load()`` parses it into :class:`Udf` records; the PostgreSQL install script (``pgsql``) and
the DuckDB registration (``loomdb.engines.duckdb.functions``) are derived from them.  A function
declared with ``returns = "table(name type, …)"`` returns rows: its callable returns a list of
tuples in column order, and each engine makes it usable as ``SELECT * FROM f(…)``.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from loomdb.errors import LoomError
from loomdb.store.db import TYPES

CATALOGUE = Path(__file__).with_name("catalogue.toml")
TABLE = "table"
#: An argument holding a whole row with its column names (a PostgreSQL composite, a DuckDB
#: STRUCT); it is an argument type only, never a column's (see ``loomdb.named_rows``).
ROW = "row"
_TABLE = re.compile(r"table\s*\((.*)\)", re.S | re.I)
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


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
    columns: tuple[Arg, ...] = ()  # a table function's columns (name, type); else empty
    overloads: str | None = None  # a vectorized function this one's row form is also called as

    @property
    def takes_row(self) -> bool:
        """Whether an argument is a whole row (``row``: see :data:`ROW`)."""
        return any(a.type == ROW for a in self.args)

    @property
    def table(self) -> bool:
        """Whether it returns rows (``returns = "table(…)"``) rather than one value."""
        return self.returns == TABLE

    def callable(self) -> Any:
        module, _, attr = self.call.partition(":")
        return getattr(importlib.import_module(module), attr)


def _arg(text: str) -> Arg:
    decl, _, default = text.partition("=")
    try:
        name, typ = decl.split(None, 1)
    except ValueError:
        raise LoomError(f"udfs catalogue: {text!r} is not 'name type'") from None
    typ = typ.strip()
    if typ not in TYPES and typ != ROW:
        raise LoomError(f"udfs catalogue: unknown type {typ!r} in {text!r}")
    return Arg(name, typ, default.strip() or None)


def _returns(fn: dict[str, Any]) -> tuple[str, tuple[Arg, ...]]:
    """``returns`` → (type, ()) or ("table", its columns), checked."""
    text = fn["returns"].strip()
    match = _TABLE.fullmatch(text)
    if match is None:
        if text not in TYPES:
            raise LoomError(f"udfs catalogue: {fn['name']} returns unknown type {text!r}")
        return text, ()
    columns = tuple(_arg(c) for c in match.group(1).split(","))
    names = [c.name for c in columns]
    args = {a.split(None, 1)[0] for a in fn["args"]}
    wrong = [n for n in names if not _IDENTIFIER.fullmatch(n) or n in args or names.count(n) > 1]
    if wrong or any(c.default is not None for c in columns) or fn.get("vectorized"):
        raise LoomError(
            f"udfs catalogue: {fn['name']} returns {text!r}: columns are distinct lowercase "
            "names, none an argument's name (PostgreSQL's rule), with no defaults, and a table "
            f"function is not vectorized (offending: {wrong or names})"
        )
    return TABLE, columns


@cache
def load() -> tuple[Udf, ...]:
    return parse(CATALOGUE.read_text(encoding="utf-8"))


def parse(text: str) -> tuple[Udf, ...]:
    """The :class:`Udf` records a catalogue's TOML text declares."""
    raw = tomllib.loads(text)
    out = []
    for fn in raw["function"]:
        returns, columns = _returns(fn)
        out.append(
            Udf(
                name=fn["name"],
                args=tuple(_arg(a) for a in fn["args"]),
                returns=returns,
                columns=columns,
                volatility=fn["volatility"],
                parallel=fn["parallel"],
                strict=bool(fn.get("strict", False)),
                vectorized=bool(fn.get("vectorized", False)),
                call=fn["call"],
                comment=fn["comment"],
                overloads=fn.get("overloads"),
            )
        )
    _check_overloads(out)
    return tuple(out)


def _check_overloads(udfs: list[Udf]) -> None:
    """An ``overloads`` names a vectorized function of the same arity, and only a row form has
    one: the row is the one argument the two forms tell apart by its type."""
    named = {u.name: u for u in udfs}
    for u in udfs:
        if u.overloads is None:
            continue
        other = named.get(u.overloads)
        if (
            other is None
            or not (u.takes_row and u.vectorized and other.vectorized)
            or other.takes_row
            or len(other.args) != len(u.args)
            or other.returns != u.returns
        ):
            raise LoomError(
                f"udfs catalogue: {u.name} overloads {u.overloads!r}, which must be a vectorized "
                "function taking no row, with as many arguments and the same return type"
            )


def row_forms(udfs: tuple[Udf, ...]) -> dict[str, Udf]:
    """Each function that has a row form too (``overloads``) → that row form."""
    return {u.overloads: u for u in udfs if u.overloads}


def by_name() -> dict[str, Udf]:
    return {u.name: u for u in load()}
