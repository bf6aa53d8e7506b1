"""``loomdb bench sketch``'s training tables: time to a loss over a simulated network, and the
wall clock of 2 Dask workers against 1 (SketchML §4.3: SketchML reaches uncompressed Adam's loss
sooner than Adam-raw and ZipML at 1 Gbit/s; its final loss within 0.1%).

Training: a9a.t with hashed pairwise crosses (``cross_bits`` 20: 2^21 columns; 16 with
``--quick``) laid out as ``toc``, logistic with Adam, one stored minibatch a step, the same
seed for every codec, through ``loom_train``'s distributed path with ``"cluster": "inprocess"``
(the same encode/decode/sum loop, one worker, no Dask).  Each epoch's history holds the
workers' and the driver's compute seconds and the bytes and messages each way; simulated time
is their sum with ``bytes × 8 / bandwidth + messages × LATENCY_S``.  The target is Adam-raw's
final loss + 0.1%.  Then the same sketchml train on ``local:1`` and ``local:2`` (real Dask
worker processes): the sum of its epochs' wall seconds, cluster start-up left out.
"""

from __future__ import annotations

import json
import math
from typing import Any

from loomdb.bench.table import BenchTable

CODECS = ("none", "zipml16", "zipml8", "sketchml")
NAMES = {"none": "Adam-raw", "zipml16": "ZipML 16", "zipml8": "ZipML 8", "sketchml": "SketchML"}
GBITS = (1.0, 10.0)
LATENCY_S = 50e-6  # per message: a LAN round's half
TARGET = 1.001  # × Adam-raw's final loss


def tables(quick: bool) -> list[BenchTable]:
    import loomdb
    from loomdb.datasets import shared_datasets

    folder = shared_datasets()
    if folder is None:
        return []
    bits, epochs = (16, 4) if quick else (20, 12)
    con = loomdb.connect()
    try:
        source = json.dumps({"cross_bits": bits})
        con.execute(f"SELECT loom_load('libsvm', '{folder / 'a9a.t'}', 'bench_x', '{source}')")
        runs = {codec: _history(con, codec, "inprocess", epochs) for codec in CODECS}
        workers = {n: _history(con, "sketchml", f"local:{n}", epochs) for n in (1, 2)}
    finally:
        con.close()
    return [_network(runs, bits, epochs), _workers(workers, bits, epochs)]


def _history(con: Any, codec: str, cluster: str, epochs: int) -> list[dict[str, Any]]:
    opts = {"format": "toc", "model": "logistic", "optimizer": "adam", "epochs": epochs}
    opts.update(tol=0, cluster=cluster, compress=codec, step_batches=1, progress=False)
    opts.update(replace=True, seed=7)
    con.execute(f"SELECT loom_train('bench_sk', 'bench_x', 'label', '{json.dumps(opts)}')")
    history = con.execute("SELECT history FROM loom.models WHERE name = 'bench_sk'").fetchone()[0]
    return [h for h in json.loads(history) if "epoch" in h]


def _simulated(entry: dict[str, Any], gbits: float) -> float:
    sent = entry["bytes_to_driver"] + entry["bytes_to_workers"]
    network = sent * 8 / (gbits * 1e9) + entry["messages"] * LATENCY_S
    return entry["worker_s"] + entry["driver_s"] + network


def _network(runs: dict[str, list[dict[str, Any]]], bits: int, epochs: int) -> BenchTable:
    target = runs["none"][-1]["loss"] * TARGET
    table = BenchTable(
        f"sketch: time to Adam-raw's final loss + 0.1% over a simulated network (a9a.t, "
        f"2^{bits + 1} columns, logistic, {epochs} epochs)",
        ["method", "MB up/epoch", "MB down/epoch", "final loss", "vs raw", "epochs to target"]
        + [f"s at {g:g} Gbit/s" for g in GBITS],
        notes=[
            "up: gradients to the driver; down: the model to the workers (float64 values)",
            f"s: compute (workers + driver, measured) + bytes × 8 / bandwidth + "
            f"{LATENCY_S * 1e6:g} µs a message, summed to the first epoch at the target; "
            "n/a: not reached",
        ],
        digits={"final loss": 5, "vs raw": 4},
    )
    for codec, history in runs.items():
        reached = next((i for i, h in enumerate(history) if h["loss"] <= target), None)
        upto = history[: reached + 1] if reached is not None else []
        times = [sum(_simulated(h, g) for h in upto) if upto else math.nan for g in GBITS]
        last = history[-1]
        table.add(
            NAMES[codec],
            last["bytes_to_driver"] / 2**20,
            last["bytes_to_workers"] / 2**20,
            last["loss"],
            last["loss"] / runs["none"][-1]["loss"],
            reached + 1 if reached is not None else "n/a",
            *times,
        )
    return table


def _workers(runs: dict[int, list[dict[str, Any]]], bits: int, epochs: int) -> BenchTable:
    table = BenchTable(
        f"sketch: SketchML on Dask workers, wall clock (a9a.t, 2^{bits + 1} columns, "
        f"{epochs} epochs)",
        ["workers", "train s", "speed-up", "final loss"],
        notes=["train s: the epochs' wall seconds (cluster start-up left out); 2 cores here"],
        digits={"final loss": 5},
    )
    one = sum(h["seconds"] for h in runs[1])
    for n, history in runs.items():
        spent = sum(h["seconds"] for h in history)
        table.add(n, spent, one / spent, history[-1]["loss"])
    return table
