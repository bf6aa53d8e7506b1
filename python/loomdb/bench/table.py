"""A benchmark result: a titled table that prints aligned and serialises to JSON.
No paper section."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class BenchTable:
    """Rows of one measurement; every suite returns a list of these."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    digits: dict[str, int] = field(default_factory=dict)  # column → significant digits shown

    def add(self, *values: Any) -> None:
        if len(values) != len(self.columns):
            raise ValueError(f"row has {len(values)} values for {len(self.columns)} columns")
        self.rows.append(list(values))

    def render(self) -> str:
        given = [self.digits.get(c) for c in self.columns]
        cells = [[_fmt(v, d) for v, d in zip(row, given)] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        line = "| " + " | ".join(c.ljust(w) for c, w in zip(self.columns, widths)) + " |"
        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        body = ["| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |" for r in cells]
        notes = [f"- {n}" for n in self.notes]
        return "\n".join(
            [f"### {self.title}", "", line, rule, *body, *([""] + notes if notes else [])]
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(v: Any, digits: int | None = None) -> str:
    if isinstance(v, float):
        if v != v:
            return "n/a"
        if digits is not None and v != 0 and math.isfinite(v):
            decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
            return f"{v:,.{decimals}f}"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}" if abs(v) < 0.01 and v != 0 else f"{v:.2f}"
    return str(v)


def _plain(v: Any) -> Any:
    """JSON has no NaN or infinity: n/a is written as null, an infinity as text."""
    if isinstance(v, float) and not math.isfinite(v):
        return None if v != v else str(v)
    return v


def dumps(tables: list[BenchTable]) -> str:
    out = [t.to_dict() for t in tables]
    for t in out:
        t["rows"] = [[_plain(v) for v in row] for row in t["rows"]]
    return json.dumps(out, indent=2, default=str, allow_nan=False)
