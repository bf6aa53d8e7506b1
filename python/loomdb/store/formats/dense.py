"""The ``dense`` format: each minibatch one part of plain float64 (or float32) values.

No paper section (Bismarck's layout: rows shuffled once, one stored row per minibatch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.errors import LoomFormatError
from loomdb.store.formats.base import Encoder, Format


class DenseFormat(Format):
    name = "dense"

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        dtype = options.get("dtype") or "float64"
        return lambda X: [dense.encode(X, dtype)]

    def payload(self, parts: list[bytes], rows: int, n_features: int, precision: int) -> Any:
        X = dense.decode(parts[0])
        if X.shape != (rows, n_features):
            raise LoomFormatError(f"a dense minibatch holds {X.shape}, not ({rows}, {n_features})")
        return np.asarray(X)
