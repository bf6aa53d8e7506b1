"""Running a parallel epoch in PostgreSQL: one statement whose plan hands each shard to one
parallel worker (or the leader), which runs ``loom._epoch_agg`` over it.  No paper section of
its own (Bismarck §3.3's shared-nothing segments; see ``epoch_aggregate``).  This is the path
of an epoch too large for the backend to keep; one it keeps in memory runs in threads of the
backend (``functions/train_parallel.KeptOrWorkers``).

The statement is a UNION ALL of one subquery per shard under the aggregate.  Shard j reads
the minibatches j, j + n, … (listed: ``batch = ANY(ARRAY[…])``, which the planner estimates
from the table's statistics, where ``batch % n = j`` would be guessed at 0.5% of the rows), and
hands the aggregate a run of its consecutive minibatches a row, every part of each gathered
into arrays in (minibatch, part) order, so that one call of the transition steps a whole run as
the serial loop does (``learn/fused_steps``).  Called once per minibatch, the transition's own
Python (the call, the state unpacked and packed again) cost 4x a serial cold step.  The plan
PostgreSQL must choose, and the tests check with ``EXPLAIN (ANALYZE)``::

    Finalize Aggregate
      -> Gather                     Workers Planned: n − 1, Workers Launched: …
           -> Partial Aggregate     (loom._epoch_agg in every process)
                -> Parallel Append  (each shard's subquery run whole by one process)
                     -> Subquery Scan -> GroupAggregate -> Sort -> Seq Scan   (one per shard)

A shard must reach one process whole and in order, so no scan inside a shard may be parallel:
the statement runs with ``min_parallel_table_scan_size`` (and the index one) at their largest,
which leaves a parallel append of whole subqueries as the only parallel plan, with
``max_parallel_workers_per_gather = n − 1`` (the leader is the n-th process), free parallel
setup and tuples, and hash aggregation off (a sorted group keeps one run in memory, not the
shard).  The sort under a shard's group holds every stored row of the shard (a payload out of
line is a pointer in it, one stored inline at most about 2 kB): ``work_mem`` is set to hold it
(``sort_kb``), where the default 4 MB spilled a 5M-row dense shard's 2 MB to disk.  The
settings are set for the statement and put back after it.  The planner
prefers the parallel plan by the rows it expects each process to aggregate, so the storage
table is analysed once per train first (``analyze``; a table laid out in this transaction has
no statistics, and one shard estimated at one row makes the plans cost the same).  Every process
computes with one BLAS thread (the shards are the parallelism): the workers from their
bootstrap (``epoch_install``), the leader for the statement (threadpoolctl).

Values are written into the statement (the start as ``decode('<hex>', 'hex')``, numbers as
numbers): PostgreSQL plans only unprepared statements in parallel from PL/Python
(``plpy.prepare`` plans without CURSOR_OPT_PARALLEL_OK), and hex digits and integers cannot
break out of a literal.
"""

from __future__ import annotations

from typing import Any

from threadpoolctl import threadpool_limits

from loomdb.errors import LoomDataError, LoomError, LoomFormatError
from loomdb.store.names import literal

LARGEST_SCAN_SIZE = "715827882"  # the most min_parallel_*_scan_size accepts (8 kB blocks)
SORT_ROW_BYTES = 2048  # a sorted stored row at most: an inline payload and the row's fields
SORT_KB = (4096, 256 * 1024)  # work_mem for the shards' sorts: PostgreSQL's default, and a cap


def sort_kb(shards: int, stop: int, parts: int) -> int:
    """``work_mem`` (kB) that sorts the largest shard's stored rows in memory: minibatches
    ``[0, stop)`` dealt to ``shards``, parts ``0 … parts`` each."""
    rows = -(-int(stop) // int(shards)) * (int(parts) + 1)
    return min(max(SORT_KB[0], -(-rows * SORT_ROW_BYTES // 1024)), SORT_KB[1])


def settings(shards: int, stop: int, parts: int) -> dict[str, str]:
    """The planner settings of the epoch's statement over minibatches ``[0, stop)``."""
    return {
        "work_mem": f"{sort_kb(shards, stop, parts)}kB",
        "max_parallel_workers_per_gather": str(shards - 1),
        "parallel_setup_cost": "0",
        "parallel_tuple_cost": "0",
        "min_parallel_table_scan_size": LARGEST_SCAN_SIZE,
        "min_parallel_index_scan_size": LARGEST_SCAN_SIZE,
        "enable_parallel_append": "on",
        "enable_hashagg": "off",
        # the transition's COST makes the plan look expensive enough to compile, and every
        # process compiled it (0.4 s each, measured) for expressions that do next to nothing
        "jit": "off",
    }


def set_sql(values: dict[str, str]) -> str:
    """One statement setting ``values`` for the rest of the transaction."""
    calls = ", ".join(
        f"pg_catalog.set_config({literal(k)}, {literal(v)}, true)" for k, v in values.items()
    )
    return f"SELECT {calls}"


def query(relation: str, shards: int, stop: int, parts: int, job: bytes, run: int) -> str:
    """The epoch's statement over storage table ``relation`` (quoted): minibatches
    ``[0, stop)``, parts ``0 … parts``, ``shards`` shards, each handed to the aggregate ``run``
    minibatches a row (the i-th minibatch of shard j, batch j + n·i, is in its row i // run,
    group ``batch / (n·run)``), their parts in (batch, part) order."""
    n, stop, parts, per = int(shards), int(stop), int(parts), int(shards) * int(run)
    ordered = "ORDER BY batch, part"
    agg = "pg_catalog.array_agg"  # polymorphic: never a role's array_agg of the column's type
    subqueries = []
    for j in range(n):
        batches = ",".join(str(b) for b in range(j, stop, n))  # shard_of(b, n) == j
        subqueries.append(
            f"SELECT * FROM (SELECT {j} AS shard, {agg}(batch {ordered}) AS batches, "
            f"{agg}(rows {ordered}) AS rows, {agg}(part {ordered}) AS parts, "
            f"{agg}(version {ordered}) AS versions, "
            f"{agg}(payload {ordered}) AS payloads, "
            f"{agg}(checksum {ordered}) AS checksums "
            f"FROM {relation} WHERE batch = ANY(ARRAY[{batches}]::integer[]) "
            f"AND part <= {parts} GROUP BY batch / {per} ORDER BY batch / {per}) AS shard_{j}"
        )
    return (
        "SELECT loom._epoch_agg(shard, batches, rows, parts, versions, payloads, checksums, "
        f"pg_catalog.decode('{job.hex()}', 'hex')) "
        f"FROM ({' UNION ALL '.join(subqueries)}) AS shards"
    )


def analyze(plpy: Any, relation: str) -> None:
    """Give the planner the storage table's statistics (its owner runs this)."""
    plpy.execute(f"ANALYZE {relation}")


def run(plpy: Any, sql: str, values: dict[str, str]) -> bytes | None:
    """Run the epoch's statement under its ``settings``; the aggregate's state (None: no
    rows)."""
    names = list(values)
    current = ", ".join(
        f"pg_catalog.current_setting({literal(k)}) AS s{i}" for i, k in enumerate(names)
    )
    before = plpy.execute(f"SELECT {current}")[0]
    previous = {k: before[f"s{i}"] for i, k in enumerate(names)}
    plpy.execute(set_sql(values))
    try:
        with threadpool_limits(limits=1, user_api="blas"):  # the leader's shard, like a worker's
            rows = plpy.execute(sql)
    except plpy.SPIError as e:
        raise _translated(e) from None
    finally:
        plpy.execute(set_sql(previous))
    value = rows[0][rows.colnames()[0]]
    return None if value is None else bytes(value)


def _translated(error: Any) -> LoomError:
    """A worker's damaged-minibatch or data error as the same class, message and hint here
    (PL/Python gives the message as "loomdb: …", the hint and detail in ``spidata``)."""
    from loomdb.engines.postgres.plpy_database import message_of, translate

    classes: dict[str, type[LoomError]] = {c.sqlstate: c for c in (LoomFormatError, LoomDataError)}
    cls = classes.get(str(getattr(error, "sqlstate", None)))
    if cls is None:
        return translate(error)
    message = message_of(error)
    data = getattr(error, "spidata", None) or (None, None, None)
    return cls(message, detail=data[1], hint=data[2])
