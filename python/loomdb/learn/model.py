"""A trained generalized linear model: coefficients, standardisation, classes and the link.

No paper section.  Standardisation (``learn/scaling.py``) is stored with the model and folded
into the weights at predict time.  Prediction from margins is written once here
(``labels``/``probabilities``) and used by every predict path; a row with a NaN or infinite
feature predicts NaN (NULL in SQL), the same in the compiled SQL expression.

Rows may also come sparse (``CsrRows``: each row's feature positions and values, as
``loom_predict_sparse`` passes them): a position names a feature (0-based, in the model's
order), an absent one is 0, a non-finite value makes the row NaN.  ``learn/sparse_model.py``
keeps models of sparse sources, whose positions are the source's columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.csr import CsrRows
from loomdb.errors import LoomDataError, LoomOptionError
from loomdb.learn.losses import LOSSES, sigmoid
from loomdb.learn.scaling import Scaling


def require_probabilities(kind: str) -> None:
    if kind != "logistic":
        raise LoomOptionError(
            f"a {kind} model has no probabilities",
            hint='use loom_predict, or train with {"model": "logistic"}',
        )


def class_text(number: float) -> str:
    """A numeric class as text: the shortest text that reads back as the same double
    (``repr``), an integral one without ``.0`` (``1``, ``2.5``, ``1000001``, ``1e+16``)."""
    text = repr(float(number) + 0.0)  # -0.0 is class 0
    return text[:-2] if text.endswith(".0") else text


@dataclass
class LinearModel:
    """``kind`` is linear | logistic | svm; ``W`` is (features, k), k = 1 unless one-vs-rest."""

    kind: str
    features: list[str]
    W: np.ndarray
    b: np.ndarray
    scaling: Scaling
    classes: list[Any] = field(default_factory=list)
    inputs: dict[str, Any] | None = None  # how raw inputs become features (images), if not columns
    encoding: list[dict[str, Any]] | None = None  # how columns became features (store/encoding.py)
    class_names: list[str] | None = None  # a text label's classes; ``classes`` are their codes
    booleans: list[str] | None = None  # unencoded features read from boolean columns (as 0, 1)
    _folded: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _unweighted: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def classifier(self) -> bool:
        return LOSSES[self.kind].classifier

    def folded(self) -> tuple[np.ndarray, np.ndarray]:
        """Weights and intercept with the standardisation folded in (cached)."""
        if self._folded is None:
            W = self.W * self.scaling.scale[:, None]
            self._folded = (W, self.b - self.scaling.shift @ W)
        return self._folded

    def unweighted(self) -> np.ndarray:
        """The features whose folded weights are all zero (cached)."""
        if self._unweighted is None:
            self._unweighted = np.flatnonzero(~self.folded()[0].any(axis=1))
        return self._unweighted

    @property
    def width(self) -> int:
        """How many columns a row of this model has (a sparse row's positions are below it)."""
        return len(self.features)

    def _positions(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The coefficient row of each column, and which columns have one (None: all)."""
        return columns, None

    def sparse_margins(self, rows: CsrRows) -> np.ndarray:
        """(n, k) margins of sparse rows; NaN for a row with a non-finite value."""
        idx = rows.indices
        if rows.nnz and (idx.min() < 0 or idx.max() >= self.width):
            bad = int(idx[(idx < 0) | (idx >= self.width)][0])
            raise LoomDataError(
                f"a row names column {bad}; the model's columns run from 0 to {self.width - 1}",
                hint="pass 0-based indices below the width the model was trained on",
            )
        rows = rows.canonical()  # a column named twice in a row is refused, as in training
        W, b = self.folded()
        at, held = self._positions(rows.indices)
        ids, vals = rows.row_ids(), rows.values
        if held is not None:
            at, ids, vals = at[held], ids[held], vals[held]
        n = len(rows)
        Z = np.empty((n, W.shape[1]))
        with np.errstate(invalid="ignore", over="ignore"):
            terms = W[at] * vals[:, None]
            for t in range(W.shape[1]):
                Z[:, t] = np.bincount(ids, weights=terms[:, t], minlength=n) + b[t]
        bad_rows = np.bincount(rows.row_ids(), ~np.isfinite(rows.values), minlength=n) > 0
        Z[bad_rows] = np.nan
        return Z

    def margins(self, X: Any) -> np.ndarray:
        """(n, k) margins of raw rows; NaN for a row with a non-finite feature."""
        if isinstance(X, CsrRows):
            return self.sparse_margins(X)
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(self.features):
            got = X.shape[-1] if X.ndim else 0
            more = "…" if len(self.features) > 8 else ""
            raise LoomOptionError(
                f"the model expects {len(self.features)} features "
                f"({', '.join(self.features[:8])}{more}); got {got}",
                hint="pass the features in the order loom_model_info lists them",
            )
        W, b = self.folded()
        with np.errstate(invalid="ignore", over="ignore"):
            Z = X @ W + b
        # A non-finite feature makes its row's margins NaN or ±inf, so only the rows whose
        # margins are not all finite need their features checked (a margin can also overflow
        # from finite features: those rows keep it) — except under a zero weight, whose
        # product BLAS may skip (reference dgemv does): those columns are checked apart.
        unsure = ~np.isfinite(Z).all(axis=1)
        zero = self.unweighted()
        if len(zero):
            unsure |= ~np.isfinite(X[:, zero]).all(axis=1)
        if unsure.any():
            suspect = np.flatnonzero(unsure)
            bad = suspect[~np.isfinite(X[suspect]).all(axis=1)]
            Z[bad] = np.nan
        return Z

    def labels(self, Z: np.ndarray) -> np.ndarray:
        """Predicted labels (values for regression) from margins; NaN stays NaN."""
        if not self.classifier:
            return Z[:, 0].copy()
        classes = np.asarray(self.classes, dtype=np.float64)
        if Z.shape[1] == 1:
            out = np.where(Z[:, 0] > 0, classes[1], classes[0])
        else:
            out = classes[np.argmax(np.nan_to_num(Z, nan=-np.inf), axis=1)]
        out[np.isnan(Z).any(axis=1)] = np.nan
        return out

    def names_of(self, labels: np.ndarray) -> list[str | None]:
        """Predicted labels as text: a text label's class names, otherwise the numbers as
        ``loom_predict`` gives them (``1``, ``2.5``); NaN → None."""
        if not self.classifier:
            raise LoomOptionError(
                f"a {self.kind} model predicts numbers, not classes",
                hint="use loom_predict",
            )
        names = np.asarray(self.class_names or [class_text(c) for c in self.classes], object)
        labels = np.asarray(labels, dtype=np.float64)
        out = np.full(len(labels), None, dtype=object)
        known = ~np.isnan(labels)  # labels are the model's classes (sorted), or NaN
        out[known] = names[np.searchsorted(np.asarray(self.classes, np.float64), labels[known])]
        return out.tolist()

    def require_numbers(self, name: str) -> None:
        """Refuse a model whose classes are text where a number must come out."""
        if self.class_names:
            shown = ", ".join(self.class_names[:5]) + ("…" if len(self.class_names) > 5 else "")
            raise LoomOptionError(
                f"model '{name}' predicts text classes ({shown}): loom_predict returns numbers",
                hint=f"use loom_predict_class('{name}', …), or loom_deploy's function",
            )

    def probabilities(self, Z: np.ndarray) -> np.ndarray:
        """P(positive class) (binary) or P(predicted class) (one-vs-rest) from margins."""
        require_probabilities(self.kind)
        P = sigmoid(Z)
        if P.shape[1] == 1:
            return P[:, 0]
        with np.errstate(invalid="ignore"):
            return P.max(axis=1) / P.sum(axis=1)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.labels(self.margins(X))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.probabilities(self.margins(X))

    def stored(self) -> dict[str, Any]:
        """The coefficients and standardisation as the catalog keeps them."""
        return {"coefficients": self.W.tolist(), "standardization": self.scaling.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "features": self.features,
            "coef": self.W.tolist(),
            "intercept": self.b.tolist(),
            "scaling": self.scaling.to_dict(),
            "classes": self.classes,
            **({"inputs": self.inputs} if self.inputs else {}),
            **({"encoding": self.encoding} if self.encoding else {}),
            **({"class_names": self.class_names} if self.class_names else {}),
            **({"booleans": self.booleans} if self.booleans else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LinearModel:
        return cls(
            kind=d["kind"],
            features=list(d["features"]),
            W=np.asarray(d["coef"], dtype=np.float64).reshape(len(d["features"]), -1),
            b=np.asarray(d["intercept"], dtype=np.float64),
            scaling=Scaling.from_dict(d["scaling"]),
            classes=list(d["classes"]),
            inputs=d.get("inputs"),
            encoding=d.get("encoding"),
            class_names=d.get("class_names"),
            booleans=d.get("booleans"),
        )
