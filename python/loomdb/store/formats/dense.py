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


class DenseFormat(Format):
    name = "dense"

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        dtype = options.get("dtype") or "float64"
        if dtype == "float32":
            lo, hi = np.nanmin(stats["min"], initial=0.0), np.nanmax(stats["max"], initial=0.0)
            if max(abs(lo), abs(hi)) > FLOAT32_MAX:
                raise LoomDataError(
                    "a feature exceeds float32's range (3.4e38): it would be stored as infinity",
                    hint="lay the source out with dtype float64",
                )
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
