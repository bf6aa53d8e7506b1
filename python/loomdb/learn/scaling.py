"""Standardisation: an affine map ``x' = (x − shift)·scale`` stored with a model.

No paper section.  ``zscore``, ``minmax`` or ``none``, from column statistics computed in SQL.
The trainer folds the map into its products, so compressed batches are never rewritten; a
format that stores values already mapped (mlweaving stores min–max values u ∈ [0, 1)) gets the
asked map re-expressed over its values by :meth:`Scaling.over_minmax`, so every method is
honoured on every format and the model is kept for raw rows.

A column without spread (constant, or all NULL) gets scale 0: its standardised value is 0, as
the map defines it, so its weight has no gradient and stays 0.  A scale of 1 left the column's
raw values in the folded products, where ``x·w − shift·w`` cancels only up to rounding: a
constant column of 1.7e18 (a load timestamp in nanoseconds) gave its weight a gradient of
rounding noise, the weight grew, and the model's margins drowned in ±10² of noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

METHODS = ("zscore", "minmax", "none")


def _spread(values: np.ndarray) -> np.ndarray:
    return np.where(values > 0, values, 1.0)


@dataclass
class Scaling:
    """The affine standardisation ``(x − shift)·scale`` and how it was derived."""

    method: str
    shift: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_stats(cls, method: str, stats: dict[str, Any]) -> Scaling:
        lo = np.asarray(stats["min"], dtype=np.float64)
        if method == "none":
            return cls(method, np.zeros(len(lo)), np.ones(len(lo)))
        if method == "minmax":
            shift, spread = lo, np.asarray(stats["max"], dtype=np.float64) - lo
        elif method == "zscore":
            shift = np.asarray(stats["mean"], dtype=np.float64)
            spread = np.asarray(stats["std"], dtype=np.float64)
        else:
            raise ValueError(f"unknown standardisation {method!r}")
        return cls(
            method, shift, np.divide(1.0, spread, out=np.zeros_like(spread), where=spread > 0)
        )

    @classmethod
    def over_minmax(cls, method: str, stats: dict[str, Any], raw: Scaling | None = None) -> Scaling:
        """``method``'s map (``raw``, else the one ``stats`` give) applied to min–max values
        u = (x − min)/(max − min) instead of x."""
        lo = np.asarray(stats["min"], dtype=np.float64)
        spread = _spread(np.asarray(stats["max"], dtype=np.float64) - lo)
        raw = raw if raw is not None else cls.from_stats(method, stats)
        return cls(method, (raw.shift - lo) / spread, raw.scale * spread)

    def apply(self, X: np.ndarray) -> np.ndarray:
        return (X - self.shift) * self.scale

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "shift": self.shift.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scaling:
        return cls(d["method"], np.asarray(d["shift"], float), np.asarray(d["scale"], float))
