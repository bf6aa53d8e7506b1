"""What the data says about a task: features, classes, targets, weights, scaling, a start.

No paper section.  Classification targets are 0/1 columns (one per class for one-vs-rest,
one column for two classes); regression targets are the values.  ``baseline_loss`` is the
loss of the zero model, against which the trainer's guard tells an exploding loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from loomdb.errors import LoomFormatError
from loomdb.learn.model import LinearModel
from loomdb.learn.scaling import Scaling
from loomdb.learn.step_kernels import class_targets

_NO_WEIGHTS = np.empty(0)


@dataclass
class Problem:
    features: list[str]
    scaling: Scaling
    classes: list[Any]
    class_weights: np.ndarray | None = None
    init: LinearModel | None = None
    label_moments: tuple[float, float] = (0.0, 1.0)  # mean and std of a regression label
    # the map from raw values to the standardised features (``scaling`` is it re-expressed over
    # a format's stored values): what the model stores; None where it is ``scaling`` itself
    raw_scaling: Scaling | None = None

    @property
    def k(self) -> int:
        return 1 if len(self.classes) <= 2 else len(self.classes)

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        if self.init is not None:
            return self.init.W.copy(), self.init.b.copy()
        m = len(self.scaling.scale)  # the layout's columns (a sparse one's observed columns)
        return np.zeros((m, self.k)), np.zeros(self.k)

    @cached_property
    def class_values(self) -> np.ndarray:
        return np.asarray(self.classes, dtype=np.float64)

    def targets(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(T, sample_weight)`` for raw labels ``y``: 0/1 one-vs-rest columns or values."""
        if not self.classes:
            return y.reshape(-1, 1).astype(np.float64), np.ones(len(y))
        labels = np.asarray(y, dtype=np.float64)
        weights = self.class_weights if self.class_weights is not None else _NO_WEIGHTS
        T, w, bad = class_targets(labels, self.class_values, self.k, weights)
        if bad >= 0:
            raise LoomFormatError(
                f"label {labels[bad].item()!r} is not one of the classes {self.classes} "
                "this model learns",
                hint="train on the index the classes were found in, or rebuild it (REINDEX)",
            )
        return T, w

    def baseline_loss(self, kind: str) -> float:
        """The mean loss of the all-zero model (per row, summed over the k target columns)."""
        weight = 1.0 if self.class_weights is None else float(np.max(self.class_weights))
        if kind == "logistic":
            return self.k * math.log(2.0) * weight
        if kind == "svm":
            return self.k * weight
        mean, std = self.label_moments
        return max(0.5 * (mean * mean + std * std), 1e-12)
