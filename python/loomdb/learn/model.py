"""A trained generalized linear model: coefficients, standardisation, classes and the link.

Standardisation is an affine map ``x' = (x − shift)·scale`` stored with the model and replayed at
predict time; the trainer folds it into the products so compressed batches are never rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.learn.losses import LOSSES, sigmoid


def require_probabilities(kind: str) -> None:
    if kind != "logistic":
        raise LoomOptionError(
            f"a {kind} model has no probabilities",
            hint='use loom_predict, or train with {"model": "logistic"}',
        )


@dataclass
class Scaling:
    """The affine standardisation ``(x − shift)·scale`` and how it was derived."""

    method: str
    shift: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_stats(cls, method: str, stats: dict[str, np.ndarray]) -> Scaling:
        m = len(stats["min"])
        if method == "none":
            return cls(method, np.zeros(m), np.ones(m))
        if method == "minmax":
            shift, spread = stats["min"], stats["max"] - stats["min"]
        elif method == "zscore":
            shift, spread = stats["mean"], stats["std"]
        else:
            raise LoomOptionError(f"unknown standardisation '{method}'")
        spread = np.where(spread > 0, spread, 1.0)
        return cls(method, np.asarray(shift, dtype=np.float64), 1.0 / spread)

    def apply(self, X: np.ndarray) -> np.ndarray:
        return (X - self.shift) * self.scale

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "shift": self.shift.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scaling:
        return cls(d["method"], np.asarray(d["shift"], float), np.asarray(d["scale"], float))


@dataclass
class LinearModel:
    """``kind`` is linear | logistic | svm; ``W`` is (features, k), k = 1 unless one-vs-rest."""

    kind: str
    features: list[str]
    W: np.ndarray
    b: np.ndarray
    scaling: Scaling
    classes: list[Any] = field(default_factory=list)
    _folded: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def classifier(self) -> bool:
        return LOSSES[self.kind].classifier

    def margins(self, X: np.ndarray) -> np.ndarray:
        """(n, k) margins of raw (unstandardised) rows."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(self.features):
            got = X.shape[-1] if X.ndim else 0
            raise LoomOptionError(
                f"the model expects {len(self.features)} features "
                f"({', '.join(self.features[:8])}{'…' if len(self.features) > 8 else ''}); "
                f"got {got}",
                hint="pass the features in the order loom_model_info lists them",
            )
        W, b = self.folded()
        return X @ W + b

    def folded(self) -> tuple[np.ndarray, np.ndarray]:
        """Weights and intercept with the standardisation folded in (cached)."""
        if self._folded is None:
            W = self.W * self.scaling.scale[:, None]
            self._folded = (W, self.b - self.scaling.shift @ W)
        return self._folded

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = self.margins(X)
        if not self.classifier:
            return Z[:, 0]
        classes = np.asarray(self.classes, dtype=np.float64)
        if Z.shape[1] == 1:
            return np.where(Z[:, 0] > 0, classes[1], classes[0])
        return classes[np.argmax(Z, axis=1)]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Probability of the positive class (binary) or of the predicted class (one-vs-rest)."""
        require_probabilities(self.kind)
        P = sigmoid(self.margins(X))
        if P.shape[1] == 1:
            return P[:, 0]
        return P.max(axis=1) / P.sum(axis=1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "features": self.features,
            "coef": self.W.tolist(),
            "intercept": self.b.tolist(),
            "scaling": self.scaling.to_dict(),
            "classes": self.classes,
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
        )
