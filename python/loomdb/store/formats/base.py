"""What every storage format shares: labels as part 0, its parts after, one Batch per minibatch.

No paper section.  A format says how a minibatch's features become parts (``encoder``) and how
parts read at a precision become a matrix-like payload (``payload``); ``store.storage`` stores
and checks the parts, ``store.layout`` decides what to read.  ``value_map`` names the affine map
a format applied to the values it stores (mlweaving: min–max), so the trainer can fold any
standardisation on top of it and the model predicts on raw rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from loomdb.codecs import dense
from loomdb.errors import LoomFormatError
from loomdb.options import Options
from loomdb.seams import Batch
from loomdb.store.storage import Buffer, Stored

Encoder = Callable[[np.ndarray], list[bytes]]


class Format:
    name = "format"
    version = 1
    any_precision = False  # reads fewer bytes at a lower precision
    value_map: str | None = None  # the affine map applied to stored values, if any
    options = Options("layout")  # what this format accepts besides the shared layout options

    def parts(self, precision: int) -> int:
        """How many feature parts a read at ``precision`` bits needs."""
        return 1

    def check(self, options: dict[str, Any]) -> None:
        """Refuse layout options this format cannot honour (the shared ones included)."""

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        raise NotImplementedError

    def payload(self, parts: list[Buffer], rows: int, n_features: int, precision: int) -> Any:
        raise NotImplementedError

    def encode_labels(self, y: np.ndarray) -> bytes:
        return dense.encode(y.reshape(-1, 1))

    def decode_labels(self, blob: Buffer) -> np.ndarray:
        return dense.decode(blob)[:, 0]

    def decode(self, stored: Stored, n_features: int, precision: int) -> Batch:
        y = self.decode_labels(stored.parts[0])
        if len(y) != stored.rows:
            raise LoomFormatError(
                f"minibatch {stored.batch} holds {len(y)} labels for {stored.rows} rows"
            )
        X = self.payload(stored.parts[1:], stored.rows, n_features, precision)
        return Batch(X=X, y=y, number=stored.batch, nbytes=stored.nbytes)
