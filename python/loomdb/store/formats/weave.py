"""The ``mlweaving`` format: an any-precision bit-plane index (MLWeaving §4.3, DoppioDB §3).

Features are min–max normalised with the column statistics computed in SQL, quantised to 32
bits and woven into bit planes once.  Storage, one row per (block, plane)::

    (block integer, plane integer, rows integer, bits bytes)

``plane`` 0…31 holds bit plane p (MSB first) of every (8-sample group, 64-feature chunk) of the
block, in the hardware's line order; ``plane`` −1 holds the block's labels as float32 (Eq. 4
counts 32 bits per label).  Reading precision s is ``WHERE plane < s``, so the bytes an epoch
reads are exactly Eq. 4's N·(s·⌈M/64⌉·64 + 32)/8: precision is chosen at read time from the one
stored index, never by keeping a copy per precision.

A block is one synchronous minibatch, so ``batch_size`` must be a multiple of 8 (the engine's
working model is updated every 8 samples).  Batches carry values already in [0, 1): the model is
trained in that space and stored with the index's min–max scaling, so it predicts on raw rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.batch import Batch
from loomdb.codecs import weave
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.learn.precision import precision_for
from loomdb.store.db import Database
from loomdb.store.formats.base import StoredFormat

LABELS = -1
PAGE = 64  # blocks fetched per query (at most 64 · s planes held at once)


class WeaveFormat(StoredFormat):
    name = "mlweaving"
    prescaled = "minmax"
    default_batch_size = 256
    columns = [("block", "integer"), ("plane", "integer"), ("rows", "integer"), ("bits", "bytes")]

    def write(
        self, db: Database, table: str, chunks: Iterable[np.ndarray], options: dict[str, Any]
    ) -> dict[str, int]:
        size = options["batch_size"]
        if size % 8:
            raise LoomOptionError(
                f"an mlweaving index needs a batch_size that is a multiple of 8; got {size}",
                hint="the engine updates its working model every 8 samples: use 8, 16, … 256",
            )
        stats = options["profile"].stats
        blocks = nbytes = 0
        for number, rows in self.minibatches(chunks, size):
            U = weave.quantize(rows[:, :-1], stats["min"], stats["max"])
            planes = weave.weave_block(U)
            labels = rows[:, -1].astype("<f4").tobytes()
            for plane, bits in [(LABELS, labels), *enumerate(planes)]:
                data = bytes(bits)
                db.execute(
                    f"INSERT INTO {table} VALUES ($1, $2, $3, $4)",
                    [number, plane, len(rows), data],
                )
                nbytes += len(data)
            blocks += 1
        return {"batches": blocks, "bytes": nbytes}

    def batches(
        self,
        db: Database,
        table: str,
        options: dict[str, Any],
        first: int = 0,
        stop: int | None = None,
        epoch: int = 0,
        history: list[dict[str, Any]] | None = None,
        train_options: dict[str, Any] | None = None,
        n_features: int | None = None,
        **_: Any,
    ) -> Iterator[Batch]:
        setting = (train_options or {}).get("precision")
        s = precision_for(setting, epoch, history or [])
        m = int(n_features or options["n_features"])
        sql = (
            f"SELECT block, plane, rows, bits FROM {table} WHERE block >= $1 AND "
            "block < $2 AND plane < $3 ORDER BY block, plane"
        )
        for rows in self.pages(db, sql, first, stop, PAGE, s):
            for block in _group(rows):
                yield _batch(block, m, s)


def _group(rows: list[tuple]) -> Iterator[list[tuple]]:
    current: list[tuple] = []
    for row in rows:
        if current and row[0] != current[0][0]:
            yield current
            current = []
        current.append(row)
    if current:
        yield current


def _batch(block: list[tuple], m: int, s: int) -> Batch:
    number, _, n, labels = block[0]
    planes = [bytes(r[3]) for r in block[1:]]
    if block[0][1] != LABELS or len(planes) != s:
        raise LoomFormatError(
            f"mlweaving block {number} is incomplete: {len(planes)} of {s} planes",
            hint="rebuild the index with loom_reindex",
        )
    y = np.frombuffer(bytes(labels), dtype="<f4").astype(np.float64)
    X = weave.WovenMatrix(planes, n, m, s)
    nbytes = len(labels) + sum(len(p) for p in planes)
    return Batch(X=X, y=y, number=number, nbytes=nbytes, meta={"precision": s})
