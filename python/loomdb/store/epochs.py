"""An epoch's batches of a layout at a precision: the trainer's source.

No paper section.  The first batches train, the last ``validation_fraction`` of them validate.
Decoded batches are kept between epochs while they fit ``cache_mb`` (then ``bytes_read`` is 0
and ``cached`` true in the history): a format read at one precision reads the same bytes every
epoch, and an any-precision format is kept per precision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from loomdb.errors import LoomOptionError
from loomdb.seams import Batch
from loomdb.store.layout import Layout


def _held(batch: Batch) -> int:
    """What keeping a batch costs: its decoded payload when larger than its bytes read (pcr
    decodes a few kB of JPEG into a feature matrix)."""
    return max(batch.nbytes, int(getattr(batch.X, "nbytes", 0)))


class Epochs:
    def __init__(self, layout: Layout, validation_fraction: float, cache_bytes: int):
        self.layout = layout
        self.budget = cache_bytes
        self.cached: dict[int, list[Batch]] = {}
        n = layout.info.batches
        held = int(round(n * validation_fraction)) if validation_fraction else 0
        if validation_fraction and (held < 1 or held >= n):
            raise LoomOptionError(
                f"validation_fraction {validation_fraction} leaves no batch to "
                f"{'validate' if held < 1 else 'train'} on ({n} batches)",
                hint="use a smaller batch_size or a different validation_fraction",
            )
        self.train_stop = n - held

    def _key(self, precision: int) -> int:
        return precision if self.layout.fmt.any_precision else 0

    def train_batches(self, epoch: int, precision: int) -> Iterable[Batch]:
        kept = self.cached.get(self._key(precision))
        if kept is not None:
            return [dataclasses.replace(b, nbytes=0) for b in kept]
        batches = self.layout.batches(0, self.train_stop, precision)
        return self._keeping(batches, precision) if self.budget else batches

    def _keeping(self, batches: Iterable[Batch], precision: int) -> Iterator[Batch]:
        kept: list[Batch] | None = []
        size = sum(_held(b) for cached in self.cached.values() for b in cached)
        for batch in batches:
            size += _held(batch)
            if kept is not None and size <= self.budget:
                kept.append(batch)
            else:
                kept = None  # too large to keep: every epoch reads the layout
            yield batch
        if kept is not None:
            self.cached[self._key(precision)] = kept

    def validation_batches(self, precision: int) -> Iterable[Batch]:
        if self.train_stop >= self.layout.info.batches:
            return ()
        return self.layout.batches(self.train_stop, self.layout.info.batches, precision)
