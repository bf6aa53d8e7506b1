"""Declarative option validation: every option named, typed and bounded, checked once.

Options arrive as JSON text on both engines.  A table of :class:`Option` says what each one may
be; :func:`parse` rejects unknown names (suggesting the closest), wrong types and out-of-range
values with messages in the style "the 'x' option must be … got … instead".
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomOptionError


@dataclass(frozen=True)
class Option:
    """One accepted option: its name, accepted JSON types, default and an extra check."""

    name: str
    types: tuple[type, ...]
    default: Any = None
    check: Callable[[Any], bool] | None = None
    expect: str = ""
    doc: str = ""

    def validate(self, value: Any) -> Any:
        if value is None:
            return self.default
        is_bool = isinstance(value, bool)
        if float in self.types and isinstance(value, int) and not is_bool:
            value = float(value)  # JSON has one number type: 1 is a fine value for 'lr'
        ok_type = isinstance(value, self.types) and not (is_bool and bool not in self.types)
        if not ok_type or (self.check is not None and not self.check(value)):
            want = self.expect or " or ".join(t.__name__ for t in self.types)
            raise LoomOptionError(
                f"the '{self.name}' option must be {want}; got {json.dumps(value)} instead",
                hint=self.doc or None,
            )
        return value


def one_of(*choices: str) -> Callable[[Any], bool]:
    return lambda v: v in choices


def in_range(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[Any], bool]:
    return lambda v: (lo < v if lo_open else lo <= v) and v <= hi


def parse_json(text: str | dict | None, what: str = "options") -> dict[str, Any]:
    """Options as a dict: JSON text (or NULL / empty for none)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    if isinstance(text, dict):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise LoomOptionError(
            f"{what} must be a JSON object; could not parse {text!r}: {e.msg}",
            hint='write options as JSON text, e.g. \'{"model": "logistic", "epochs": 10}\'',
        ) from None
    if not isinstance(value, dict):
        raise LoomOptionError(f"{what} must be a JSON object; got {text!r} instead")
    return value


def validate(given: dict[str, Any], table: Iterable[Option], what: str = "option") -> dict:
    """Check ``given`` against ``table``; returns every option with defaults filled in."""
    by_name = {o.name: o for o in table}
    unknown = [k for k in given if k not in by_name]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, list(by_name), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(sorted(by_name))}"
        raise LoomOptionError(f"unknown {what} '{name}'", hint=hint)
    return {name: opt.validate(given.get(name)) for name, opt in by_name.items()}
