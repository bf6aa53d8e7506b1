"""``loom_simulate(index, options)``: what the MLWeaving engine would take for a job on an index,
without training — the simulator's performance model alone."""

from __future__ import annotations

import json
from typing import Any

from loomdb.accel.fpga_sim import Job, simulate
from loomdb.options import Option, in_range, one_of, parse_json, validate
from loomdb.store import catalog
from loomdb.store.db import Database
from loomdb.store.names import check_name

OPTIONS = [
    Option("precision", (int,), 32, in_range(1, 32), "an integer from 1 to 32"),
    Option("mini_batch", (int,), None, expect="a power of two ≥ 8 (default: the index's)"),
    Option("step_shift", (int,), 10, in_range(0, 30), "an integer from 0 to 30"),
    Option("epochs", (int,), 1, in_range(1, 100_000), "an integer from 1 to 100000"),
    Option("mode", (str,), "sync", one_of("sync", "async"), "'sync' or 'async'"),
    Option("chaining", (bool,), True),
    Option("bandwidth_gbs", (float,), 15.0, in_range(0, 1e6, lo_open=True), "a number > 0"),
    Option("clock_mhz", (float,), 400.0, in_range(0, 1e6, lo_open=True), "a number > 0"),
    Option("latency_cycles", (int,), 32, in_range(0, 1_000_000), "an integer >= 0"),
]


def simulate_index(db: Database, index: str, options: str | None) -> str:
    info = catalog.get_index(db, check_name(index, "index"))
    opts = validate(parse_json(options), OPTIONS)
    batch = opts.pop("mini_batch") or int(info["options"].get("batch_size") or 64)
    job = Job(
        samples=int(info["rows"]),
        dimension=len(info["columns"]),
        bits=opts.pop("precision"),
        mini_batch=batch,
        **opts,
    )
    report: dict[str, Any] = {"index": index, "format": info["format"], **simulate(job)}
    return json.dumps(report)
