"""The driver's epoch of a distributed train (SketchML §4.1's loop), run by ``learn/trainer.py``
as a backend that owns the epoch (``run_epoch``): the trainer still keeps the history,
validates (on the driver), stops on ``tol`` and guards.

Each step: the driver sends each worker the model at the columns its share holds
(``messages``), the workers compute and encode their gradients (``worker.compute``), the
driver decodes and sums them in block order, adds what only it knows — the standardisation's
scale and shift, L2 over the whole model — and applies the optimiser (Adam by default) and the
L1 step: the trainer's step 3–4 (``learn/trainer.py``) on the summed gradient.  With
``compress: none`` the sum is the trainer's gradient of the step's minibatch up to the order
of additions, so a run on any number of workers equals ``inprocess`` on the same steps (1e-9).

Worker failure: a step whose worker went away is retried after its minibatches are handed to
the workers left (read again from the layout, or by the workers with ``dsn``); the model is
only updated once every share of a step has arrived, so nothing is half-applied.  After
``MAX_RETRIES`` losses in one step, or with no worker left, the train fails (and the caller's
transaction stores nothing).
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.accel.cpu import CpuBackend
from loomdb.distributed import messages, worker
from loomdb.distributed.cluster import Calls, Lost, open_workers
from loomdb.distributed.options import Distributed
from loomdb.distributed.plan import Assignment, StepPlan, ranges
from loomdb.errors import LoomStateError
from loomdb.learn.optimizers import OPTIMIZERS, soft_threshold
from loomdb.learn.problem import Problem
from loomdb.learn.scaling import Scaling
from loomdb.learn.trainer import Diverged
from loomdb.seams import Batch, EpochStep
from loomdb.store import sparse
from loomdb.store.storage import Buffer, Stored

COUNTED = ("bytes_to_driver", "bytes_to_workers", "gradient_bytes", "gradient_raw_bytes")
MAX_RETRIES = 3  # worker losses survived within one step
LOAD_BYTES = 8 << 20  # stored bytes sent to a worker per message while partitioning


class Runner(CpuBackend):
    """A distributed train's epochs; ``margins``/``gradient`` (validation) run here."""

    def __init__(
        self,
        settings: Distributed,
        laid: Any,
        train_batches: int,
        problem: Problem,
        precision: int,
        kind: str,
        optimizer: str,
        l1: float,
        check: Callable[[], None],
    ):
        self.settings, self.laid, self.check = settings, laid, check
        self.problem, self.optimizer_name, self.l1 = problem, optimizer, l1
        self.precision, self.kind = precision, kind
        self.key = uuid.uuid4().hex
        self.workers: Any = None
        self.m = len(problem.scaling.scale)  # the model's rows (an image's pixels)
        self.k = problem.k
        self.rows: dict[int, int] = {}
        self.cols: dict[int, np.ndarray] = {}
        self.counts = dict.fromkeys(COUNTED + ("partition_bytes",), 0)
        self.partitioned = 0  # stored bytes sent to (or read by) the workers, over the train
        self.started = 0
        self.lost: list[str] = []
        self.retries = 0
        self.train_batches = train_batches
        self.optimizer: Any = None
        self.widest, self.step_no = 0, 0

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Runner:
        self.workers = open_workers(self.settings.cluster, self.settings.step_timeout_s)
        try:
            shares = self.settings.step_batches or len(self.workers.workers)
            self.plan = StepPlan(self.train_batches, shares)
            self.live = list(self.workers.workers)
            self.started = len(self.live)
            self.assign = Assignment(self.plan, self.live)
            try:
                self._load({w: self.assign.held_by(w) for w in self.live})
            except Lost as e:  # a worker went away while partitioning: its share moves
                self.retries += 1
                self._survive(e)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.workers is None:
            return
        workers, self.workers = self.workers, None
        try:
            if workers.kind == "inprocess" or workers.cluster is None:  # a cluster we keep
                gone = set(self.lost) | getattr(workers, "hung", set())  # not waited on again
                alive = [w for w in workers.workers if w not in gone]
                workers.map({w: (worker.drop, (self.key,)) for w in alive}, lambda: None)
        except Exception:
            pass  # best effort: a shared cluster forgets a train's partition when it restarts
        finally:
            workers.close()

    # -- partitioning ----------------------------------------------------------------------

    def _spec(self) -> worker.WorkSpec:
        p = self.problem
        targets = Problem([], Scaling("none", np.zeros(0), np.zeros(0)), p.classes, p.class_weights)
        return worker.WorkSpec(
            self.laid.fmt, sparse.feature_count(self.laid.info), self.precision, self.kind,
            targets, self.settings.compress, self.settings.compress_model, self.m,
        )  # fmt: skip

    def _load(self, numbers: dict[str, list[int]]) -> None:
        """Put minibatches ``numbers`` (by worker) onto the workers; keep rows and columns."""
        spec = self._spec()
        calls: Calls
        if self.settings.dsn:
            info, fmt = self.laid.info, self.laid.fmt
            reader = {
                "relation": _storage_relation(info.name), "index": info.name, "uid": info.uid,
                "version": fmt.version, "batch_bytes": info.bytes // max(info.batches, 1),
            }  # fmt: skip
            calls = {
                w: (worker.load_from, (self.key, spec, self.settings.dsn, reader, ranges(nums)))
                for w, nums in numbers.items()
                if nums
            }
            self._took(self.workers.map(calls, self.check))
            return
        queues = {w: self._chunks(nums) for w, nums in numbers.items() if nums}
        while queues:
            calls = {}
            for w in list(queues):
                chunk = next(queues[w], None)
                if chunk is None:
                    del queues[w]
                else:
                    calls[w] = (worker.load, (self.key, spec, chunk))
            if calls:
                self._took(self.workers.map(calls, self.check))

    def _chunks(self, numbers: list[int]) -> Iterator[list]:
        parts = self.laid.fmt.parts(self.precision)
        chunk: list = []
        size = 0
        for first, stop in ranges(numbers):
            for stored in self.laid.read_stored(first, stop, parts):
                chunk.append(shippable(stored))
                size += stored.nbytes
                if size >= LOAD_BYTES:
                    yield chunk
                    chunk, size = [], 0
        if chunk:
            yield chunk

    def _took(self, results: dict[str, dict[int, tuple[int, np.ndarray, int]]]) -> None:
        for got in results.values():
            for number, (rows, cols, nbytes) in got.items():
                self.rows[number] = int(rows)
                self.cols[number] = np.asarray(cols, dtype=np.int64)
                self.counts["partition_bytes"] += nbytes
                self.partitioned += nbytes

    def _recover(self, lost: list[str]) -> None:
        self.lost += [w for w in lost if w not in self.lost]
        self.live = [w for w in self.live if w not in self.lost]
        if not self.live:
            raise LoomStateError(
                f"every worker of cluster '{self.settings.cluster.text}' was lost; the train "
                "stopped and nothing was stored",
                hint="check the workers' memory and logs, then train again",
            )
        self._load(self.assign.reassign(self.lost, self.live))

    # -- the trainer's seam ----------------------------------------------------------------

    def begin(self, W: np.ndarray, b: np.ndarray) -> None:
        """A fresh start of training (the first, or after the guard's restart): the kept
        run's history and the report count its own messages, and its first epoch the
        partition (sent once, kept on the workers)."""
        self.optimizer = OPTIMIZERS[self.optimizer_name](W.shape)
        self.widest, self.step_no = 0, 0
        self.counts.update(dict.fromkeys(COUNTED, 0), partition_bytes=self.partitioned)

    def run_epoch(
        self, batches: Iterable[Batch], W: np.ndarray, b: np.ndarray, step: EpochStep
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """One epoch of steps; ``batches`` is not read (the workers hold the minibatches)."""
        if self.optimizer is None:
            self.begin(W, b)
        totals = {"loss": 0.0, "rows": 0, "bytes": self.counts["partition_bytes"]}
        self.counts["partition_bytes"] = 0  # reported with the first epoch's bytes read
        tally: dict[str, Any] = {
            **dict.fromkeys(COUNTED, 0), "steps": 0, "messages": 0, "worker_s": 0.0,
            "driver_s": 0.0,
        }  # fmt: skip
        for s in range(self.plan.steps):
            self._step(self.plan.step(s), W, b, step, totals, tally)
        tally["workers"] = len(self.live)
        tally["retries"] = self.retries
        tally["compression_ratio"] = ratio(tally["gradient_raw_bytes"], tally["gradient_bytes"])
        for name in COUNTED:
            self.counts[name] += tally[name]
        return W, b, {**totals, **tally}

    def _step(
        self,
        batches: list[int],
        W: np.ndarray,
        b: np.ndarray,
        step: EpochStep,
        totals: dict[str, Any],
        tally: dict[str, Any],
    ) -> None:
        self.check()
        started = time.perf_counter()
        rows = sum(self.rows[n] for n in batches)
        self.widest = max(self.widest, rows)
        share = rows / self.widest  # 1 but for a short step (the trainer's weighting)
        scaling = self.problem.scaling
        Weff = W * scaling.scale[:, None]
        offsets = b - scaling.shift @ Weff
        seed = self.step_no & 0xFFFFFFFF
        self.step_no += 1
        groups, down, results, sent = self._gather(batches, Weff, offsets, seed)
        back = time.perf_counter()
        gW, gb, loss, got_rows, sizes, slowest = self._sum(groups, results)
        gW = self.problem.scaling.scale[:, None] * gW
        gW += (step.l2 * share) * W
        if not step.fit_intercept:
            gb = np.zeros_like(gb)
        self.optimizer.step(W, b, gW, gb, step.lr)
        if self.l1:
            soft_threshold(W, step.lr * self.l1)
        if not np.isfinite(W).all():
            raise Diverged(f"the model became non-finite at lr {step.lr:g}")
        totals["loss"] += loss
        totals["rows"] += got_rows
        for name, n in zip(("bytes_to_driver", "gradient_bytes", "gradient_raw_bytes"), sizes):
            tally[name] += n
        tally["bytes_to_workers"] += sum(len(d) for d in down.values())
        tally["steps"] += 1
        tally["messages"] += 2 * len(groups)
        tally["worker_s"] += slowest
        tally["driver_s"] += (sent - started) + (time.perf_counter() - back)

    def _gather(self, batches: list[int], Weff: np.ndarray, offsets: np.ndarray, seed: int):
        """A step's shares computed by the workers holding them, retried on the workers left
        when one is lost: (groups, the models sent down, the results, when they were sent)."""
        for _ in range(MAX_RETRIES + 1):
            groups = self.assign.shares(batches)
            down = {w: self._down(Weff, offsets, nums, seed) for w, nums in groups.items()}
            calls = {
                w: (worker.compute, (self.key, nums, down[w], _seed(seed, nums[0])))
                for w, nums in groups.items()
            }
            sent = time.perf_counter()
            try:
                results = self.workers.map(calls, self.check)
            except Lost as e:
                self.retries += 1
                self._survive(e)
                continue
            if any(up is worker.DIVERGED for up, _ in results.values()):
                raise Diverged("the gradient became non-finite on a worker")
            return groups, down, results, sent
        raise LoomStateError(
            f"cluster '{self.settings.cluster.text}' lost workers {MAX_RETRIES + 1} times "
            "in one step; the train stopped and nothing was stored",
            hint="check the workers' memory and logs, then train again",
        )

    def _survive(self, lost: Lost) -> None:
        """Hand a lost worker's minibatches to those left (losing more on the way is lost
        again: the caller's retry loop counts it)."""
        pending = list(lost.workers)
        for _ in range(MAX_RETRIES + 1):
            try:
                self._recover(pending)
                return
            except Lost as again:
                self.retries += 1
                pending = list(again.workers)
        raise LoomStateError(
            f"cluster '{self.settings.cluster.text}' kept losing workers while recovering; "
            "the train stopped and nothing was stored",
            hint="check the workers' memory and logs, then train again",
        )

    def _down(self, Weff: np.ndarray, offsets: np.ndarray, nums: list[int], seed: int) -> bytes:
        cols = self._columns(nums)
        return messages.pack_model(
            Weff[cols], cols, offsets, self.widest, self.settings.compress_model, seed
        )

    def _columns(self, nums: list[int]) -> np.ndarray:
        cols = [self.cols[n] for n in nums]
        return cols[0] if len(cols) == 1 else np.unique(np.concatenate(cols))

    def _sum(self, groups: dict[str, list[int]], results: dict[str, tuple[bytes, float]]):
        """The shares' gradients summed in block order: (Xᵀ·G − shift·ΣG, ΣG, loss, rows,
        (bytes received, of them the codecs' messages, what codec ``none`` would have sent),
        the slowest share's seconds)."""
        acc = np.zeros(self.m * self.k)
        gsum = np.zeros(self.k)
        loss, rows, slowest = 0.0, 0, 0.0
        nbytes = coded = raw = 0
        for w in groups:
            up, seconds = results[w]
            keys, values, part_loss, part_rows, part_gsum = messages.unpack_gradient(
                up, self.k, self.m
            )
            acc[keys] += values
            gsum += part_gsum
            loss += part_loss
            rows += part_rows
            nbytes += len(up)
            coded += messages.codec_bytes(up, self.k)
            raw += messages.raw_bytes(keys)
            slowest = max(slowest, seconds)
        gW = acc.reshape(self.m, self.k) - np.outer(self.problem.scaling.shift, gsum)
        return gW, gsum, loss, rows, (nbytes, coded, raw), slowest

    def report(self) -> dict[str, Any]:
        """What the catalog records of the distributed run."""
        s = self.settings
        return {
            "engine": "dask" if s.cluster.kind != "inprocess" else "inprocess",
            "cluster": s.cluster.text,
            "workers": self.started,
            "workers_left": len(self.live),
            "lost_workers": len(self.lost),
            "retries": self.retries,
            "compress": s.compress,
            "compress_model": s.compress_model,
            "step_batches": self.plan.shares,
            "partition_bytes": self.partitioned,
            "bytes_to_driver": self.counts["bytes_to_driver"],
            "bytes_to_workers": self.counts["bytes_to_workers"],
            "gradient_bytes": self.counts["gradient_bytes"],
            "gradient_raw_bytes": self.counts["gradient_raw_bytes"],
            "compression_ratio": ratio(
                self.counts["gradient_raw_bytes"], self.counts["gradient_bytes"]
            ),
        }


def shippable(stored: Stored) -> Stored:
    """``stored`` with its parts as ``bytes``, for a worker: a DuckDB read hands over views of
    an Arrow result, which pickle refuses, sending Dask's serialisation down a deep fallback
    (a finalizer that once ran inside it overflowed the stack and failed the call)."""
    parts: list[Buffer] = [p if isinstance(p, bytes) else bytes(p) for p in stored.parts]
    return Stored(stored.batch, stored.rows, parts)


def ratio(raw: int, coded: int) -> float | None:
    """Achieved compression: codec ``none``'s bytes over the codec's (None: nothing sent)."""
    return round(raw / coded, 4) if coded else None


def _seed(step_seed: int, first: int) -> int:
    """A message's codec seed: its step and its first minibatch (not its worker)."""
    return zlib.crc32(np.array([step_seed, first], dtype="<i8").tobytes())


def _storage_relation(index: str) -> str:
    from loomdb.store import catalog

    return catalog.storage_relation(index)
