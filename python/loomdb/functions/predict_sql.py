"""A model compiled to a native SQL expression over its feature columns.

No paper section.  The expression computes what ``loom_predict`` computes — the standardisation
folded into the weights, the intercept, the link — so it runs at the engine's own speed and in
tools that cannot call UDFs.  It is valid in DuckDB and PostgreSQL: columns are quoted
identifiers cast to FLOAT8, constants are in exponent form, and ``greatest``/``CASE``/``exp``
exist in both.  A row with a NaN or infinite feature gives NULL, as ``loom_predict`` does.
A model with an encoding (``store/encoding.py``) compiles each feature to its encoding's
expression over the source column (one-hot ``CASE WHEN`` terms with quoted literals, hashed
buckets in the dialect's spelling, imputing ``COALESCE``), so the expression takes the raw
columns, text included.
In DuckDB the guard is ``isfinite(margin)``, the margin including ``0·x`` for a zero-weight
feature (``0·∞`` is NaN), and DuckDB computes the repeated margin once (its common
subexpression elimination): about the speed of the bare dot product.  PostgreSQL has no
``isfinite`` for doubles and evaluates a repeated expression again, so there the guard is
``Σ 0·xᵢ = 0``, false exactly when some xᵢ is NaN or ±∞ — about 1.7x the bare dot product.
"""

from __future__ import annotations

from loomdb.learn.model import LinearModel, require_probabilities
from loomdb.store import encoding as encodings
from loomdb.store.names import quote_ident


def literal(x: float) -> str:
    text = f"{float(x):.17e}"
    return f"({text})" if text.startswith("-") else text


def _columns(model: LinearModel, dialect: str) -> list[str]:
    """Each feature's expression over the source columns, as FLOAT8."""
    encoding = encodings.load(model.encoding)
    if encoding is not None:
        return encodings.sql(encoding, "FLOAT8", dialect)
    return [f"CAST({quote_ident(name)} AS FLOAT8)" for name in model.features]


def _margin(model: LinearModel, j: int, dialect: str, zeros: bool = False) -> str:
    """b + Σ wᵢ·xᵢ; ``zeros``: zero-weight features too, as 0·x (NaN when x is not finite)."""
    W, b = model.folded()
    terms = [literal(b[j])]
    terms += [
        f"{literal(w)} * {x}" for x, w in zip(_columns(model, dialect), W[:, j]) if w != 0 or zeros
    ]
    return "(" + " + ".join(terms) + ")"


def _guarded(model: LinearModel, expression: str, dialect: str) -> str:
    if dialect == "duckdb":
        finite = " AND ".join(
            f"isfinite({_margin(model, j, dialect, zeros=True)})" for j in range(model.W.shape[1])
        )
    else:
        finite = "(" + " + ".join(f"0.0 * {x}" for x in _columns(model, dialect)) + ") = 0.0"
    return f"(CASE WHEN {finite} THEN {expression} END)"


def predict_expression(model: LinearModel, dialect: str = "postgres") -> str:
    """The SQL expression ``loom_predict`` computes, as text, for ``dialect``."""
    k = model.W.shape[1]
    zeros = dialect == "duckdb"  # the same margin text as the guard's: computed once
    margins = [_margin(model, j, dialect, zeros) for j in range(k)]
    if not model.classifier:
        return _guarded(model, margins[0], dialect)
    classes = [literal(float(c)) for c in model.classes]
    if k == 1:
        chosen = f"CASE WHEN {margins[0]} > 0 THEN {classes[1]} ELSE {classes[0]} END"
        return _guarded(model, chosen, dialect)
    whens = " ".join(f"WHEN {m} THEN {c}" for m, c in zip(margins, classes))
    return _guarded(model, f"CASE greatest({', '.join(margins)}) {whens} END", dialect)


def proba_expression(model: LinearModel, dialect: str = "postgres") -> str:
    """The SQL expression ``loom_predict_proba`` computes (logistic models only)."""
    require_probabilities(model.kind)
    k = model.W.shape[1]
    zeros = dialect == "duckdb"
    # exp() overflows to an error in PostgreSQL: clamp the margin where the sigmoid is flat.
    sig = [
        f"(1.0 / (1.0 + exp(-least(greatest({_margin(model, j, dialect, zeros)}, -700.0), 700.0))))"
        for j in range(k)
    ]
    if k == 1:
        return _guarded(model, sig[0], dialect)
    return _guarded(model, f"(greatest({', '.join(sig)}) / ({' + '.join(sig)}))", dialect)
