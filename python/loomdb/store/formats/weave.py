"""The ``mlweaving`` format: an any-precision bit-plane index (MLWeaving §4.3, DoppioDB §3).

Features are min–max normalised with the column statistics computed in SQL, quantised to 32
bits and woven into bit planes once.  Part 0 of a minibatch (a *block*) holds its labels as
float32 (Eq. 4 counts 32 bits per label) when float32 holds every one of them exactly, and as
float64 otherwise (16777217.0, or 0.1, would change in float32: classes would merge, a
regression target would move); the part's length over the block's rows tells which, so blocks
written before float64 labels existed read as they always did.  Part p + 1 holds bit plane p
(MSB first) of every (8-sample group, 64-feature chunk) of the block, in the hardware's line
order.  Reading precision s is ``part <= s``, so the payload an epoch reads is exactly Eq. 4's
N·(s·⌈M/64⌉·64 + 32)/8 bytes (float32 labels): precision is chosen at read time from the
one stored index.

Batches carry values already in [0, 1) (``value_map`` "minmax"): the trainer folds the asked
standardisation on top of that map and the model is stored for raw rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import weave
from loomdb.codecs.blob import REBUILD
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.store.formats.base import Encoder, Format
from loomdb.store.storage import Buffer


class WeaveFormat(Format):
    name = "mlweaving"
    any_precision = True
    fidelity = "precision"
    value_map = "minmax"

    def parts(self, precision: int) -> int:
        return precision

    def check(self, options: dict[str, Any]) -> None:
        size = options["batch_size"]
        if size % 8:
            raise LoomOptionError(
                f"an mlweaving index needs a batch_size that is a multiple of 8; got {size}",
                hint="the engine updates its working model every 8 samples: use 8, 16, … 256",
            )
        if options.get("dtype", "float64") != "float64":
            raise LoomOptionError(
                "an mlweaving index quantises values to 32 bits itself: 'dtype' does not apply",
                hint="leave 'dtype' out (it is for the dense format)",
            )

    def encoder(self, stats: dict[str, Any], options: dict[str, Any]) -> Encoder:
        lo, hi = np.asarray(stats["min"]), np.asarray(stats["max"])

        def encode(X: np.ndarray) -> list[bytes]:
            planes = weave.weave_block(weave.quantize(X, lo, hi))
            return [p.tobytes() for p in planes]

        return encode

    def encode_labels(self, y: np.ndarray) -> bytes:
        y = np.asarray(y, dtype=np.float64)
        with np.errstate(over="ignore"):  # beyond float32's range: inf, so kept as float64
            narrow = y.astype("<f4")
        if np.array_equal(narrow.astype(np.float64), y, equal_nan=True):
            return narrow.tobytes()
        return y.astype("<f8").tobytes()  # float32 would change a label: keep every bit

    def decode_labels(self, blob: Buffer, rows: int | None = None) -> np.ndarray:
        """A block's labels: float32, or float64 when the part holds 8 bytes a row."""
        if rows is not None and rows > 0 and len(blob) == 8 * rows:
            return np.frombuffer(blob, dtype="<f8").astype(np.float64)
        if len(blob) % 4:
            raise LoomFormatError(
                f"mlweaving labels of {len(blob)} bytes are not float32s", hint=REBUILD
            )
        return np.frombuffer(blob, dtype="<f4").astype(np.float64)

    def payload(self, parts: list[Buffer], rows: int, n_features: int, precision: int) -> Any:
        return weave.WovenMatrix(parts, rows, n_features, precision)
