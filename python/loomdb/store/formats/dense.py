"""The ``dense`` format: each minibatch one part of plain float64 (or float32) values.

No paper section (Bismarck's layout: rows shuffled once, one stored row per minibatch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.codecs.blob import REBUILD
from loomdb.errors import LoomDataError, LoomFormatError
from loomdb.store.formats.base import Encoder, Format
from loomdb.store.storage import Buffer

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32, 1.2e-38


class DenseFormat(Format):
    name = "dense"

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        dtype = options.get("dtype") or "float64"
        if dtype == "float32":
            _check_float32(stats, options)
        return lambda X: [dense.encode(X, dtype)]

    def stack(self, payloads: list[Any]) -> Any:
        return payloads[0] if len(payloads) == 1 else np.vstack(payloads)

    def payload(self, parts: list[Buffer], rows: int, n_features: int, precision: int) -> Any:
        X = dense.decode(parts[0])
        if X.shape != (rows, n_features):
            raise LoomFormatError(
                f"a dense minibatch holds {X.shape}, not ({rows}, {n_features})", hint=REBUILD
            )
        return np.asarray(X)


def _check_float32(stats: dict[str, Any], options: dict[str, Any]) -> None:
    """Refuse a feature float32 cannot store: one beyond its range (infinity), and one whose
    every non-zero value is below its smallest normal (1e-300s): stored as 0 or a subnormal,
    the column would lose what it holds, silently."""
    lo, hi = np.asarray(stats["min"], dtype=np.float64), np.asarray(stats["max"], dtype=np.float64)
    if max(np.nanmax(np.abs(lo), initial=0.0), np.nanmax(np.abs(hi), initial=0.0)) > FLOAT32_MAX:
        raise LoomDataError(
            "a feature exceeds float32's range (3.4e38): it would be stored as infinity",
            hint="lay the source out with dtype float64",
        )
    peak = np.fmax(np.abs(lo), np.abs(hi))
    tiny = np.flatnonzero((peak > 0) & (peak < FLOAT32_TINY))
    if len(tiny):
        names = options.get("feature_names") or []
        named = [names[i] for i in tiny] if len(names) == len(peak) else [str(i) for i in tiny]
        raise LoomDataError(
            f"feature(s) {', '.join(named)} hold only values below float32's smallest normal "
            "(1.2e-38) in magnitude: they would be stored as 0 or with a few bits",
            hint="lay the source out with dtype float64, or scale them up in a SELECT source",
        )
