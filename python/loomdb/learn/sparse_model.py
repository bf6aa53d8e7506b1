"""A linear model of a sparse source: coefficients only for the columns that have one.

No paper section.  A sparse layout trains over its observed columns (``store/sparse.py``); the
model keeps the source column of each coefficient row (``index``, strictly increasing), the
source's ``width``, and the standardisation of those columns only.  Columns whose coefficients
are all zero are dropped when the model is made (:func:`from_layout`): a column no row held, or
one L1 zeroed, predicts exactly as before (its folded weight and its share of the intercept
are both zero).  A sparse row's index with no coefficient contributes nothing; an index at or
beyond ``width`` is an error, as a wrong feature count is for a dense model.

Stored (``loom.models``): ``coefficients`` = ``{"width": n, "index": […], "coef": [[…]]}``,
``standardization`` = ``{"method", "shift", "scale"}`` over those columns, ``feature_names`` =
the source's indices and values columns; the arrays are compact (``codecs.array_json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.learn.model import LinearModel
from loomdb.learn.scaling import Scaling

TOP = 10  # the largest coefficients loom_model_info shows


@dataclass
class SparseLinearModel(LinearModel):
    index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    columns: int = 0  # the source's width

    @property
    def width(self) -> int:
        return self.columns

    def _positions(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        at = np.minimum(np.searchsorted(self.index, columns), max(len(self.index) - 1, 0))
        held = self.index[at] == columns if len(self.index) else np.zeros(len(columns), bool)
        return at, held

    def margins(self, X: Any) -> np.ndarray:
        """Sparse rows, or dense rows of all ``width`` columns."""
        if not isinstance(X, np.ndarray) or X.ndim != 2 or X.shape[1] != self.width:
            if isinstance(X, np.ndarray):
                raise LoomOptionError(
                    f"the model is sparse over {self.width:,} columns; got rows of "
                    f"{X.shape[-1] if X.ndim else 0} values",
                    hint="predict with loom_predict_sparse(model, indices, values)",
                )
            return super().margins(X)
        W, b = self.folded()
        with np.errstate(invalid="ignore", over="ignore"):
            Z = X[:, self.index] @ W + b
        Z[~np.isfinite(X).all(axis=1)] = np.nan
        return Z

    def folded_over(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Folded weights over a layout's ``columns`` (zero where the model has none)."""
        W, b = self.folded()
        at, held = self._positions(np.asarray(columns, dtype=np.int64))
        out = np.zeros((len(columns), W.shape[1]))
        out[held] = W[at[held]]
        return out, b

    def stored(self) -> dict[str, Any]:
        return {
            "coefficients": {"width": self.width, "index": self.index, "coef": self.W},
            "standardization": {
                "method": self.scaling.method,
                "shift": self.scaling.shift,
                "scale": self.scaling.scale,
            },
        }

    @classmethod
    def from_record(
        cls, kind: str, features: list[str], coefficients: dict, intercept, scaling: dict, classes
    ) -> SparseLinearModel:
        index = np.asarray(coefficients["index"], dtype=np.int64).reshape(-1)
        b = np.asarray(intercept, dtype=np.float64)
        # one column per intercept: a model with no weight left stores none, and numpy cannot
        # infer a reshape's -1 from an empty array
        W = np.asarray(coefficients["coef"], dtype=np.float64).reshape(len(index), b.size)
        return cls(
            kind=kind,
            features=list(features),
            W=W,
            b=b,
            scaling=Scaling.from_dict(scaling),
            classes=list(classes),
            index=index,
            columns=int(coefficients["width"]),
        )

    def summary(self) -> dict[str, Any]:
        """What ``loom_model_info`` shows instead of every coefficient."""
        strength = np.abs(self.W).max(axis=1) if len(self.W) else np.zeros(0)
        top = np.argsort(-strength, kind="stable")[:TOP]
        return {
            "width": self.width,
            "stored": len(self.index),
            "nonzero": int(np.count_nonzero(self.W)),
            "largest": [
                {"index": int(self.index[i]), "coef": [float(w) for w in self.W[i]]} for i in top
            ],
        }


def from_layout(model: LinearModel, columns: np.ndarray, width: int) -> SparseLinearModel:
    """The trained model over a sparse layout's observed ``columns``, all-zero rows dropped."""
    keep = (model.W != 0).any(axis=1)
    s = model.scaling
    return SparseLinearModel(
        kind=model.kind,
        features=model.features,
        W=model.W[keep],
        b=model.b,
        scaling=Scaling(s.method, s.shift[keep], s.scale[keep]),
        classes=model.classes,
        index=np.asarray(columns, dtype=np.int64)[keep],
        columns=int(width),
    )


def warm_start_over(model: SparseLinearModel, columns: np.ndarray, width: int) -> LinearModel:
    """The model's coefficients over a layout's observed ``columns``, to continue training."""
    if model.width != width:
        raise LoomOptionError(
            f"cannot warm-start: the model is over {model.width:,} columns, the source {width:,}",
            hint="warm_start needs the same width; give it in the sparse option",
        )
    columns = np.asarray(columns, dtype=np.int64)
    at = np.minimum(np.searchsorted(columns, model.index), max(len(columns) - 1, 0))
    if len(model.index) and not (len(columns) and np.array_equal(columns[at], model.index)):
        raise LoomOptionError(
            "cannot warm-start: the model has coefficients for columns no row of this source holds",
            hint="warm-start on data holding the model's columns, or train a new model",
        )
    W = np.zeros((len(columns), model.W.shape[1]))
    W[at] = model.W
    m = len(columns)
    return LinearModel(
        model.kind,
        model.features,
        W,
        model.b.copy(),
        Scaling(model.scaling.method, np.zeros(m), np.ones(m)),
        model.classes,
    )
