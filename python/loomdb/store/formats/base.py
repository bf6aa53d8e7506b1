"""Shared machinery of the minibatch-per-row formats (dense, toc).

Storage table: ``(batch integer, rows integer, x bytes, y bytes)``, one row per minibatch; the
rows were shuffled once when the table was laid out (Bismarck), so reading ``ORDER BY batch``
gives the same order every epoch.  A subclass says how a batch's features become bytes
(``encode``) and how stored bytes become a matrix-like payload (``payload``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.batch import Batch
from loomdb.codecs import dense
from loomdb.errors import LoomDataError
from loomdb.store.db import Database


def rebatch(chunks: Iterable[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """Re-cut a stream of row chunks into chunks of exactly ``size`` rows (the last shorter)."""
    pending: list[np.ndarray] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk)
        held += len(chunk)
        while held >= size:
            allrows = np.concatenate(pending) if len(pending) > 1 else pending[0]
            yield allrows[:size]
            rest = allrows[size:]
            pending, held = ([rest] if len(rest) else []), len(rest)
    if held:
        yield np.concatenate(pending) if len(pending) > 1 else pending[0]


PAGE = 32  # batches fetched per query: bounded memory, no result held open across batches


class StoredFormat:
    """What every format shares: its storage table and the checked minibatches it writes."""

    columns: list[tuple[str, str]] = []

    def create(self, db: Database, table: str) -> None:
        body = ", ".join(f"{c} {db.type(t)}" for c, t in self.columns)
        db.execute(f"CREATE TABLE {table} ({body})")

    @staticmethod
    def minibatches(chunks: Iterable[np.ndarray], size: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(number, rows)`` of ``size`` rows each; NaN or infinity anywhere is refused."""
        for number, rows in enumerate(rebatch(chunks, size)):
            if not np.isfinite(rows).all():
                raise LoomDataError("the source holds NaN or infinite values")
            yield number, rows

    @staticmethod
    def pages(
        db: Database, sql: str, first: int, stop: int | None, size: int, *extra: Any
    ) -> Iterator[list[tuple]]:
        """Rows of ``sql`` — whose first column is the batch number and whose $1 and $2 bound
        it — ``size`` batches per query: bounded memory, no result held open across batches."""
        stop = stop if stop is not None else 2**31 - 1
        for start in range(first, stop, size):
            rows = db.query(sql, [start, min(start + size, stop), *extra])
            if rows:
                yield rows
            if len({r[0] for r in rows}) < size:
                break


class RowBatchFormat(StoredFormat):
    name = "rows"
    columns = [("batch", "integer"), ("rows", "integer"), ("x", "bytes"), ("y", "bytes")]

    def encode(self, X: np.ndarray, options: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def payload(self, blob: bytes, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def write(
        self, db: Database, table: str, chunks: Iterable[np.ndarray], options: dict[str, Any]
    ) -> dict[str, int]:
        batches = nbytes = 0
        for number, rows in self.minibatches(chunks, options["batch_size"]):
            x = self.encode(rows[:, :-1], options)
            y = dense.encode(rows[:, -1:])
            db.execute(f"INSERT INTO {table} VALUES ($1, $2, $3, $4)", [number, len(rows), x, y])
            batches += 1
            nbytes += len(x) + len(y)
        return {"batches": batches, "bytes": nbytes}

    def batches(
        self,
        db: Database,
        table: str,
        options: dict[str, Any],
        first: int = 0,
        stop: int | None = None,
        **_: Any,
    ) -> Iterator[Batch]:
        sql = (
            f"SELECT batch, rows, x, y FROM {table} WHERE batch >= $1 AND batch < $2 ORDER BY batch"
        )
        for page in self.pages(db, sql, first, stop, PAGE):
            for number, _, x, y in page:
                yield Batch(
                    X=self.payload(x, options),
                    y=dense.decode(y)[:, 0],
                    number=number,
                    nbytes=len(x) + len(y),
                )
