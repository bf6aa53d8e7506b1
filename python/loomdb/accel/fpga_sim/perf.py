"""The performance model of the MLWeaving engine (MLWeaving §4–§5, Table 6, Fig. 9).

Memory: an epoch reads Eq. 4's N8·(s·⌈M/64⌉·64 + 32)/8 bytes at the configured bandwidth.
Compute: one 512-bit line (one plane of one 64-feature chunk of 8 samples) per cycle, so a
group of 8 samples takes s·C cycles.  Read-after-write is governed by Table 6's credit
counters — ``rd`` grows by 8 per group read, ``wr`` starts at B and grows by B per model
update, reads wait while rd == wr — so in sync mode mini-batch k+1 starts only when the update
of mini-batch k is visible: after X = s·C + L cycles without chaining (the gradient replays
the batch's last group and the update walks the model), after X = s + L with chaining (the
next batch may start once the first 64 model values are updated).  Async mode reads a stale
model and never waits.  Memory and compute overlap: an epoch takes the longer of the two.
L, the fixed pipeline latency, is a calibration constant (32 cycles by default).
"""

from __future__ import annotations

from typing import Any

from loomdb.accel.fpga_sim.job import Job


def epoch_bytes(job: Job) -> int:
    """Eq. 4: N8·(s·C·64 + 32)/8, labels at 32 bits."""
    n8 = -(-job.samples // 8) * 8
    return n8 * (job.bits * job.chunks * 64 + 32) // 8


def compute_cycles(job: Job) -> int:
    """Cycles of the compute pipeline for one epoch, stepping the credit counters."""
    groups = -(-job.samples // 8)
    per_group = job.bits * job.chunks
    drain = (job.bits if job.chaining else job.bits * job.chunks) + job.latency_cycles
    if job.mode == "async":
        return groups * per_group + drain
    batches = -(-groups // (job.mini_batch // 8))
    return groups * per_group + batches * drain


def simulate(job: Job) -> dict[str, Any]:
    """Simulated cycles, bytes, seconds and throughput of one epoch (and of all epochs)."""
    nbytes = epoch_bytes(job)
    clock = job.clock_mhz * 1e6
    bytes_per_cycle = job.bandwidth_gbs * 1e9 / clock
    memory = nbytes / bytes_per_cycle
    compute = compute_cycles(job)
    cycles = max(memory, compute)
    seconds = cycles / clock
    return {
        "job": job.to_dict(),
        "bytes_per_epoch": nbytes,
        "bits_per_sample": job.bits * job.chunks * 64 + 32,
        "memory_cycles": round(memory),
        "compute_cycles": compute,
        "cycles_per_epoch": round(cycles),
        "seconds_per_epoch": seconds,
        "samples_per_second": job.samples / seconds,
        "gb_per_second": nbytes / seconds / 1e9,
        "bound": "memory" if memory >= compute else "compute",
        "total_seconds": seconds * job.epochs,
    }
