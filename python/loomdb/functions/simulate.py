"""``loom_simulate(index, options)``: what the MLWeaving engine would take for a job on an
index, without training — the simulator's performance model alone (MLWeaving §5, §7)."""

from __future__ import annotations

import json
from typing import Any

from loomdb.accel.fpga_sim import Job, simulate
from loomdb.accel.fpga_sim.job import check_batch_size
from loomdb.errors import LoomOptionError
from loomdb.options import Boolean, Choices, Interval, Option, Options, parse_json
from loomdb.store import catalog, sparse
from loomdb.store.names import check_name

OPTIONS = Options(
    "loom_simulate",
    Option("precision", Interval(True, 1, 32), 32),
    Option(
        "batch_size",
        Interval(True, 8, 1 << 20),
        None,
        "the engine's mini-batch, a power of two >= 8 (default: the index's)",
    ),
    Option("step_shift", Interval(True, 0, 30), 10, "λ = 2^-step_shift"),
    Option("epochs", Interval(True, 1, 100_000), 1),
    Option("mode", Choices(["sync", "async"]), "sync"),
    Option("chaining", Boolean(), True),
    Option("bandwidth_gbs", Interval(False, 0, 1e6, low_open=True), 15.0),
    Option("clock_mhz", Interval(False, 0, 1e6, low_open=True), 400.0),
    Option("latency_cycles", Interval(True, 0, 1_000_000), 32),
)


def simulate_index(db: Any, index: str, options: str | None) -> str:
    info = catalog.get_index(db, check_name(index, "index"))
    if info.format != "mlweaving":
        raise LoomOptionError(
            f"index '{index}' is {info.format}: the MLWeaving engine reads mlweaving indexes",
            hint="build one with CREATE INDEX … USING mlweaving, or loom_create_index with "
            '{"format": "mlweaving"}',
        )
    opts = OPTIONS.parse(parse_json(options))
    given = opts.pop("batch_size")
    batch = given or int(info.options.get("batch_size") or 256)
    check_batch_size(batch, "this simulation" if given else f"index '{index}'")
    job = Job(
        samples=int(info.rows),
        dimension=sparse.feature_count(info),
        bits=opts.pop("precision"),
        mini_batch=batch,
        **opts,
    )
    return json.dumps({"index": index, "format": info.format, **simulate(job)})
