"""Rows that carry their column names: what ``loom_predict_row`` scores.

No paper section.  A :class:`NamedRows` is ``n`` rows of named columns, each column a float64
array with a mask of where it holds a number (``None`` for a column that is not numeric, e.g.
text ids).  Engines build it from a DuckDB STRUCT vector (:meth:`from_columns`) or from
PostgreSQL's ``to_jsonb(row)`` text (:meth:`from_json`); a model binds its features to it by
name (:meth:`matrix`), so the columns' order in the row does not matter and columns the model
does not use (the label, ids) are ignored.  A missing feature column, a non-numeric one or a
NULL in one is an error that names the column: a row form never guesses.  Text columns keep
their values (``texts``) for a model that one-hot encodes them (:meth:`cells`,
``store/encoding.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.errors import LoomDataError

#: What ``to_jsonb`` writes for the doubles JSON has no number for.
_SPECIAL = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}


@dataclass(frozen=True)
class NamedRows:
    n: int
    values: dict[str, np.ndarray | None]  # column → float64 values (None: not numeric)
    present: dict[str, np.ndarray]  # column → bool, where the row holds a value
    texts: dict[str, np.ndarray] = field(default_factory=dict)  # text column → str | None cells

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows: Any) -> NamedRows:
        kept = np.arange(self.n)[rows]
        return NamedRows(
            len(kept),
            {c: None if v is None else v[kept] for c, v in self.values.items()},
            {c: p[kept] for c, p in self.present.items()},
            {c: t[kept] for c, t in self.texts.items()},
        )

    @classmethod
    def from_columns(
        cls,
        n: int,
        columns: Mapping[str, tuple[np.ndarray | None, np.ndarray]],
        texts: Mapping[str, np.ndarray] | None = None,
    ) -> NamedRows:
        """Columns already split out (an engine's vectors): name → (float64 values or None,
        present mask); ``texts``: text columns' cells (object arrays, None for NULL)."""
        return cls(
            n,
            {c: v for c, (v, _) in columns.items()},
            {c: p for c, (_, p) in columns.items()},
            dict(texts or {}),
        )

    @classmethod
    def from_json(cls, rows: Sequence[str | Mapping[str, Any]]) -> NamedRows:
        """Rows as JSON objects (text or parsed), e.g. PostgreSQL's ``to_jsonb(row)``; text
        that is not JSON is a LoomDataError saying where it stops being JSON."""
        try:
            parsed = [_parsed(r) if isinstance(r, str) else r for r in rows]
        except json.JSONDecodeError as e:
            raise LoomDataError(
                f"a row's text is not JSON: {e.msg} "
                f"{'at its end' if e.pos >= len(e.doc) else f'at character {e.pos + 1}'}: "
                f"{_shown(e.doc)}",
                hint='pass a JSON object of the row\'s columns, e.g. \'{"a": 1.0, "b": 2.0}\', '
                "or the row itself: loom_predict_row('m', t) FROM t",
            ) from None
        except RecursionError:
            raise LoomDataError(
                "a row's JSON text nests too deeply to read",
                hint="pass a flat JSON object of the row's columns, e.g. '{\"a\": 1.0}'",
            ) from None
        if not all(isinstance(r, Mapping) for r in parsed):
            raise LoomDataError(
                "a row must be a record with named columns",
                hint="pass the table's row (loom_predict_row('m', t) FROM t) or ROW(...) cast "
                "to a composite type",
            )
        names: dict[str, None] = {}
        for r in parsed:
            names.update(dict.fromkeys(r))
        n = len(parsed)
        values: dict[str, np.ndarray | None] = {}
        present: dict[str, np.ndarray] = {}
        texts: dict[str, np.ndarray] = {}
        for c in names:
            cells = [r.get(c) for r in parsed]
            present[c] = np.array([v is not None for v in cells], dtype=bool)
            values[c] = _numbers(cells)
            if values[c] is None and all(v is None or isinstance(v, str) for v in cells):
                texts[c] = np.array(cells, dtype=object)
        return cls(n, values, present, texts)

    def column(self, feature: str) -> str:
        """The row's column for ``feature``: the same name, or the one that differs in case."""
        if feature in self.values:
            return feature
        folded = [c for c in self.values if c.lower() == feature.lower()]
        if len(folded) == 1:
            return folded[0]
        shown = ", ".join(list(self.values)[:20]) or "none"
        raise LoomDataError(
            f"the row has no column '{feature}', a feature of the model",
            hint=f"the row's columns: {shown}; pass rows holding every feature column by name",
        )

    def cells(self, feature: str) -> list[Any]:
        """Column ``feature``'s cells (bound by name): str for text, float, None for NULL."""
        c = self.column(feature)
        if c in self.texts:
            return list(self.texts[c])
        v = self.values[c]
        if v is None:
            raise LoomDataError(
                f"the row's column '{c}' is neither a number nor text",
                hint="cast it to a number or to text in a SELECT",
            )
        return [float(x) if p else None for x, p in zip(v, self.present[c])]

    def matrix(self, features: Sequence[str]) -> np.ndarray:
        """The ``(n, len(features))`` float64 matrix of ``features``, bound by name."""
        X = np.zeros((self.n, len(features)))
        for j, feature in enumerate(features):
            c = self.column(feature)
            v = self.values[c]
            if v is None:
                raise LoomDataError(
                    f"the row's column '{c}' is not a number, but the model uses it as a feature",
                    hint="cast it to a number in a SELECT, or pass a row whose column is numeric",
                )
            if not self.present[c].all():
                raise LoomDataError(
                    f"the row's feature column '{c}' is NULL",
                    hint="filter rows with a NULL feature out (WHERE col IS NOT NULL) or fill "
                    "them in; the array form loom_predict gives NULL for them instead",
                )
            X[:, j] = v
        return X


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short when long."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _parsed(text: str) -> Any:
    """A row's JSON text: integers as doubles (one past a double's range is ±∞), and an object
    naming a column twice refused (which one would be the feature's is a guess)."""
    return json.loads(text, parse_int=float, object_pairs_hook=_unique)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise LoomDataError(
                f"a row's JSON names column {key!r} twice",
                hint="give each column once: a row holds one value per column",
            )
        out[key] = value
    return out


def _double(v: int) -> float:
    """An integer as a double: ±∞ past a double's range (a PostgreSQL numeric may be)."""
    try:
        return float(v)
    except OverflowError:
        return math.copysign(math.inf, v)


def _numbers(cells: list[Any]) -> np.ndarray | None:
    """A column's cells as float64 (NULL as 0, masked apart); None when one is not a number."""
    out = np.zeros(len(cells))
    for i, v in enumerate(cells):
        if v is None:
            continue
        if isinstance(v, str) and v in _SPECIAL:
            out[i] = _SPECIAL[v]
        elif isinstance(v, bool | float):
            out[i] = float(v)
        elif isinstance(v, int):
            out[i] = _double(v)
        else:
            return None
    return out
