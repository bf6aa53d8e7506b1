"""How a source column becomes numeric features: one-hot categories, hashed buckets, an
imputed value.

No paper section (BigQuery ML's TRANSFORM and PostgresML's preprocess are the models).  An
:class:`Encoded` column is recorded with the index (``stats["encoding"]``) and the model
(``options["encoding"]``) and replayed two ways that agree row for row:

- as SQL (:meth:`Encoded.sql`), one numeric expression per feature over the source column:
  ``CASE WHEN CAST("c" AS TEXT) = 'v' THEN 1.0 ELSE 0.0 END`` with every value a quoted
  literal, ``COALESCE(CAST("x" AS FLOAT8), 41.5)`` for an imputed number, ``CASE WHEN
  <bucket of "c"> = 3 THEN 1.0 ELSE 0.0 END`` for a hashed one;
- in Python (:meth:`Encoded.apply`), over a row's named values (``loom_predict_row``).

Two more forms, each equal to the first, cost a text column one CASE a row instead of k
expressions:

- a layout and ``loom_evaluate`` read one value a row per column (:meth:`Encoded.code_sql`: a
  text column's feature that is 1.0, by its place, −1 for none) that :func:`expand` turns into
  the features in numpy — each of k expressions is an array element PostgreSQL serialises
  (100,000 rows, 64 one-hot features: the read 1.96 → 0.37 s);
- ``loom_predict_sql`` / ``loom_deploy`` compile a text column's share of a margin, Σ wᵢ·featureᵢ,
  as the weight of the feature that is 1.0 (:meth:`Encoded.weighted_sql`; 1M rows, 64
  one-hot features, the deployed function in PostgreSQL 3.3–3.6 → 0.7 s).

A category appears once in an encoding: a record listing one twice is refused (the forms
would disagree on its rows).

A text column's features are one indicator per kept category (``c=v``) and, when some
training values were cut by ``top_k``, one ``c=<other>`` for every other non-NULL value.  A
NULL text matches no category: all its indicators are 0, ``<other>`` included; an unseen
category at predict time counts as ``<other>`` (all 0 when the column has no ``<other>``).

A hashed text column (``"encode": "hash"``, ``buckets`` n) has n features ``c#0`` … ``c#{n-1}``
and no categories: a value's bucket is the first 7 hex digits of the MD5 of its UTF-8 text,
read as an integer (0 … 2^28-1), modulo n; its feature is 1.0, the others 0.0.  Every value,
seen in training or not, lands in some bucket; a NULL lands in none (all 0).  Both engines'
``md5(text)`` give the same hex as Python's ``hashlib`` (PostgreSQL hashes the text in the
database's encoding: UTF8, or non-ASCII values land elsewhere than in Python and DuckDB); only
reading hex as an integer is spelled per dialect (:data:`HEX_INTEGER`), and each spelling is
immutable, so a deployed PostgreSQL function stays ``IMMUTABLE``.  Wherever a source is read
(the layout, its statistics, an index's fingerprint, evaluation), each hashed column's bucket is
computed once per row (:func:`with_buckets`) and its features read or compare that: PostgreSQL
computes each expression of a row on its own, and n features each hashing the text took n MD5s
a row (100,000 rows, 64 buckets: 31.9 s to train, 3.9 s with the bucket computed once).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from loomdb.errors import LoomDataError, LoomFormatError
from loomdb.store.names import builtin, literal, quote_ident

OTHER = "<other>"
HEX_DIGITS = 7  # of the MD5, read as an integer: 28 bits, positive in a 32-bit integer
# How each dialect reads {hex} (a text of HEX_DIGITS hex digits) as an integer.
HEX_INTEGER = {
    "postgres": f"CAST(CAST('x' || {{hex}} AS bit({4 * HEX_DIGITS})) AS integer)",
    "duckdb": "CAST('0x' || {hex} AS INTEGER)",
}


def bucket(value: str, buckets: int) -> int:
    """The bucket of a text value, as :func:`bucket_sql` computes it in SQL."""
    return int(hashlib.md5(value.encode("utf-8")).hexdigest()[:HEX_DIGITS], 16) % buckets


def bucket_sql(text: str, buckets: int, dialect: str) -> str:
    """SQL for the bucket of the text expression ``text`` (NULL for NULL); on PostgreSQL
    pg_catalog's ``substr`` and ``md5``, never a role's of the same (exact) arguments on the
    search path ahead of pg_catalog."""
    substr, md5 = builtin("substr", dialect), builtin("md5", dialect)
    digits = f"{substr}({md5}({text}), 1, {HEX_DIGITS})"
    return f"({HEX_INTEGER[dialect].format(hex=digits)} % {int(buckets)})"


def text_literal(value: str) -> str:
    """``value`` as a string literal valid in both engines (:func:`names.literal`)."""
    return literal(str(value))


def number_literal(x: float) -> str:
    text = f"{float(x):.17e}"
    return f"({text})" if text.startswith("-") else text


@dataclass(frozen=True)
class Encoded:
    """One source column and how it becomes features (``kind``: numeric | boolean | text;
    ``buckets``: a text column hashed to that many buckets, 0 for one-hot)."""

    column: str
    kind: str
    categories: tuple[str, ...] = field(default=())
    other: bool = False
    impute: float | None = None
    buckets: int = 0
    # the training rows of each category (empty where not recorded): the CASEs test the most
    # frequent first.  Not part of what the encoding is (two equal encodings may differ here).
    counts: tuple[int, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if len(set(self.categories)) < len(self.categories):
            twice = next(v for v in self.categories if self.categories.count(v) > 1)
            raise LoomFormatError(
                f"the encoding of column '{self.column}' lists the category {twice!r} twice",
                hint="retrain the model or rebuild the index: preprocess keeps a category once",
            )
        if self.counts and len(self.counts) != len(self.categories):
            raise LoomFormatError(
                f"the encoding of column '{self.column}' counts {len(self.counts)} categories "
                f"of its {len(self.categories)}",
                hint="retrain the model or rebuild the index: preprocess counts every category",
            )

    @property
    def text(self) -> bool:
        return self.kind == "text"

    @property
    def hashed(self) -> bool:
        return self.buckets > 0

    def names(self) -> list[str]:
        """The features' names: the column itself, one ``column=value`` per category, or one
        ``column#j`` per bucket."""
        if not self.text:
            return [self.column]
        if self.hashed:
            return [f"{self.column}#{j}" for j in range(self.buckets)]
        return [f"{self.column}={v}" for v in self.categories] + (
            [f"{self.column}={OTHER}"] if self.other else []
        )

    def bucket(self, dialect: str) -> str:
        """SQL for a hashed column's bucket of its value (NULL for NULL)."""
        return bucket_sql(f"CAST({quote_ident(self.column)} AS TEXT)", self.buckets, dialect)

    def sql(self, double: str, dialect: str, bucket: str | None = None) -> list[str]:
        """One SQL expression per feature, a ``double`` each, for ``dialect`` (a hashed
        column's features compare ``bucket``, where given: a column holding its bucket)."""
        col = quote_ident(self.column)
        if self.text:
            value = f"CAST({col} AS TEXT)"
            if self.hashed:
                at = bucket or self.bucket(dialect)
                return [
                    f"CAST((CASE WHEN {at} = {j} THEN 1.0 ELSE 0.0 END) AS {double})"
                    for j in range(self.buckets)
                ]
            exprs = [
                f"(CASE WHEN {value} = {text_literal(v)} THEN 1.0 ELSE 0.0 END)"
                for v in self.categories
            ]
            if self.other:  # no categories: every value is another (``NOT IN (NULL)`` is NULL)
                kept = ", ".join(text_literal(v) for v in self.categories)
                outside = f" AND {value} NOT IN ({kept})" if kept else ""
                exprs.append(f"(CASE WHEN {value} IS NOT NULL{outside} THEN 1.0 ELSE 0.0 END)")
            return [f"CAST({e} AS {double})" for e in exprs]
        inner = f"CAST({col} AS INTEGER)" if self.kind == "boolean" else col
        number = f"CAST({inner} AS {double})"
        if self.impute is None:
            return [number]
        return [f"COALESCE({number}, CAST({number_literal(self.impute)} AS {double}))"]

    def code_sql(self, double: str, dialect: str, bucket: str | None = None) -> str:
        """One SQL expression a row from which :func:`expand` makes this column's features: a
        text column's feature that is 1.0, as its place among them (−1: none); a number's one
        feature itself."""
        if not self.text:
            return self.sql(double, dialect)[0]
        if self.hashed:
            return f"CAST(COALESCE({bucket or self.bucket(dialect)}, -1) AS {double})"
        places = [(self.categories[j], str(j)) for j in self._frequent_first()]
        rest = str(len(self.categories)) if self.other else "-1"  # a value no category matches
        return f"CAST({text_switch(self.column, places, rest, '-1')} AS {double})"

    def weighted_sql(self, weights: Sequence[float], double: str, dialect: str) -> str | None:
        """A text column's Σ wᵢ·featureᵢ as one ``double`` CASE whose value is the weight of
        the feature that is 1.0 (a hashed column's bucket computed once); None where every
        weight is 0.  What prediction compiles: one CASE a row instead of k indicator terms,
        the same sum but for the sign of a zero (the k − 1 terms it leaves out are ±0)."""
        if not any(weights):
            return None
        zero = f"CAST(0.0 AS {double})"
        typed = [f"CAST({number_literal(w)} AS {double})" for w in weights]
        if self.hashed:
            whens = "".join(
                f"WHEN {j} THEN {t} " for j, (w, t) in enumerate(zip(weights, typed)) if w
            )
            return f"(CASE {self.bucket(dialect)} {whens}ELSE {zero} END)"
        rest = self.other and weights[-1] != 0  # then a category of weight 0 must match too
        pairs = [
            (self.categories[j], typed[j]) for j in self._frequent_first() if weights[j] or rest
        ]
        return text_switch(self.column, pairs, typed[-1] if rest else zero, zero)

    def _frequent_first(self) -> list[int]:
        """The categories' places, the most frequent in training first (ties, and an encoding
        without counts, in their order): a CASE tests its WHENs in turn, so on skewed data
        most rows stop at the first few (PostgreSQL, 1M rows of a Zipf-distributed column of
        100 values, 64 kept: 1.20 → 0.56 s; DuckDB 0.10 → 0.06 s).  The value is the same in
        any order: a value matches one category at most."""
        places = range(len(self.categories))
        if not self.counts:
            return list(places)
        return sorted(places, key=lambda j: -self.counts[j])

    def apply(self, values: Sequence[Any]) -> np.ndarray:
        """``(n, len(names()))`` features of one column's values (None for NULL)."""
        n = len(values)
        if self.text:
            out = np.zeros((n, len(self.names())))
            where = {v: j for j, v in enumerate(self.categories)}
            for i, v in enumerate(values):
                if v is None:
                    continue
                text = v if isinstance(v, str) else _as_text(v, self.column)
                if self.hashed:
                    out[i, bucket(text, self.buckets)] = 1.0
                    continue
                j = where.get(text)
                if j is not None:
                    out[i, j] = 1.0
                elif self.other:
                    out[i, -1] = 1.0
            return out
        out = np.empty((n, 1))
        for i, v in enumerate(values):
            if v is None:
                if self.impute is None:
                    raise LoomDataError(
                        f"the row's feature column '{self.column}' is NULL",
                        hint="filter rows with a NULL feature out (WHERE col IS NOT NULL), fill "
                        'them in, or train with {"preprocess": {"'
                        + self.column
                        + '": {"impute": "mean"}}}',
                    )
                out[i, 0] = self.impute
            elif isinstance(v, str):
                raise LoomDataError(
                    f"the row's column '{self.column}' is text, but the model uses it as a number",
                    hint="cast it to a number in a SELECT, or pass a row whose column is numeric",
                )
            else:
                out[i, 0] = float(v)
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"column": self.column, "kind": self.kind}
        if self.hashed:
            out.update(encode="hash", buckets=self.buckets)
        elif self.text:
            out.update(categories=list(self.categories), other=self.other)
            if self.counts:
                out["counts"] = list(self.counts)
        if self.impute is not None:
            out["impute"] = self.impute
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Encoded:
        return cls(
            str(d["column"]),
            str(d["kind"]),
            tuple(str(v) for v in d.get("categories", ())),
            bool(d.get("other", False)),
            None if d.get("impute") is None else float(d["impute"]),
            int(d["buckets"]) if d.get("encode") == "hash" else 0,  # none stored: one-hot
            tuple(int(c) for c in d.get("counts", ())),  # none stored: in their order
        )


def _as_text(value: Any, column: str) -> str:
    if isinstance(value, bool | int | float):
        raise LoomDataError(
            f"the row's column '{column}' is a number, but the model encodes it as text",
            hint="pass the column as text, as it was in the training source",
        )
    return str(value)


def text_switch(column: str, results: Sequence[tuple[str, str]], other: str, null: str) -> str:
    """A CASE on ``column``'s text: the result paired with a value where it is that value,
    ``null`` where it is NULL, ``other`` for any other value (no NULL test where the two are
    the same).  A simple CASE: the text is computed once, not once per value."""
    value = f"CAST({quote_ident(column)} AS TEXT)"
    rest = other if other == null else f"CASE WHEN {value} IS NULL THEN {null} ELSE {other} END"
    if not results:
        return f"({rest})"
    whens = "".join(f"WHEN {text_literal(v)} THEN {r} " for v, r in results)
    return f"(CASE {value} {whens}ELSE {rest} END)"


def class_codes(column: str, classes: Sequence[str], double: str) -> str:
    """SQL for a text label as its class's place among ``classes`` (0, 1, …), a ``double``;
    NULL for a value that is not one of them."""
    places = [(c, str(i)) for i, c in enumerate(classes)]
    return f"CAST({text_switch(column, places, 'NULL', 'NULL')} AS {double})"


def load(stored: list[dict[str, Any]] | None) -> list[Encoded] | None:
    """An encoding as the catalog keeps it (None: the features are the columns, unencoded)."""
    return None if stored is None else [Encoded.from_dict(d) for d in stored]


def stored(encoding: Sequence[Encoded]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in encoding]


def names(encoding: Sequence[Encoded]) -> list[str]:
    return [n for e in encoding for n in e.names()]


def sql(
    encoding: Sequence[Encoded], double: str, dialect: str, buckets: Mapping[str, str] = {}
) -> list[str]:
    """Every feature's expression; ``buckets``: the column holding a hashed column's bucket."""
    return [s for e in encoding for s in e.sql(double, dialect, buckets.get(e.column))]


def codes_sql(
    encoding: Sequence[Encoded], double: str, dialect: str, buckets: Mapping[str, str] = {}
) -> list[str]:
    """One expression per column (:meth:`Encoded.code_sql`), for :func:`expand`."""
    return [e.code_sql(double, dialect, buckets.get(e.column)) for e in encoding]


def expand(encoding: Sequence[Encoded], codes: np.ndarray) -> np.ndarray:
    """The features :func:`sql` gives, made from rows read as :func:`codes_sql` gives them;
    columns after the encoding's (the label) follow the features unchanged."""
    widths = [len(e.names()) for e in encoding]
    out = np.zeros((len(codes), sum(widths) + codes.shape[1] - len(encoding)))
    at = 0
    for j, (e, width) in enumerate(zip(encoding, widths)):
        if e.text:
            hit = np.flatnonzero(codes[:, j] >= 0)
            out[hit, at + codes[hit, j].astype(np.intp)] = 1.0
        else:
            out[:, at] = codes[:, j]
        at += width
    out[:, at:] = codes[:, len(encoding) :]
    return out


def expander(encoding: Sequence[Encoded] | None) -> Callable[[np.ndarray], np.ndarray]:
    """What makes the features (then the label) of rows read as :func:`codes_sql` gives them:
    :func:`expand` where a column is text, the rows themselves where none is (a number's code
    is its feature) or there is no encoding."""
    if encoding is None or not any(e.text for e in encoding):
        return _unchanged
    return partial(expand, encoding)


def _unchanged(rows: np.ndarray) -> np.ndarray:
    return rows


def with_buckets(
    relation: str, encoding: Sequence[Encoded], dialect: str, taken: Collection[str]
) -> tuple[str, dict[str, str]]:
    """``relation`` with a column holding each hashed column's bucket, computed once a row
    (``OFFSET 0`` keeps PostgreSQL from folding the subquery into its reader, which would
    compute it in every feature again), and those columns' quoted names by hashed column;
    ``relation`` itself where no column is hashed.  The names avoid the columns ``taken``."""
    hashed = [e for e in encoding if e.hashed]
    if not hashed:
        return relation, {}
    names: dict[str, str] = {}
    for i, e in enumerate(hashed):
        name = f"loom_bucket_{i}"
        while name in taken:
            name = "_" + name
        names[e.column] = quote_ident(name)
    exprs = ", ".join(f"{e.bucket(dialect)} AS {names[e.column]}" for e in hashed)
    return f"(SELECT *, {exprs} FROM {relation} OFFSET 0) AS loom_hashed", names


def columns(encoding: Sequence[Encoded]) -> list[str]:
    """The source columns the features come from, in order."""
    return [e.column for e in encoding]


def strict(encoding: Sequence[Encoded]) -> list[str]:
    """The columns whose NULL makes a row unusable (numbers not imputed)."""
    return [e.column for e in encoding if not e.text and e.impute is None]
