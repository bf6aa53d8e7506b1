"""An epoch's batches of a layout at a precision: the trainer's source.

No paper section.  The first batches train, the last ``validation_fraction`` of them validate.
Decoded batches are kept between epochs while they fit ``cache_mb`` (then the history's
``bytes_read`` is 0): a format read at one precision reads the same bytes every epoch, and an
any-precision format is kept per precision.  An epoch found too large to keep is not tried again:
every later epoch would hold batches up to the budget only to drop them; one whose stored bytes
alone exceed the budget well is not tried at all.  The validation batches are kept the same way,
in what the training epoch leaves of the budget (it is read first).  An epoch at a higher
precision that does not fit lets go of those kept at lower ones (``_make_room``), unless its
batches so far project it above ``ALONE`` times the budget (it would not fit even alone, and
the lower ones would be let go for nothing).  An epoch too
large for the budget is kept on the backend's device instead when the backend has one
(``device``: the gpu backend's ``DeviceCache``): each minibatch is decoded there as it is read
and the host keeps a stand-in with the labels, within the device's own budget; again all or
nothing, and never with ``cache_mb`` 0 (every epoch reads, as asked).

In a grouped (SlimML) layout a minibatch is ``groups_per_batch`` consecutive groups.  When the
trainer passes ``choose``, it is asked, just before each minibatch is read, which of its groups
to read (SlimML's remover or a baseline, at the parameters of that moment); only those are
returned by the engine (one query per minibatch, by key) and decoded, and the batch says how
many rows and stored bytes were left out.  ``read_ahead`` > 1 asks for the groups of that many
minibatches at once, at the parameters of the first one's step, in one query — a departure from
SlimML's per-iteration evaluation (Algorithm 1) for engines where a query costs more than a
step (DuckDB: milliseconds); 1, the default, is the paper's.  Decoded groups are kept (per
group) within the same budget, so a warm epoch reads only groups it has not seen yet.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.errors import LoomOptionError
from loomdb.seams import Aggregates, Batch
from loomdb.store.grouped import groups_per_batch
from loomdb.store.layout import Layout

#: Given a minibatch's group ids: which of them to read (a mask) and a weight per group (or
#: None), the weight of a group's rows in the step.
Chooser = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]]
Key = tuple[str, int]  # a kept epoch: its part (train or validation) and precision key
#: An epoch whose batches so far project it above this many budgets lets nothing go to make
#: room: it would not fit alone (the margin allows for uneven batches, as ``_beyond_budget``'s).
ALONE = 1.25


def _held(batch: Batch) -> int:
    """What keeping a batch costs: its decoded payload when larger than its bytes read (pcr
    decodes a few kB of JPEG into a feature matrix)."""
    return max(batch.nbytes, int(getattr(batch.X, "nbytes", 0)))


@dataclasses.dataclass
class Kept:
    """The decoded epochs kept within the budget, by part (train, then validation) and
    precision key: shared by every train over one layout object with the same training
    batches and budget (``loom_tune``'s trials, ``Layout.kept``), so a trial after the first
    reads nothing they hold."""

    cached: dict[Key, list[Batch]] = dataclasses.field(default_factory=dict)
    sizes: dict[Key, int] = dataclasses.field(default_factory=dict)  # each one's cost (``_held``)
    held: int = 0  # what the kept epochs cost together
    too_large: set[Key] = dataclasses.field(default_factory=set)  # keys that did not fit
    # epochs kept on a backend's device (stand-ins), by device and key; keys that did not fit it
    on_device: dict[tuple[Any, Key], list[Batch]] = dataclasses.field(default_factory=dict)
    too_large_on_device: set[tuple[Any, Key]] = dataclasses.field(default_factory=set)


class Epochs:
    def __init__(
        self,
        layout: Layout,
        validation_fraction: float,
        cache_bytes: int,
        read_ahead: int = 1,
        device: Any = None,
    ):
        self.layout = layout
        self.read_ahead = read_ahead
        self.budget = cache_bytes
        self.device = device  # what keeps an epoch on the backend's device (``adopt``), or None
        self.kept_groups: dict[Key, dict[int, Batch]] = {}
        self.kept_size = 0
        self.per = groups_per_batch(layout.info)
        n = math.ceil(layout.info.batches / self.per)
        held = int(round(n * validation_fraction)) if validation_fraction else 0
        if validation_fraction and (held < 1 or held >= n):
            raise LoomOptionError(
                f"validation_fraction {validation_fraction} leaves no batch to "
                f"{'validate' if held < 1 else 'train'} on ({n} batches)",
                hint="use a smaller batch_size or a different validation_fraction",
            )
        self.train_stop = min((n - held) * self.per, layout.info.batches)
        self.kept: Kept = layout.kept.setdefault(("epochs", self.train_stop, self.budget), Kept())
        if self._beyond_budget():
            self.kept.too_large.add(("train", 0))

    def _beyond_budget(self) -> bool:
        """Whether an epoch cannot fit the budget, known before reading it: a format read whole
        holds at least the bytes it stores (``_held``), and its training batches store about
        their share of the layout's; a margin of 2 allows for uneven batches.  Such an epoch is
        never held, not even the first up to the budget (an any-precision format's bytes depend
        on the precision: it is tried)."""
        info = self.layout.info
        if self.layout.fmt.any_precision or not info.batches:
            return False
        return info.bytes * self.train_stop / info.batches > 2 * self.budget

    def keeps(self, precision: int) -> bool:
        """Whether this process keeps an epoch's training minibatches at ``precision`` once
        read: kept already, or none yet known too large for ``cache_mb``."""
        key = self._key(precision)
        return key in self.kept.cached or (self.budget > 0 and key not in self.kept.too_large)

    def validation_rows(self) -> int:
        """The rows of the validation batches."""
        info = self.layout.info
        if self.train_stop >= info.batches:
            return 0
        if self.layout.grouped:
            return int(self.layout.aggregates().rows[self.train_stop :].sum())
        return info.rows - self.train_stop * int(info.options["batch_size"])

    def _key(self, precision: int, part: str = "train") -> Key:
        """Where an epoch of ``part`` (train or validation) is kept: per precision for an
        any-precision format, which reads other bytes at each."""
        return part, precision if self.layout.fmt.any_precision else 0

    def aggregates(self) -> Aggregates | None:
        """The groups table of a grouped layout (None otherwise)."""
        return self.layout.aggregates() if self.layout.grouped else None

    def train_batches(
        self, epoch: int, precision: int, choose: Chooser | None = None
    ) -> Iterable[Batch]:
        if choose is not None:
            if not self.layout.grouped:
                raise LoomOptionError(
                    "skipping needs a layout laid out in groups",
                    hint='build the index with {"slimml": true}',
                )
            return self._chosen(precision, choose)
        return self._kept(0, self.train_stop, self._key(precision), precision)

    def _kept(self, start: int, stop: int, key: Key, precision: int) -> Iterable[Batch]:
        """Minibatches ``[start, stop)``: those kept under ``key``, else read (and kept while
        the budget holds them)."""
        kept = self.kept.cached.get(key)
        if kept is None:
            kept = self.kept.on_device.get((self.device, key))
        if kept is not None:
            return list(kept)  # kept with nbytes 0: nothing is read
        batches = self._minibatches(self.layout.batches(start, stop, precision))
        if not self.budget:
            return batches
        if key not in self.kept.too_large:
            return self._keeping(batches, key, self._count(start, stop))
        if self.device is not None and (self.device, key) not in self.kept.too_large_on_device:
            return self._adopting(batches, key, self._count(start, stop))
        return batches

    def _minibatches(self, units: Iterable[Batch]) -> Iterator[Batch]:
        """Consecutive stored units joined into the trainer's minibatches (as stored when a
        unit is a minibatch)."""
        if self.per == 1:
            yield from units
            return
        pending: list[Batch] = []
        for unit in units:
            pending.append(unit)
            if len(pending) == self.per:
                yield self._joined(pending)
                pending = []
        if pending:
            yield self._joined(pending)

    def _joined(self, parts: list[Batch]) -> Batch:
        return Batch(
            X=self.layout.fmt.stack([b.X for b in parts]),
            y=np.concatenate([b.y for b in parts]) if len(parts) > 1 else parts[0].y,
            number=parts[0].number,
            nbytes=sum(b.nbytes for b in parts),
        )

    def _count(self, start: int, stop: int) -> int:
        """How many minibatches stored units ``[start, stop)`` make."""
        return -(-(stop - start) // self.per)

    def _keeping(self, batches: Iterable[Batch], key: Key, count: int) -> Iterator[Batch]:
        kept: list[Batch] | None = []
        size = 0  # what this epoch's batches cost
        for seen, batch in enumerate(batches, 1):
            size += _held(batch)
            over = self.kept.held + size - self.budget
            if kept is not None and over > 0 and size * count / seen <= ALONE * self.budget:
                self._make_room(key, over)
            if kept is not None and self.kept.held + size <= self.budget:
                kept.append(dataclasses.replace(batch, nbytes=0))  # later epochs read nothing
            elif kept is not None:
                kept = None  # too large to keep: every epoch reads the layout
                self.kept.too_large.add(key)
            yield batch
        if kept is not None:
            self.kept.cached[key] = kept
            self.kept.sizes[key] = size
            self.kept.held += size

    def _make_room(self, key: Key, need: int) -> None:
        """Let go of epochs kept at lower precisions than ``key``'s, the lowest first, until
        ``need`` bytes are free or none is left: a train's precision only rises (the adaptive
        schedules), so they serve it no more, and read again (a tune's next trial) they cost
        fewer bytes than the epoch that needs their room."""
        for old in sorted((k for k in self.kept.cached if k[1] < key[1]), key=lambda k: k[1]):
            if need <= 0:
                return
            del self.kept.cached[old]
            freed = self.kept.sizes.pop(old)
            self.kept.held -= freed
            need -= freed

    def _adopting(self, batches: Iterable[Batch], key: Key, count: int) -> Iterator[Batch]:
        """``batches``, each kept on the device as it is read (the stand-in trains in its
        place) while the device holds them all; later epochs read nothing."""
        adopted: list[Batch] = []
        size = 0  # what this epoch's batches cost the device
        rest = iter(batches)
        for seen, batch in enumerate(rest, 1):
            size += self.device.cost(batch)
            may_fit = size * count / seen <= ALONE * self.device.budget
            resident = self.device.adopt(batch)
            while resident is None and may_fit and self._free_device_below(key):
                resident = self.device.adopt(batch)
            if resident is None:  # too large for the device: every epoch reads
                self.kept.too_large_on_device.add((self.device, key))
                adopted.clear()  # the stand-ins already made leave with this epoch
                yield batch
                yield from rest
                return
            adopted.append(dataclasses.replace(resident, nbytes=0))  # later epochs read nothing
            yield resident  # this epoch read its bytes
        self.kept.on_device[(self.device, key)] = adopted

    def _free_device_below(self, key: Key) -> bool:
        """Let go of the device's epoch kept at the lowest precision below ``key``'s (as
        ``_make_room`` does on the host; its device memory leaves with its stand-ins); whether
        there was one."""
        lower = [k for k in self.kept.on_device if k[0] is self.device and k[1][1] < key[1]]
        if lower:
            del self.kept.on_device[min(lower, key=lambda k: k[1][1])]
        return bool(lower)

    def _chosen(self, precision: int, choose: Chooser) -> Iterator[Batch]:
        points = self.layout.aggregates()
        parts = self.layout.fmt.parts(precision)
        span = self.per * self.read_ahead
        for start in range(0, self.train_stop, span):
            stops = range(start, min(start + span, self.train_stop), self.per)
            minibatches = [np.arange(a, min(a + self.per, self.train_stop)) for a in stops]
            chosen = [choose(ids) for ids in minibatches]
            wanted = np.concatenate([ids[mask] for ids, (mask, _) in zip(minibatches, chosen)])
            groups = dict(zip(wanted.tolist(), self._groups(wanted, precision)))
            for ids, (mask, weights) in zip(minibatches, chosen):
                read, removed = ids[mask], ids[~mask]
                kept = [groups[i] for i in read.tolist()]
                batch = self._joined(kept) if kept else _empty(self.layout.info.columns)
                batch.removed = int(points.rows[removed].sum())
                batch.removed_bytes = points.bytes_of(removed, parts)
                if weights is not None and len(read):
                    batch.weights = np.repeat(weights[mask], points.rows[read])
                yield batch

    def _groups(self, ids: np.ndarray, precision: int) -> list[Batch]:
        """Groups ``ids`` from the cache or, for those not in it, from the layout."""
        cache = self.kept_groups.setdefault(self._key(precision), {})
        missing = [int(i) for i in ids if int(i) not in cache]
        fresh = {b.number: b for b in self.layout.groups(missing, precision)} if missing else {}
        for number, batch in fresh.items():
            if self.budget and self.kept_size + batch.nbytes <= self.budget:
                cache[number] = batch
                self.kept_size += batch.nbytes
        return [
            fresh[int(i)] if int(i) in fresh else dataclasses.replace(cache[int(i)], nbytes=0)
            for i in ids
        ]

    def validation_batches(self, precision: int) -> Iterable[Batch]:
        if self.train_stop >= self.layout.info.batches:
            return ()
        key = self._key(precision, "validation")  # kept after the training epoch, if it fits
        return self._kept(self.train_stop, self.layout.info.batches, key, precision)


def _empty(columns: list[str]) -> Batch:
    """A minibatch whose every group was removed: nothing read, nothing to step on."""
    return Batch(X=np.zeros((0, len(columns))), y=np.zeros(0))
