"""Compile a model to a native SQL expression over its feature columns.

The expression replays the standardisation, the intercept and the link exactly as
:meth:`LinearModel.predict` does, so it can run at the engine's own speed and inside tools that
cannot call UDFs.  It is valid in both DuckDB and PostgreSQL: columns are quoted identifiers cast
to FLOAT8, constants are written in exponent form (a DOUBLE literal in DuckDB, an exact NUMERIC
in PostgreSQL), and ``greatest``/``CASE``/``exp`` exist in both.
"""

from __future__ import annotations

from loomdb.learn.model import LinearModel, require_probabilities


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(x: float) -> str:
    text = f"{float(x):.17e}"
    return f"({text})" if text.startswith("-") else text


def _margin(model: LinearModel, j: int) -> str:
    terms = [literal(model.b[j])]
    for i, name in enumerate(model.features):
        w = model.W[i, j]
        if w == 0.0:
            continue
        col = f"CAST({quote_ident(name)} AS FLOAT8)"
        x = f"(({col} - {literal(model.scaling.shift[i])}) * {literal(model.scaling.scale[i])})"
        terms.append(f"{literal(w)} * {x}")
    return "(" + " + ".join(terms) + ")"


def _class_literal(c: object) -> str:
    return literal(float(c))  # type: ignore[arg-type]


def predict_expression(model: LinearModel) -> str:
    """The SQL expression ``loom_predict`` computes, as text."""
    k = model.W.shape[1]
    if not model.classifier:
        return _margin(model, 0)
    if k == 1:
        c0, c1 = (_class_literal(c) for c in model.classes)
        return f"(CASE WHEN {_margin(model, 0)} > 0 THEN {c1} ELSE {c0} END)"
    margins = [_margin(model, j) for j in range(k)]
    whens = " ".join(f"WHEN {m} THEN {_class_literal(c)}" for m, c in zip(margins, model.classes))
    return f"(CASE greatest({', '.join(margins)}) {whens} END)"


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
        return sig[0]
    return f"(greatest({', '.join(sig)}) / ({' + '.join(sig)}))"
