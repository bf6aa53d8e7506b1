"""A model compiled to a native SQL expression over its feature columns.

No paper section.  The expression computes what ``loom_predict`` computes — the standardisation
folded into the weights, the intercept, the link — so it runs at the engine's own speed and in
tools that cannot call UDFs.  It is valid in DuckDB and PostgreSQL: columns are quoted
identifiers cast to FLOAT8, constants are in exponent form, and ``greatest``/``CASE``/``exp``
exist in both.  A row with a NaN or infinite feature gives NULL, as ``loom_predict`` does.
A model with an encoding (``store/encoding.py``) compiles each feature to its encoding's
expression over the source column (an imputing ``COALESCE``; a text column, one-hot or hashed,
as one ``CASE`` whose value is the weight of the feature that is 1.0: categories as quoted
literals, a bucket in the dialect's spelling), so the expression takes the raw columns, text
included.  One CASE, not one indicator term per feature: PostgreSQL, 1M rows with a
64-category column and 8 numbers, the deployed function took 3.3–3.6 s as 65 terms (and 65
more in its guard).
In DuckDB the guard is ``isfinite(margin)``, the margin including ``0·x`` for a zero-weight
feature (``0·∞`` is NaN), and DuckDB computes the repeated margin once (its common
subexpression elimination): about the speed of the bare dot product.  PostgreSQL has no
``isfinite`` for doubles and evaluates a repeated expression again, so there the guard is
``Σ 0·xᵢ = 0``, false exactly when some xᵢ is NaN or ±∞ — about 1.7x the bare dot product.
Where loomdb's C module is installed (``loomdb pg install`` built it: ``loom.finite(float8)``,
NULL for NaN and ±∞, exists) the guard is ``loom.finite(margin)`` instead, the margin with its
``0·x`` terms and computed once: the regression value is ``loom.finite(margin)``, the binary
class ``CASE loom.finite(margin) > 0 WHEN true THEN … WHEN false THEN … END``; one-vs-rest
guards with its first margin (``greatest`` must compare the others), and a probability keeps
``Σ 0·xᵢ = 0`` (``greatest``/``least``, which clamp the sigmoid, skip NULLs).  Whether it exists
is asked once per compile or deploy (:func:`native_finite`), never per row.  Such an expression
calls ``loom.finite``: pasted into another PostgreSQL, create it there first —
``CREATE FUNCTION loom.finite(x float8) RETURNS float8 IMMUTABLE PARALLEL SAFE LANGUAGE sql
AS 'SELECT CASE WHEN x - x = 0 THEN x END'`` computes the same (``x - x`` is NaN for NaN and ±∞).
One departure from ``loom_predict``: a margin that overflows to ±∞ from finite features gives
NULL here (as DuckDB's ``isfinite`` guard does), a class or ±∞ there.
A binary model's class is arithmetic on the margin's sign where that gives its classes exactly
(:func:`_binary`): ``CAST(m > 0 AS FLOAT8)`` for classes 0 and 1, so the row costs the guard's
one CASE (DuckDB) or none (``loom.finite``) instead of two.
"""

from __future__ import annotations

import math
from typing import Any

from loomdb.learn.model import LinearModel, require_probabilities
from loomdb.store import encoding as encodings
from loomdb.store.encoding import Encoded, text_literal
from loomdb.store.names import builtin, quote_ident

FINITE = "loom.finite"  # loomdb_predict.c; schema-qualified, the loom schema is the installer's


def native_finite(db: Any) -> bool:
    """Whether ``loom.finite`` exists here (PostgreSQL with loomdb's C module): one catalog
    query per compile or deploy."""
    return db.dialect == "postgres" and db.function_exists("loom", "finite", 1)


def literal(x: float) -> str:
    text = f"{float(x):.17e}"
    return f"({text})" if text.startswith("-") else text


def number(x: float, dialect: str) -> str:
    """``x`` as a constant of the expression: on PostgreSQL a FLOAT8, as every value it meets.
    A bare ``1.5e+00`` is numeric there, and numeric * float8 has no operator in pg_catalog
    (PostgreSQL casts to float8 * float8), so a role's ``*(numeric, float8)`` on the
    search_path of whoever calls a deployed function would be an exact match and chosen."""
    return f"CAST({literal(x)} AS FLOAT8)" if dialect == "postgres" else literal(x)


def zero(dialect: str) -> str:
    """0 as :func:`number` writes it, shorter."""
    return "CAST(0.0 AS FLOAT8)" if dialect == "postgres" else "0.0"


def _parts(model: LinearModel, dialect: str) -> list[tuple[Encoded | None, list[str]]]:
    """The features in groups: ``(column, [])`` for an encoded text column, whose features are
    0 or 1 and enter a margin as one CASE (:meth:`Encoded.weighted_sql`), else ``(None,
    expressions)``, one FLOAT8 per feature."""
    encoding = encodings.load(model.encoding)
    if encoding is None:
        return [(None, [_feature(model, name, dialect) for name in model.features])]
    return [(e, []) if e.text else (None, e.sql("FLOAT8", dialect)) for e in encoding]


def _feature(model: LinearModel, name: str, dialect: str) -> str:
    """An unencoded feature as a FLOAT8: a boolean column through INTEGER on PostgreSQL, which
    casts no boolean to a double (as training reads it: ``store/source.py`` ``number``)."""
    if dialect == "postgres" and name in (model.booleans or ()):
        return f"CAST(CAST({quote_ident(name)} AS INTEGER) AS FLOAT8)"
    return f"CAST({quote_ident(name)} AS FLOAT8)"


def _margin(model: LinearModel, j: int, dialect: str, zeros: bool = False) -> str:
    """b + Σ wᵢ·xᵢ; ``zeros``: zero-weight features too, as 0·x (NaN when x is not finite).
    A text column's terms are one CASE on its value (its features are 0 or 1, never NaN):
    one-hot, the k comparisons of its categories once a row instead of k terms, and a hashed
    column's value hashed once, not once per bucket."""
    W, b = model.folded()
    terms, at = [number(b[j], dialect)], 0
    for text, exprs in _parts(model, dialect):
        width = len(text.names()) if text else len(exprs)
        weights = W[at : at + width, j]
        at += width
        if text is None:
            terms += [
                f"{number(w, dialect)} * {x}" for x, w in zip(exprs, weights) if w != 0 or zeros
            ]
        elif (case := text.weighted_sql(weights.tolist(), "FLOAT8", dialect)) is not None:
            terms.append(case)
    return "(" + " + ".join(terms) + ")"


def _guarded(model: LinearModel, expression: str, dialect: str) -> str:
    if dialect == "duckdb":
        finite = " AND ".join(
            f"isfinite({_margin(model, j, dialect, zeros=True)})" for j in range(model.W.shape[1])
        )
    else:
        numbers = [x for text, exprs in _parts(model, dialect) if text is None for x in exprs]
        z = zero(dialect)
        finite = "(" + (" + ".join(f"{z} * {x}" for x in numbers) or z) + f") = {z}"
    return f"(CASE WHEN {finite} THEN {expression} END)"


def predict_expression(model: LinearModel, dialect: str = "postgres", finite: bool = False) -> str:
    """The SQL expression ``loom_predict`` computes, as text, for ``dialect``; ``finite``: guard
    with ``loom.finite`` (PostgreSQL where it exists, :func:`native_finite`)."""
    k = model.W.shape[1]
    if finite and dialect != "duckdb":
        return _finite_expression(model)
    zeros = dialect == "duckdb"  # the same margin text as the guard's: computed once
    margins = [_margin(model, j, dialect, zeros) for j in range(k)]
    if not model.classifier:
        return _guarded(model, margins[0], dialect)
    if k == 1:
        positive = f"{margins[0]} > {zero(dialect)}"
        return _guarded(model, _binary(model, positive, dialect), dialect)
    classes = _classes(model)
    whens = " ".join(f"WHEN {m} THEN {c}" for m, c in zip(margins, classes))
    return _guarded(model, f"CASE greatest({', '.join(margins)}) {whens} END", dialect)


def _binary(model: LinearModel, positive: str, dialect: str) -> str:
    """A binary model's class given ``positive``, its margin > 0 (NULL gives NULL but in
    DuckDB's CASE, which its guard keeps from a NULL or non-finite margin).

    Numeric classes c₀, c₁ are c₀ + (c₁ − c₀)·[positive] where that gives each class exactly,
    sign of zero included (checked here in doubles, which the engines add and multiply alike):
    ``CAST(positive AS FLOAT8)`` for classes 0 and 1.  Other classes, text ones included, are a
    CASE.  Measured over 1M–10M rows of 16 features in DuckDB, a CASE inside the guard's cost
    the deployed MACRO 5–10% of the hand-written query; the cast cost nothing measurable.
    """
    if not model.class_names:
        low, high = (float(c) for c in model.classes)
        step = high - low
        if _same(low + step * 0.0, low) and _same(low + step * 1.0, high):
            # PostgreSQL casts a boolean to integers only
            cast = (
                "CAST(CAST({} AS INTEGER) AS FLOAT8)"
                if dialect == "postgres"
                else "CAST({} AS FLOAT8)"
            )
            indicator = cast.format(positive)
            if _same(low, 0.0) and step == 1.0:
                return indicator
            return (
                f"(CAST({literal(low)} AS FLOAT8) + CAST({literal(step)} AS FLOAT8) * {indicator})"
            )
    classes = _classes(model, typed=dialect == "postgres")
    if dialect == "postgres":  # a simple CASE: ``positive`` is evaluated once
        return f"CASE {positive} WHEN true THEN {classes[1]} WHEN false THEN {classes[0]} END"
    return f"CASE WHEN {positive} THEN {classes[1]} ELSE {classes[0]} END"


def _same(a: float, b: float) -> bool:
    """The same double, ±0 told apart."""
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _classes(model: LinearModel, typed: bool = False) -> list[str]:
    """The classes as SQL constants: a text label's names, else numbers (``typed``: FLOAT8 — a
    bare 1.0e+00 is numeric in PostgreSQL, and numeric results cost at every row)."""
    if model.class_names:
        return [text_literal(c) for c in model.class_names]
    numbers = [literal(float(c)) for c in model.classes]
    return [f"CAST({c} AS FLOAT8)" for c in numbers] if typed else numbers


def _finite_expression(model: LinearModel) -> str:
    """``loom_predict`` guarded by ``loom.finite``: NULL exactly when a margin with its ``0·x``
    terms is not finite, i.e. when some feature is NaN or ±∞."""
    first = FINITE + "(" + _margin(model, 0, "postgres", zeros=True) + ")"
    if not model.classifier:
        return f"({first})"
    if model.W.shape[1] == 1:
        positive = f"{first} > {zero('postgres')}"
        return f"({_binary(model, positive, 'postgres')})"
    classes = _classes(model, typed=True)
    margins = [_margin(model, j, "postgres") for j in range(model.W.shape[1])]
    whens = " ".join(f"WHEN {m} THEN {c}" for m, c in zip(margins, classes))
    chosen = f"CASE greatest({', '.join(margins)}) {whens} END"
    return f"(CASE WHEN {first} IS NOT NULL THEN {chosen} END)"


def proba_expression(model: LinearModel, dialect: str = "postgres") -> str:
    """The SQL expression ``loom_predict_proba`` computes (logistic models only)."""
    require_probabilities(model.kind)
    k = model.W.shape[1]
    zeros = dialect == "duckdb"
    # exp() overflows to an error in PostgreSQL: clamp the margin where the sigmoid is flat.
    one, low, high = (number(v, dialect) for v in (1.0, -700.0, 700.0))
    exp = builtin("exp", dialect)  # pg_catalog's: a role's exp(float8) would be as exact
    sig = [
        f"({one} / ({one} + {exp}(-least(greatest({_margin(model, j, dialect, zeros)}, {low}), "
        f"{high}))))"
        for j in range(k)
    ]
    if k == 1:
        return _guarded(model, sig[0], dialect)
    return _guarded(model, f"(greatest({', '.join(sig)}) / ({' + '.join(sig)}))", dialect)
