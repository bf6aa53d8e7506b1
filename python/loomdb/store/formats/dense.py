"""The ``dense`` format: each minibatch a row of plain float64 (or float32) bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.store.formats.base import RowBatchFormat


class DenseFormat(RowBatchFormat):
    name = "dense"

    def encode(self, X: np.ndarray, options: dict[str, Any]) -> bytes:
        return dense.encode(X, options.get("dtype") or "float64")

    def payload(self, blob: bytes, options: dict[str, Any]) -> np.ndarray:
        return dense.decode(blob)
