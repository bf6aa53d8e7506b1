"""A model compiled to a native SQL expression over its feature columns.

No paper section.  The expression computes what ``loom_predict`` computes — the standardisation
folded into the weights, the intercept, the link — so it runs at the engine's own speed and in
tools that cannot call UDFs.  It is valid in DuckDB and PostgreSQL: columns are quoted
identifiers cast to FLOAT8, constants are in exponent form, and ``greatest``/``CASE``/``exp``
exist in both.  A row with a NaN or infinite feature gives NULL, as ``loom_predict`` does: the
guard ``Σ 0·xᵢ = 0`` is false exactly when some xᵢ is NaN or ±∞ (``0·∞`` is NaN).
"""

from __future__ import annotations

from loomdb.learn.model import LinearModel, require_probabilities
from loomdb.store.names import quote_ident


def literal(x: float) -> str:
    text = f"{float(x):.17e}"
    return f"({text})" if text.startswith("-") else text


def _column(name: str) -> str:
    return f"CAST({quote_ident(name)} AS FLOAT8)"


def _margin(model: LinearModel, j: int) -> str:
    W, b = model.folded()
    terms = [literal(b[j])]
    terms += [f"{literal(w)} * {_column(f)}" for f, w in zip(model.features, W[:, j]) if w != 0]
    return "(" + " + ".join(terms) + ")"


def _finite(model: LinearModel) -> str:
    return "(" + " + ".join(f"0.0 * {_column(f)}" for f in model.features) + ") = 0.0"


def _guarded(model: LinearModel, expression: str) -> str:
    return f"(CASE WHEN {_finite(model)} THEN {expression} END)"


def predict_expression(model: LinearModel) -> str:
    """The SQL expression ``loom_predict`` computes, as text."""
    k = model.W.shape[1]
    if not model.classifier:
        return _guarded(model, _margin(model, 0))
    classes = [literal(float(c)) for c in model.classes]
    if k == 1:
        return _guarded(
            model, f"CASE WHEN {_margin(model, 0)} > 0 THEN {classes[1]} ELSE {classes[0]} END"
        )
    margins = [_margin(model, j) for j in range(k)]
    whens = " ".join(f"WHEN {m} THEN {c}" for m, c in zip(margins, classes))
    return _guarded(model, f"CASE greatest({', '.join(margins)}) {whens} END")


def proba_expression(model: LinearModel) -> str:
    """The SQL expression ``loom_predict_proba`` computes (logistic models only)."""
    require_probabilities(model.kind)
    k = model.W.shape[1]
    # exp() overflows to an error in PostgreSQL: clamp the margin where the sigmoid is flat.
    sig = [
        f"(1.0 / (1.0 + exp(-least(greatest({_margin(model, j)}, -700.0), 700.0))))"
        for j in range(k)
    ]
    if k == 1:
        return _guarded(model, sig[0])
    return _guarded(model, f"(greatest({', '.join(sig)}) / ({' + '.join(sig)}))")
