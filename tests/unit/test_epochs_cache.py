"""The epoch cache: kept while the epoch fits ``cache_mb``, never tried again once it did not;
an epoch too large for it kept on a backend's device instead (the gpu backend's cache, on
numpy)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from loomdb.accel.device_arrays import NumpyDevice
from loomdb.accel.device_cache import DeviceCache, Resident
from loomdb.errors import LoomError
from loomdb.seams import Batch
from loomdb.store.epochs import Epochs


class CountingLayout:
    """Ten 100-row minibatches of 8 kB each; counts how often the layout is read."""

    grouped = False

    def __init__(self) -> None:
        self.info = SimpleNamespace(
            batches=10, bytes=80_000, stats={}, rows=1000, options={"batch_size": 100}
        )
        self.fmt = SimpleNamespace(any_precision=False)
        self.kept: dict = {}
        self.reads = 0

    def batches(self, start: int, stop: int, precision: int):
        self.reads += 1
        for i in range(start, stop):
            yield Batch(X=np.full((100, 10), float(i)), y=np.zeros(100), number=i, nbytes=8000)


def _epochs(budget: int) -> tuple[CountingLayout, Epochs]:
    layout = CountingLayout()
    return layout, Epochs(layout, 0.0, budget)  # type: ignore[arg-type]


def _first_is_released(batches) -> bool:
    """Whether an epoch lets go of its first batch once the trainer has moved past it (the
    first two batches are taken from ``batches``)."""
    held = weakref.ref(next(batches).X)
    next(batches)
    gc.collect()
    return held() is None


def test_an_epoch_that_fits_is_read_once():
    layout, epochs = _epochs(10 * 8000)
    for _ in range(3):
        got = list(epochs.train_batches(0, 32))
        assert [int(b.X[0, 0]) for b in got] == list(range(10))
    assert layout.reads == 1
    assert [b.nbytes for b in epochs.train_batches(0, 32)] == [0] * 10  # served from the cache


def test_an_epoch_too_large_is_read_every_time_and_not_held_again():
    layout, epochs = _epochs(5 * 8000)
    first = epochs.train_batches(0, 32)
    assert [int(b.X[0, 0]) for b in first] == list(range(10))
    assert epochs.kept.too_large == {("train", 0)}
    second = iter(epochs.train_batches(0, 32))
    assert _first_is_released(second)  # the second epoch holds no batch it already handed over
    assert [b.nbytes for b in second] == [8000] * 8  # read again, every batch
    assert layout.reads == 2 and epochs.kept.cached == {}


def test_an_epoch_whose_stored_bytes_exceed_twice_the_budget_is_never_held():
    layout, epochs = _epochs(3 * 8000)  # 80 kB stored against a budget of 24 kB
    assert epochs.kept.too_large == {("train", 0)}  # known before reading
    first = iter(epochs.train_batches(0, 32))
    assert _first_is_released(first)  # not even the first epoch keeps a batch up to the budget
    assert [b.nbytes for b in first] == [8000] * 8 and epochs.kept.cached == {}


def test_trains_over_one_layout_share_the_kept_epoch():
    """A tune's trials train over one layout object: a trial after the first reads nothing
    that the first kept, and a train with another budget or other training batches keeps its
    own."""
    layout, first = _epochs(10 * 8000)
    list(first.train_batches(0, 32))
    second = Epochs(layout, 0.0, 10 * 8000)  # type: ignore[arg-type]
    got = list(second.train_batches(0, 32))
    assert layout.reads == 1 and [b.nbytes for b in got] == [0] * 10
    assert [int(b.X[0, 0]) for b in got] == list(range(10))
    for other in (Epochs(layout, 0.0, 20 * 8000), Epochs(layout, 0.2, 10 * 8000)):  # type: ignore[arg-type]
        assert [b.nbytes for b in other.train_batches(0, 32)][0] == 8000
    assert layout.reads == 3


def test_the_validation_batches_are_kept_in_what_the_training_epoch_leaves():
    layout = CountingLayout()
    epochs = Epochs(layout, 0.2, 10 * 8000)  # type: ignore[arg-type]
    for _ in range(3):
        assert len(list(epochs.train_batches(0, 32))) == 8
        assert [int(b.X[0, 0]) for b in epochs.validation_batches(32)] == [8, 9]
    assert layout.reads == 2  # each part read once
    tight = CountingLayout()
    epochs = Epochs(tight, 0.2, 9 * 8000)  # type: ignore[arg-type]
    for _ in range(3):
        list(epochs.train_batches(0, 32))
        assert [b.nbytes for b in epochs.validation_batches(32)] == [8000, 8000]
    assert tight.reads == 1 + 3  # the training epoch kept, validation read every time


def _on_device(budget: int, device_budget: int) -> tuple[CountingLayout, Epochs, DeviceCache]:
    layout = CountingLayout()
    cache = DeviceCache(NumpyDevice(), budget=device_budget)
    return layout, Epochs(layout, 0.0, budget, device=cache), cache  # type: ignore[arg-type]


def test_an_epoch_too_large_for_the_host_is_kept_on_the_device():
    """Each minibatch decoded on the device as it is read (8 kB each, the stand-ins holding
    none of it on the host); from then on nothing is read and the device's matrices train."""
    layout, epochs, cache = _on_device(3 * 8000, 10 * 8000)
    assert epochs.kept.too_large == {("train", 0)}  # 80 kB stored: beyond twice 24 kB
    first = list(epochs.train_batches(0, 32))
    assert [b.nbytes for b in first] == [8000] * 10  # read, and adopted as they were
    assert all(isinstance(b.X, Resident) for b in first) and cache.held == 10 * 8000
    for _ in range(2):
        again = list(epochs.train_batches(0, 32))
        assert [b.nbytes for b in again] == [0] * 10 and layout.reads == 1
        assert [int(cache.matrix(b.X)[0, 0]) for b in again] == list(range(10))
    assert epochs.kept.cached == {} and epochs.kept.held == 0  # the host keeps no payload
    with pytest.raises(LoomError, match="kept on the gpu backend's device"):
        again[0].X.toarray()  # only the device reads a stand-in
    del first, again, epochs, layout
    gc.collect()
    assert cache.held == 0 and not cache.entries  # the device's entries leave with the layout


def test_an_epoch_the_device_cannot_hold_is_read_every_time_and_not_tried_again():
    layout, epochs, cache = _on_device(3 * 8000, 6 * 8000)
    first = list(epochs.train_batches(0, 32))
    assert [type(b.X) for b in first] == [Resident] * 6 + [np.ndarray] * 4
    assert [int(cache.matrix(b.X)[0, 0]) for b in first] == list(range(10))
    del first
    gc.collect()
    assert cache.held == 0  # the stand-ins made before it was full went with the epoch
    for _ in range(2):
        again = list(epochs.train_batches(0, 32))
        assert [b.nbytes for b in again] == [8000] * 10
        assert all(isinstance(b.X, np.ndarray) for b in again)  # not adopted again
    assert layout.reads == 3


def test_an_epoch_the_host_keeps_stays_on_the_host_and_cache_mb_0_keeps_nothing():
    layout, epochs, cache = _on_device(10 * 8000, 10 * 8000)
    for _ in range(2):
        assert all(isinstance(b.X, np.ndarray) for b in epochs.train_batches(0, 32))
    assert layout.reads == 1 and cache.held == 0
    layout, epochs, cache = _on_device(0, 10 * 8000)
    for _ in range(2):
        assert [b.nbytes for b in epochs.train_batches(0, 32)] == [8000] * 10
    assert layout.reads == 2 and cache.held == 0


def test_another_device_or_none_does_not_see_the_stand_ins():
    """Epochs kept on one device are that device's: a train over the same layout on another
    backend (a tune's trials may differ in backend) reads the layout."""
    layout, epochs, cache = _on_device(3 * 8000, 10 * 8000)
    list(epochs.train_batches(0, 32))
    other = DeviceCache(NumpyDevice(), budget=10 * 8000)
    for device in (None, other):
        plain = Epochs(layout, 0.0, 3 * 8000, device=device)  # type: ignore[arg-type]
        assert [b.nbytes for b in plain.train_batches(0, 32)] == [8000] * 10
    assert all(isinstance(b.X, Resident) for b in epochs.train_batches(0, 32))
    assert layout.reads == 3


def test_an_epoch_the_host_found_too_large_is_adopted_by_the_device_at_the_next():
    layout, epochs, cache = _on_device(5 * 8000, 10 * 8000)  # 80 kB: tried on the host first
    assert all(isinstance(b.X, np.ndarray) for b in epochs.train_batches(0, 32))
    assert epochs.kept.too_large == {("train", 0)}
    adopted = list(epochs.train_batches(0, 32))
    assert all(isinstance(b.X, Resident) for b in adopted)
    assert [b.nbytes for b in adopted] == [8000] * 10
    assert [b.nbytes for b in epochs.train_batches(0, 32)] == [0] * 10 and layout.reads == 2


class PrecisionLayout(CountingLayout):
    """An any-precision layout: ten minibatches, at s bits 1 kB stored per bit and a 100 × s
    matrix (800·s bytes decoded)."""

    def __init__(self) -> None:
        super().__init__()
        self.fmt = SimpleNamespace(any_precision=True)

    def batches(self, start: int, stop: int, precision: int):
        self.reads += 1
        for i in range(start, stop):
            X = np.full((100, precision), float(i))
            yield Batch(X=X, y=np.zeros(100), number=i, nbytes=1000 * precision)


def test_an_epoch_at_a_higher_precision_lets_go_of_lower_ones_that_leave_it_no_room():
    """Budget 80 kB: 2 and 3 bits (20 + 30 kB) fit together, 4 bits (40 kB) fits beside 3
    only once 2 is let go, 8 bits (80 kB) once both 3 and 4 are; each kept epoch then reads
    nothing."""
    layout = PrecisionLayout()
    epochs = Epochs(layout, 0.0, 80_000)  # type: ignore[arg-type]
    for bits, kept in ((2, [2]), (3, [2, 3]), (4, [3, 4]), (8, [8])):
        for _ in range(2):
            list(epochs.train_batches(0, bits))
        assert sorted(k[1] for k in epochs.kept.cached) == kept
        assert epochs.kept.held == sum(epochs.kept.sizes.values()) == 10_000 * sum(kept)
        assert [b.nbytes for b in epochs.train_batches(0, bits)] == [0] * 10
    assert layout.reads == 4 and not epochs.kept.too_large
    list(epochs.train_batches(0, 2))  # a tune's next trial at 2 bits: read again, no room
    assert epochs.kept.too_large == {("train", 2)} and sorted(epochs.kept.cached) == [("train", 8)]


def test_the_device_lets_go_of_lower_precisions_as_the_host_does():
    """A host budget too small for any epoch; a device of 64 kB: 2 and 3 bits (16 + 24 kB)
    kept there together, 4 bits (32 kB) beside 3 once 2 is let go."""
    layout = PrecisionLayout()
    cache = DeviceCache(NumpyDevice(), budget=64_000)
    epochs = Epochs(layout, 0.0, 1, device=cache)  # type: ignore[arg-type]
    for bits, kept in ((2, [2]), (3, [2, 3]), (4, [3, 4])):
        for _ in range(3):  # the host tries and gives up, the device adopts, then nothing read
            got = list(epochs.train_batches(0, bits))
        assert [b.nbytes for b in got] == [0] * 10
        assert sorted(k[1][1] for k in epochs.kept.on_device) == kept
        assert cache.held == 8_000 * sum(kept)
    assert layout.reads == 3 * 2


def test_an_epoch_that_would_not_fit_alone_lets_nothing_go():
    """Budget 80 kB, 2 and 3 bits kept (50 kB): 16 bits (160 kB) would not fit even alone, so
    2 and 3 stay kept and read nothing; on the device (64 kB: 2 and 3 take 40 kB) too."""
    layout = PrecisionLayout()
    epochs = Epochs(layout, 0.0, 80_000)  # type: ignore[arg-type]
    for bits in (2, 3, 16, 16):
        list(epochs.train_batches(0, bits))
    assert sorted(k[1] for k in epochs.kept.cached) == [2, 3]
    assert ("train", 16) in epochs.kept.too_large
    assert [b.nbytes for b in epochs.train_batches(0, 2)] == [0] * 10

    layout = PrecisionLayout()
    cache = DeviceCache(NumpyDevice(), budget=64_000)
    epochs = Epochs(layout, 0.0, 1, device=cache)  # type: ignore[arg-type]
    for bits in (2, 2, 3, 3, 16, 16):
        list(epochs.train_batches(0, bits))
    assert sorted(k[1][1] for k in epochs.kept.on_device) == [2, 3]
    assert cache.held == 8_000 * 5
    assert [b.nbytes for b in epochs.train_batches(0, 3)] == [0] * 10
