"""The automatic step size: the default ``lr``, derived from the data.

scikit-learn's SAG rule (``sklearn.linear_model._sag.get_auto_step_size``): the step is the
inverse of the loss's smoothness bound over the largest squared row norm after standardisation
(or quantisation), L = c·(max‖x‖² + fit_intercept) + l2, with c = ¼ for the logistic loss and
1 for least squares and the hinge (whose sub-gradient has no smoothness; 1 keeps the step of
least squares).  The layout records max‖x‖² under every standardisation
(``store/norms.py``).  No paper section beyond that.
"""

from __future__ import annotations

from typing import Any

SMOOTHNESS = {"logistic": 0.25, "linear": 1.0, "svm": 1.0}
FALLBACK = 0.1


def auto_step(kind: str, norms: dict[str, Any] | None, fit_intercept: bool, l2: float) -> float:
    """1/L for ``kind`` given the squared row norms ``{"max": …, "mean": …}`` of the data."""
    if not norms:
        return FALLBACK
    smooth = SMOOTHNESS[kind] * (float(norms["max"]) + (1.0 if fit_intercept else 0.0)) + l2
    return 1.0 / smooth if smooth > 0 else FALLBACK
