"""Print query results the way psql's aligned format does.  No paper section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    head = " | ".join(c.center(w) for c, w in zip(columns, widths))
    rule = "-+-".join("-" * w for w in widths)
    body = [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    n = len(rows)
    return "\n".join(
        [
            " " + head,
            "-" + rule + "-",
            *(" " + b for b in body),
            f"({n} row{'s' if n != 1 else ''})",
            "",
        ]
    )
