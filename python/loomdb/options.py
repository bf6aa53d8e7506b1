"""Options: every option named, typed and bounded, its check and its message from one object.

Options arrive as JSON text on both engines.  A :class:`Constraint` both checks a value and
describes what it accepts ("an integer from 1 to 32", "'sgd' or 'adam'"), so the message can
never drift from the check (scikit-learn's ``Interval``/``StrOptions`` idea, written small).
Choices may be derived from a registry (a callable), so a new loss or format is accepted
without editing a list here.  :func:`parse_json` refuses what JSON should not hold (NaN,
Infinity, nesting deeper than any option needs); :class:`Options` rejects unknown names with
the closest known one.  No paper section: this is loomdb's own plumbing.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomOptionError

MAX_DEPTH = 8  # no option is nested deeper than this
MAX_TEXT = 1 << 20  # bytes of option text
EXAMPLE = '\'{"model": "logistic", "epochs": 10}\''  # options, as the hints show them


class Constraint:
    """What a value may be: ``check`` says whether it is, ``describe`` says it in words."""

    def check(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _number(value: Any, integer: bool) -> bool:
    if isinstance(value, bool):
        return False
    if integer:
        return isinstance(value, int)
    return isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class Interval(Constraint):
    """A finite number (``integer`` for whole numbers) between ``low`` and ``high``."""

    integer: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def check(self, value: Any) -> bool:
        if not _number(value, self.integer):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        low = None if self.low is None else _fmt(self.low)
        high = None if self.high is None else _fmt(self.high)
        if low is not None and high is not None and not self.low_open:
            return f"{kind} from {low} to {high}"
        parts = []
        if low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {low}")
        if high is not None:
            parts.append(f"<= {high}")
        return f"{kind} {' and '.join(parts)}" if parts else kind


def _fmt(x: float) -> str:
    return f"{int(x):,}".replace(",", "") if float(x).is_integer() else f"{x:g}"


class Choices(Constraint):
    """One of some strings; ``values`` may be a callable (choices derived from a registry)."""

    def __init__(self, values: Iterable[str] | Callable[[], Iterable[str]]):
        self._values = values

    @property
    def values(self) -> list[str]:
        values = self._values() if callable(self._values) else self._values
        return list(values)

    def check(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        quoted = [f"'{v}'" for v in self.values]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


@dataclass(frozen=True)
class Boolean(Constraint):
    def check(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Names(Constraint):
    """A non-empty list of distinct names (of columns, unless ``what`` says otherwise)."""

    what: str = "column names"

    def check(self, value: Any) -> bool:
        return (
            isinstance(value, list)
            and bool(value)
            and all(isinstance(x, str) and x for x in value)
            and len(set(value)) == len(value)
        )

    def describe(self) -> str:
        return f"a non-empty list of distinct {self.what}"


@dataclass(frozen=True)
class Text(Constraint):
    def check(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value)

    def describe(self) -> str:
        return "a non-empty string"


@dataclass(frozen=True)
class WeightMap(Constraint):
    """An object mapping labels to finite weights >= 0."""

    def check(self, value: Any) -> bool:
        weight = Interval(False, 0)
        return isinstance(value, dict) and all(weight.check(w) for w in value.values())

    def describe(self) -> str:
        return "an object mapping labels to numbers >= 0"


class AnyOf(Constraint):
    def __init__(self, *options: Constraint):
        self.options = options

    def check(self, value: Any) -> bool:
        return any(c.check(value) for c in self.options)

    def describe(self) -> str:
        return ", or ".join(c.describe() for c in self.options)


@dataclass(frozen=True)
class Option:
    """One accepted option: its name, what it may be, its default (None: decided later)."""

    name: str
    constraint: Constraint
    default: Any = None
    doc: str = ""

    def validate(self, value: Any) -> Any:
        if value is None:
            return self.default
        plain_int = isinstance(value, int) and not isinstance(value, bool)
        if plain_int and isinstance(self.constraint, Interval) and not self.constraint.integer:
            value = float(value)  # JSON has one number type: 1 is a fine value for 'lr'
        if not self.constraint.check(value):
            raise LoomOptionError(
                f"the '{self.name}' option must be {self.constraint.describe()}; "
                f"got {_show(value)} instead",
                hint=self.doc or None,
            )
        return value


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Options:
    """A table of :class:`Option`; ``parse`` validates a dict, filling in defaults."""

    def __init__(self, what: str, *options: Option):
        self.what = what
        self.by_name = {o.name: o for o in options}

    def __iter__(self):
        return iter(self.by_name.values())

    def __add__(self, other: Options) -> Options:
        return Options(self.what, *self, *other)

    def names(self) -> list[str]:
        return list(self.by_name)

    def parse(self, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = [k for k in given if k not in self.by_name]
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, list(self.by_name), n=1)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else f"known: {', '.join(sorted(self.by_name))}"
            )
            raise LoomOptionError(f"unknown {self.what} option '{name}'", hint=hint)
        return {name: opt.validate(given.get(name)) for name, opt in self.by_name.items()}


def _refuse_constant(name: str) -> Any:
    raise LoomOptionError(
        f"options may not hold {name}",
        hint="write finite numbers only: JSON has no NaN or Infinity",
    )


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise LoomOptionError(
            f"the number {text[:30]} is too large for a double",
            hint="write finite numbers only, up to about 1.8e308",
        )
    return value


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max([_depth(v, level + 1) for v in value.values()], default=level)
    if isinstance(value, list):
        return max([_depth(v, level + 1) for v in value], default=level)
    return level


# a numeric constant as SQL writes it, sign included (PostgreSQL's reloptions keep a decimal's
# text as written: ``.5``, ``5.``, ``1e-3``, ``-.5``), which JSON does not read in every form
_SQL_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def sql_number(text: str) -> int | float | None:
    """The number ``text`` writes as a SQL numeric constant (an int without a point or an
    exponent), or None when it is not one."""
    if not _SQL_NUMBER.fullmatch(text):
        return None
    plain = text.lstrip("+-").isdigit()
    return int(text) if plain else float(text)


def with_value(text: str) -> Any:
    """A ``WITH (name = value)`` value's text as an index's options read it: a number as SQL
    writes one (``64``, ``.5``, ``5.``, ``1e-3``, ``-2``), else as JSON (``true``, ``null``,
    ``{"a": …}``), else the text itself.  psql's access methods read every reloption so, and
    the SQL front-end reads a string or a bare word so, so one statement means the same on
    both engines."""
    number = sql_number(text)
    if number is not None:
        return number
    try:
        return json.loads(text, parse_constant=lambda c: text)
    except ValueError:
        return text


def parse_json(text: str | dict | None, what: str = "options") -> dict[str, Any]:
    """Options as a dict: JSON object text (NULL or empty for none)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    if isinstance(text, dict):
        return dict(text)
    if not isinstance(text, str):
        raise LoomOptionError(
            f"{what} must be JSON text; got {type(text).__name__}",
            hint=f"write options as JSON text, e.g. {EXAMPLE}",
        )
    if len(text) > MAX_TEXT:
        raise LoomOptionError(
            f"{what} of {len(text):,} characters are too long (at most {MAX_TEXT:,})",
            hint="options are a few names and values: pass only those you change",
        )
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise LoomOptionError(
            f"{what} must be a JSON object; could not parse {_show(text)}: {e.msg}",
            hint=f"write options as JSON text, e.g. {EXAMPLE}",
        ) from None
    except RecursionError:
        value = None
        depth = MAX_DEPTH + 1
    else:
        depth = _depth(value)
    if depth > MAX_DEPTH:
        raise LoomOptionError(
            f"{what} are nested more than {MAX_DEPTH} levels deep",
            hint="options are a flat JSON object; only a few take a list or an object",
        )
    if not isinstance(value, dict):
        raise LoomOptionError(
            f"{what} must be a JSON object; got {_show(text)} instead",
            hint=f"options are a JSON object of names and values, e.g. {EXAMPLE}; not an array, "
            "a string or a number",
        )
    return value
