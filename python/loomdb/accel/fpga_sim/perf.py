"""The performance model of the MLWeaving engine (MLWeaving §4.3, §5, Table 6, Fig. 8–11).

Memory: an epoch reads Eq. 4's N8·(s·⌈M/64⌉·64 + 32)/8 bytes (N8 = N rounded up to 8; the
32 bits are the label).  The read stream runs at the configured bandwidth from cycle 0 into a
FIFO taken as unbounded, so memory never waits for compute.

Compute: one 512-bit line — plane p of one 64-feature chunk of the 8 samples of a group — per
cycle, so a group takes s·C cycles (C = ⌈M/64⌉) and cannot finish before its last line arrived:
``end_g = max(start_g + s·C, arrival_g)``.

Read-after-write (sync): Table 6's credit counters are stepped per group — ``wr`` starts at B
and grows by B when a mini-batch's update is released, ``rd`` grows by 8 per group read, and a
group may not start while rd == wr.  The update of batch k is *released* X cycles after its last
group: X = s + L with chaining (the next batch may read once the first 64 weights are updated,
s cycles into the update) and X = s·C + L without (the whole model rewritten).  L is a fixed
pipeline latency (adder tree, serial part, update) — a calibration constant, 32 by default,
not a number the paper states.  Async mode never waits; it reads whatever model is there.
The epoch ends when the last update is fully written (its last group + L + s·C).

This is an event simulation per group (``schedule``), not a closed form; ``closed_form`` is the
digest's derived model — T_mem = N8·MT/BW, T_cmp = (N/B)·[(B/8)·s·C + X]/f, max of the two —
and the two agree closely whenever either bound dominates (tested).

The same schedule tells async mode which model each read saw, chunk by chunk
(``advance_versions``): batch k's update writes chunk c (64 weights) at
batch_end_k + L + s·(c + 1) — the gradient replays the batch's last group, s cycles a chunk —
and group g reads chunk c at max(start_g + c·s, arrival of the chunk's first line).  A read sees
the update when the write came first, so a read may be *torn* (old weights for its first
chunks, new for the rest) when memory paces the reads slower than the update walks the model.
That makes async results depend on the timing constants, as they would on the hardware.
The line-level timing is approximated per chunk (exact when one bound dominates).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)
from loomdb.accel.fpga_sim.job import BANKS, CHUNK, Job
from loomdb.codecs import weave


def bits_per_sample(job: Job) -> int:
    """Eq. 4: MT = s·⌈M/64⌉·64 + 32."""
    return job.bits * job.chunks * CHUNK + 32


def epoch_bytes(job: Job) -> int:
    """Eq. 4 over an epoch: N8·(s·⌈M/64⌉·64 + 32)/8 bytes (the layout's own count)."""
    return weave.epoch_bytes(job.samples, job.dimension, job.bits)


@njit(cache=True)
def _schedule(
    groups, per_batch, group_cycles, group_bytes, per_cycle, sync, release_after, done_after
):  # pragma: no cover - compiled
    batches = (groups + per_batch - 1) // per_batch
    starts = np.empty(groups, dtype=np.float64)
    batch_end = np.empty(batches, dtype=np.float64)
    released = np.empty(batches, dtype=np.float64)
    batch = per_batch * 8
    wr = batch  # Table 6: credits for the first mini-batch
    rd = 0
    end = 0.0
    stalled = 0.0
    for g in range(groups):
        k = g // per_batch
        start = end
        if sync and rd == wr:  # out of credits: wait for the previous batch's update
            if released[k - 1] > start:
                stalled += released[k - 1] - start
                start = released[k - 1]
            wr += batch
        rd += 8
        starts[g] = start
        end = max(start + group_cycles, (g + 1) * group_bytes / per_cycle)
        if (g + 1) % per_batch == 0 or g == groups - 1:
            batch_end[k] = end
            released[k] = end + release_after
    return starts, batch_end, end + done_after, stalled


@njit(cache=True)
def advance_versions(
    g, start, batch_end, limit, seen, s, latency, per_cycle, group_bytes
):  # pragma: no cover - compiled
    """Async: ``seen[c]`` ← how many mini-batch updates group g's read of chunk c includes.

    Chunk c is read when the group reaches it (start + c·s) and its first line has arrived;
    batch k's update has written chunk c at batch_end[k] + L + s·(c + 1).  ``limit`` is g's
    batch: its own update comes later.  ``seen`` only grows, so it is advanced in place.
    """
    base = g * group_bytes + 32.0  # the 8 labels come first
    for c in range(seen.shape[0]):
        read = max(start + c * s, (base + (c * s + 1) * 64.0) / per_cycle)
        v = seen[c]
        while v < limit and batch_end[v] + latency + s * (c + 1) <= read:
            v += 1
        seen[c] = v


@njit(cache=True)
def _async_versions(
    starts, batch_end, per_batch, chunks, s, latency, per_cycle, group_bytes, store
):  # pragma: no cover - compiled
    groups = starts.shape[0]
    out = np.zeros((groups if store else 0, chunks), dtype=np.int64)
    seen = np.zeros(chunks, dtype=np.int64)
    lag = 0
    for g in range(groups):
        k = g // per_batch
        advance_versions(g, starts[g], batch_end, k, seen, s, latency, per_cycle, group_bytes)
        for c in range(chunks):
            lag = max(lag, k - seen[c])
            if store:
                out[g, c] = seen[c]
    return out, lag


def _per_cycle(job: Job, bandwidth: bool = True) -> float:
    """Bytes the read stream delivers per clock cycle."""
    return job.bandwidth_gbs * 1e9 / (job.clock_mhz * 1e6) if bandwidth else np.inf


def schedule(job: Job, bandwidth: bool = True) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Per group start cycles, per batch end cycles (last group done), epoch cycles, stalls.

    ``bandwidth=False`` runs the compute pipeline alone (infinite bandwidth).
    """
    s, C, L = job.bits, job.chunks, job.latency_cycles
    starts, batch_end, done, stalled = _schedule(
        job.groups,
        job.mini_batch // BANKS,
        float(s * C),
        float(bits_per_sample(job)),  # 8 samples × MT bits / 8 = MT bytes per group
        _per_cycle(job, bandwidth),
        job.mode == "sync",
        float(s + L if job.chaining else s * C + L),
        float(s * C + L),
    )
    return starts, batch_end, float(done), float(stalled)


def timing_args(job: Job) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """What the engine's async kernel needs: starts, batch ends, s, L, bytes/cycle, bytes/group."""
    starts, batch_end, _, _ = schedule(job)
    return (
        starts,
        batch_end,
        float(job.latency_cycles),
        _per_cycle(job),
        float(bits_per_sample(job)),
    )


def read_versions(job: Job, store: bool = True) -> tuple[np.ndarray, int]:
    """(groups, C) array: how many mini-batch updates each group's read of each chunk includes,
    and the largest lag (batches behind) of any read.  Sync reads are never behind."""
    per_batch = job.mini_batch // BANKS
    if job.mode == "sync":
        batch_of = np.arange(job.groups, dtype=np.int64) // per_batch
        return np.repeat(batch_of[:, None], job.chunks if store else 0, axis=1), 0
    starts, batch_end, latency, per_cycle, group_bytes = timing_args(job)
    return _async_versions(
        starts,
        batch_end,
        per_batch,
        job.chunks,
        float(job.bits),
        latency,
        per_cycle,
        group_bytes,
        store,
    )


def closed_form(job: Job) -> dict[str, float]:
    """The digest's throughput model, in seconds per epoch."""
    clock = job.clock_mhz * 1e6
    memory = epoch_bytes(job) / (job.bandwidth_gbs * 1e9)
    s, C, L = job.bits, job.chunks, job.latency_cycles
    x = (s + L) if job.chaining else (s * C + L)
    if job.mode == "async":
        x = 0
    compute = job.samples / job.mini_batch * (job.mini_batch / BANKS * s * C + x) / clock
    return {"memory_s": memory, "compute_s": compute, "epoch_s": max(memory, compute)}


def simulate(job: Job) -> dict[str, Any]:
    """One epoch's simulated cycles, bytes, seconds and throughput; JSON-serialisable."""
    clock = job.clock_mhz * 1e6
    nbytes = epoch_bytes(job)
    memory = nbytes / (job.bandwidth_gbs * 1e9 / clock)
    compute = schedule(job, bandwidth=False)[2]
    _, _, cycles, stalled = schedule(job)
    seconds = cycles / clock
    closed = closed_form(job)
    return {
        "job": job.to_dict(),
        "bytes_per_epoch": nbytes,
        "bits_per_sample": bits_per_sample(job),
        "memory_cycles": round(memory),
        "compute_cycles": round(compute),
        "credit_stall_cycles": round(stalled),
        "cycles_per_epoch": round(cycles),
        "seconds_per_epoch": seconds,
        "samples_per_second": job.samples / seconds,
        "gb_per_second": nbytes / seconds / 1e9,
        "bound": "memory" if memory >= compute else "compute",
        "closed_form_seconds": closed["epoch_s"],
        "epochs": job.epochs,
        "total_seconds": seconds * job.epochs,
    }
