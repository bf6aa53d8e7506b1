"""``loom._epoch_agg``: a parallel epoch as a PARALLEL SAFE aggregate, run by PostgreSQL's
parallel workers.  Bismarck (SIGMOD 2012) §3.3, the pure-UDA parallel IGD: the transition is
the shard's SGD steps over a run of its minibatches (``learn/averaging.train``), the combine
gathers the shards' partial states, and the row-weighted average (``learn/averaging.merge``)
is taken by the driver, in shard order.

The state is a list of shard records (``learn/shard_state``): each shard's model, optimiser
state and totals.  A process usually runs one shard, but may run several one after the other
(a parallel append hands each shard to one process whole, and a process that finishes takes
the next); the record keyed by the shard keeps them apart, so the result never depends on which
process ran what.  The combine only concatenates records: averaging there would sum in the
order Gather delivers the partial states, and floating-point addition is not associative.

These functions run in parallel workers, where PL/Python may not run queries (each
``plpy.execute`` opens a subtransaction, refused in parallel mode): they read nothing but
their arguments, and the workers import loomdb from paths fixed at install time
(``extension.epoch_aggregate_sql``).  Every minibatch is checked as the serial reader checks it
(``store.storage``): its parts 0…P exactly once, its format version and each part's checksum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loomdb.codecs.blob import byte_view
from loomdb.engines.postgres.plpy_database import raise_error
from loomdb.errors import LoomError, LoomFormatError
from loomdb.learn import averaging, shard_state
from loomdb.store import formats, storage
from loomdb.store.formats.base import Format

_parsed: dict[str, Any] = {"job": None, "value": None}  # the last job read in this process
_MOST_SHARDS = 1024  # far more than max_parallel_workers allows
READ = {  # what a job says about reading the shards' minibatches, and each value's type
    "format": str,
    "n_features": int,
    "precision": int,
    "parts": int,
    "uid": str,
    "version": int,
    "index": str,
    "shards": int,
}


def call(plpy: Any, name: str, *args: Any) -> Any:
    """The SQL functions' entry point: a ``LoomError`` becomes a PostgreSQL error."""
    try:
        return FUNCTIONS[name](*args)
    except LoomError as e:
        raise_error(plpy, e)


def job(start: averaging.Start, read: dict[str, Any]) -> bytes:
    """The bytes every shard of an epoch gets: where it starts and how to read and check."""
    return shard_state.pack([start.to_record({"read": read})])


def _job(blob: Any) -> tuple[averaging.Start, dict[str, Any]]:
    blob = bytes(byte_view(blob, "a parallel epoch job"))
    if _parsed["job"] != blob:
        records = shard_state.unpack(blob)
        read = records[0][0].get("read") if len(records) == 1 else None
        if not (
            isinstance(read, dict)
            and all(type(read.get(k)) is t for k, t in READ.items())
            and read["shards"] >= 1
        ):
            raise LoomFormatError("malformed parallel epoch job", hint=shard_state.HINT)
        start = averaging.Start.from_record(records[0])
        _check_read(read, start)
        _parsed.update(job=blob, value=(start, read))
    return _parsed["value"]


def _check_read(read: dict[str, Any], start: averaging.Start) -> None:
    """Refuse a job whose reading does not fit its model: the steps index the model by each
    minibatch's width, which the decoders check against ``n_features`` only, and the reader
    asks the format for ``parts`` at ``precision``.  A caller of ``loom._epoch_step`` writes
    the job (and the checksums, from a uid it chooses), so nothing here is taken on trust."""
    fmt = formats.get(read["format"])
    m = start.W.shape[0]
    if type(fmt).bind is not Format.bind:  # reads with its index's settings (pcr)
        bad = f"format {read['format']!r} cannot train in parallel workers"
    elif read["n_features"] != m:
        bad = f"minibatches of {read['n_features']} features for a model of {m}"
    elif not 1 <= read["precision"] <= fmt.top() or read["parts"] != fmt.parts(read["precision"]):
        bad = f"{read['parts']} parts at precision {read['precision']}"
    elif read["version"] != fmt.version or not 1 <= read["shards"] <= _MOST_SHARDS:
        bad = f"format version {read['version']} in {read['shards']} shards"
    else:
        return
    raise LoomFormatError(f"malformed parallel epoch job: {bad}", hint=shard_state.HINT)


def step(
    state: Any,
    shard: int,
    batches: list[int],
    rows: list[int],
    parts: list[int],
    versions: list[int],
    payloads: list[Any],
    checksums: list[int],
    job: Any,
) -> bytes:
    """The transition: a run of ``shard``'s minibatches trained on, the state handed on.  The
    arrays hold the run's stored rows in (minibatch, part) order (``parallel_epochs.query``)."""
    start, read = _job(job)
    if not (isinstance(shard, int) and 0 <= shard < read["shards"]):
        raise LoomFormatError(f"shard {shard} of {read['shards']}?", hint=shard_state.HINT)
    results = (
        [averaging.ShardResult.from_record(r) for r in shard_state.unpack(state)] if state else []
    )
    for result in results:
        result.check(start)
    current = next((r for r in results if r.shard == shard), None)
    if current is None:
        current = averaging.begin(start, shard)
        results.append(current)
    run = _run(read, batches, rows, parts, versions, payloads, checksums)
    for i, stored in enumerate(run):  # a shard's minibatches arrive in order, each once
        expected = current.next_batch + i * read["shards"]
        if stored.batch != expected:
            what = "is missing" if stored.batch > expected else "appears twice"
            raise storage.damaged(read["index"], f"minibatch {min(stored.batch, expected)} {what}")
    fmt = formats.get(read["format"])
    decoded = [fmt.decode(stored, read["n_features"], read["precision"]) for stored in run]
    averaging.train(start, current, decoded, read["shards"])
    return shard_state.pack([r.to_record() for r in results])


def _run(read, batches, rows, parts, versions, payloads, checksums) -> list[storage.Stored]:
    """The minibatches of one row of the epoch's statement, each checked (``_stored``)."""
    columns = (batches, rows, parts, versions, payloads, checksums)
    if any(c is None for c in columns) or len({len(c) for c in columns}) != 1:
        raise storage.damaged(read["index"], "a run of minibatches has a NULL or short column")
    out, start = [], 0
    for end in range(1, len(batches) + 1):
        if end == len(batches) or batches[end] != batches[start]:
            part = slice(start, end)
            out.append(
                _stored(
                    read,
                    batches[start],
                    rows[part],
                    parts[part],
                    versions[part],
                    payloads[part],
                    checksums[part],
                )
            )
            start = end
    return out


def _stored(read, batch, rows, parts, versions, payloads, checksums) -> storage.Stored:
    index = read["index"]
    wanted = list(range(read["parts"] + 1))
    if None in (batch, rows, parts, versions, payloads, checksums):
        raise storage.damaged(index, f"minibatch {batch} has a NULL column")
    if list(parts) != wanted or not len(rows) == len(versions) == len(payloads) == len(
        checksums
    ) == len(wanted):
        raise storage.damaged(index, f"minibatch {batch} has a missing or repeated part")
    if len(set(rows)) != 1:
        raise storage.damaged(index, f"minibatch {batch} has a missing or repeated part")
    blobs: list[storage.Buffer] = []
    for part, version, payload, crc in zip(parts, versions, payloads, checksums):
        if payload is None:
            raise storage.damaged(index, f"minibatch {batch} part {part} holds NULL")
        if version != read["version"]:
            raise storage.damaged(
                index, f"minibatch {batch} is format version {version}, not {read['version']}"
            )
        payload = bytes(payload)
        if crc is None or storage.checksum(
            read["uid"], batch, part, rows[0], version, payload
        ) != int(crc):
            raise storage.damaged(
                index, f"minibatch {batch} part {part} does not match its checksum"
            )
        blobs.append(payload)
    return storage.Stored(batch, rows[0], blobs)


def combine(a: Any, b: Any) -> bytes:
    """Two partial states as one: their shard records, each shard at most once."""
    records = shard_state.unpack(a) + shard_state.unpack(b)
    shards = [r[0].get("shard") for r in records]
    if len(set(shards)) != len(shards):
        raise LoomFormatError(
            "a parallel epoch's shard was split between two processes",
            hint=shard_state.HINT,
        )
    return shard_state.pack(records)


FUNCTIONS: dict[str, Callable[..., Any]] = {"step": step, "combine": combine}
