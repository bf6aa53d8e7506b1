"""``{"parallel": n}``: every epoch of a train as n shards merged by row-weighted model
averaging (Bismarck §3.3, ``learn/averaging``) — in n threads of this process (DuckDB, whose
Python API has no aggregates, and a PostgreSQL backend while it keeps the epoch's minibatches in
memory), or in PostgreSQL's parallel workers, running the aggregate ``loom._epoch_agg`` over the
storage table (an engine that offers ``run_shards``), for an epoch too large to keep.

Honour or refuse: the shards train with the cpu backend's products and the trainer's own step,
so a backend that owns its epoch (fpga-sim), another backend, a skip policy (SlimML, which
picks rows from the one model of the moment), or fewer training minibatches than shards is
refused with what to do instead; ``parallel`` is recorded as used, and every epoch of the
history says how many shards ran, in how many processes or threads, and in which
(``shards_in``).  In PostgreSQL the workers read the storage table every epoch (a worker lives
for one statement and keeps nothing), so a train without an index lays its source out in a
table of schema ``loom_data`` made for the call (the workers cannot read a temporary table or
the caller's memory) and dropped with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from loomdb.accel import registry
from loomdb.errors import LoomOptionError
from loomdb.learn import averaging, fused_steps, shard_state
from loomdb.learn.problem import Problem
from loomdb.learn.shard_threads import ThreadedShards
from loomdb.learn.trainer import EpochRunner, TrainConfig
from loomdb.store import sparse, storage
from loomdb.store.epochs import Epochs
from loomdb.store.formats.base import Format
from loomdb.store.layout import Layout


def in_database(db: Any, opts: dict[str, Any]) -> bool:
    """Whether this train's shards run inside the database (so its layout must be a table
    the database's workers can read)."""
    return opts["parallel"] > 1 and hasattr(db, "run_shards")


def check_options(opts: dict[str, Any]) -> None:
    """Refuse, before any layout, a backend the shards cannot run."""
    n = opts["parallel"]
    if n == 1:
        return
    if opts.get("skip") not in (None, "none"):
        raise LoomOptionError(
            f"skip '{opts['skip']}' chooses each minibatch's rows from the model of the moment; "
            f"{n} parallel shards train {n} models at once and cannot",
            hint="leave 'parallel' out (it is 1) to skip rows, or leave 'skip' out",
        )
    backend = registry.get(opts["backend"])
    if hasattr(backend, "run_epoch"):
        raise LoomOptionError(
            f"backend '{backend.name}' runs whole epochs on its own engine: "
            f"it cannot train {n} shards in parallel",
            hint="leave 'parallel' out (it is 1) on this backend, or use the cpu backend",
        )
    if backend.name != "cpu":
        raise LoomOptionError(
            f"parallel shards compute with the cpu backend; this train asks for '{backend.name}'",
            hint="leave 'parallel' out (it is 1), or leave 'backend' out (cpu)",
        )


def check_layout(opts: dict[str, Any], epochs: Epochs) -> None:
    """Refuse more shards than training minibatches: every shard trains at least one."""
    n = opts["parallel"]
    if epochs.train_stop < n:
        raise LoomOptionError(
            f"parallel {n} needs at least {n} training minibatches; "
            f"this train has {epochs.train_stop}",
            hint="use a smaller 'parallel' or a smaller batch_size",
        )


RUN_BYTES = 16 << 20  # the most payload one row of a parallel epoch's statement hands over


@contextlib.contextmanager
def runner(
    db: Any,
    opts: dict[str, Any],
    laid: Layout,
    epochs: Epochs,
    problem: Problem,
    config: TrainConfig,
) -> Iterator[EpochRunner | None]:
    """The trainer's epoch runner for ``parallel`` shards (None: the serial loop), held for
    the train (DuckDB's threads live from the first epoch to the last)."""
    n = opts["parallel"]
    if n == 1:
        yield None
        return
    with ThreadedShards(epochs, problem, config, n, db.check_interrupt) as threads:
        if in_database(db, opts) and type(laid.fmt).bind is Format.bind:
            workers = DatabaseShards(db, laid, epochs.train_stop, n, problem, config)
            yield KeptOrWorkers(epochs, threads, workers)
        else:  # a format bound to its index (pcr's image settings) reads in this process
            yield threads


class KeptOrWorkers:
    """PostgreSQL's parallel epoch: in threads of this backend while the backend keeps the
    epoch's minibatches in memory (``cache_mb``; the first epoch reads them in this thread and
    deals them out), in the server's parallel workers once they are known too large to keep
    (each worker reads its shard from the table).  A worker is a new process every epoch that
    starts Python, numpy, numba and loomdb and reads its minibatches again: on 1M × 20 dense
    rows that the backend keeps, 0.6–0.7 s an epoch against 0.043 s serial, where two threads
    of the backend take 0.023–0.028 s (the same model, bit for bit)."""

    def __init__(self, epochs: Epochs, threads: ThreadedShards, workers: DatabaseShards):
        self.epochs, self.threads, self.workers = epochs, threads, workers

    def __call__(self, epoch, precision, W, b, optimizer, lr, widest) -> dict[str, Any]:
        run = self.threads if self.epochs.keeps(precision) else self.workers
        return run(epoch, precision, W, b, optimizer, lr, widest)


class DatabaseShards:
    """A parallel epoch run by the database (``db.run_shards``) over the layout's table."""

    def __init__(self, db, laid: Layout, stop: int, shards: int, problem, config):
        if laid.relation is None:  # in_database() layouts are always tables
            raise LoomOptionError("a parallel train in the database needs a stored layout")
        self.db, self.laid, self.stop, self.shards = db, laid, stop, shards
        self.problem, self.config = problem, config

    def __call__(self, epoch, precision, W, b, optimizer, lr, widest) -> dict[str, Any]:
        info, fmt = self.laid.info, self.laid.fmt
        start = averaging.Start.of(self.problem, self.config, W, b, optimizer, lr, widest[0])
        read: dict[str, Any] = {
            "format": fmt.name,
            "n_features": sparse.feature_count(info),  # a sparse layout's observed columns
            "precision": int(precision),
            "parts": fmt.parts(precision),
            "uid": info.uid,
            "version": fmt.version,
            "index": self.laid.info.name or "scratch",
            "shards": self.shards,
        }
        job = shard_state.pack([start.to_record({"read": read})])
        per_batch = max(info.bytes // max(info.batches, 1), 1)
        run = max(1, min(fused_steps.RUN, RUN_BYTES // per_batch))
        state = self.db.run_shards(
            self.laid.relation, self.laid.owner, self.shards, self.stop, read["parts"], job, run
        )
        records = shard_state.unpack(state) if state is not None else []
        results = {r.shard: r for r in map(averaging.ShardResult.from_record, records)}
        for j in range(self.shards):
            r = results.get(j)
            if r is not None and r.diverged is not None:
                continue  # merge raises it: the trainer restarts with a smaller step
            expected = len(range(j, self.stop, self.shards))
            if r is None or r.batches != expected:
                missing = j if r is None else r.next_batch
                raise storage.damaged(read["index"], f"minibatch {missing} is missing")
        totals = averaging.merge(list(results.values()), start, W, b, optimizer)
        widest[0] = max(r.widest for r in results.values())
        return {**totals, "shards_in": "processes"}
