"""The bit-serial datapath of the MLWeaving engine, one epoch (MLWeaving Algorithm 1, Fig. 7).

Per group of 8 samples (the 8 banks, lock-step):

1. dot product: for each sample, Σ_k Σ_{i=1..s} a_k[i]·(x_k << 4 >> i), wrapped to 36 bits;
2. serial part: scale = df(dot, b) >> (j + log2 B) (formats in ``fixed_point``);
3. gradient: per feature Σ_{samples} Σ_i a_k[i]·(scale >> i), accumulated over the 8 banks in
   36 bits (the adder trees of Fig. 7's stage 2);
4. the working model takes ``grad >> 4`` after every group; the architectural model becomes
   the working model after every B samples.

Which model a group reads: sync mode, the architectural model as of its batch's start (every
update before its batch: exact mini-batch SGD); async mode, per 64-weight chunk, whatever the
performance model's schedule says had been written when the group read that chunk
(``perf.advance_versions``).  The kernel keeps a ring of the architectural models that may
still be read.

The simulation is reorganised for speed without changing a bit: the shifted model
``(x << 4) >> i`` is tabulated once per model version, the loops run plane-major (one
vectorisable pass over the features per bit plane) and a set bit selects a term with an AND
mask instead of a multiply.  Sums are exact in int64 and wrapped once (see ``fixed_point``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from loomdb import kernel_cache  # noqa: F401  (before any kernel is decorated)
from loomdb.accel.fpga_sim.perf import advance_versions

EXTRA = 4
ACC_FRAC = 27


@njit(cache=True)
def wrap(value, bits):  # pragma: no cover - compiled
    """Two's-complement wrap of an int64 to ``bits`` bits."""
    half = np.int64(1) << np.int64(bits - 1)
    return ((value + half) & ((np.int64(1) << np.int64(bits)) - 1)) - half


@njit(cache=True)
def serial_part(dot, label, loss, shift):  # pragma: no cover - compiled
    """scale = df(dot, b) >> shift, all in the 36-bit Q.27 accumulator format."""
    if loss == 0:  # least squares: df = dot − b
        diff = wrap(dot - label, 36)
    elif loss == 1:  # logistic (extension): σ(dot) − b, σ floored to the Q.27 grid
        z = dot / 2.0**ACC_FRAC
        p = 1.0 / (1.0 + math.exp(-z)) if z > -60.0 else 0.0
        diff = np.int64(math.floor(p * 2.0**ACC_FRAC)) - label
    else:  # svm (extension): hinge sub-gradient −t·[t·dot < 1], label = t·2^27
        one = np.int64(1) << np.int64(ACC_FRAC)
        margin = dot if label > 0 else -dot
        diff = -label if margin < one else np.int64(0)
    return diff >> np.int64(shift)


@njit(cache=True)
def _tabulate(model, table, s, chunk):  # pragma: no cover - compiled
    """table[i, k] = (x_k << 4) >> (i + 1) for the 64 features of one chunk."""
    stop = min(chunk * 64 + 64, model.shape[0])
    for i in range(s):
        amount = np.int64(i + 1)
        for k in range(chunk * 64, stop):
            table[i, k] = (model[k] << np.int64(EXTRA)) >> amount


@njit(cache=True)
def _dot(U, r, table, s):  # pragma: no cover - compiled
    m = U.shape[1]
    acc = np.int64(0)
    for i in range(s):
        plane = np.uint32(31 - i)
        row = table[i]
        for k in range(m):
            bit = np.int64((U[r, k] >> plane) & np.uint32(1))
            acc += (-bit) & row[k]
    return wrap(acc, 36)


@njit(cache=True)
def _accumulate_gradient(U, r, scale, grad, s):  # pragma: no cover - compiled
    m = U.shape[1]
    for i in range(s):
        part = scale >> np.int64(i + 1)
        if part == 0:  # a non-negative scale shifted out: every later term is 0 too
            break
        plane = np.uint32(31 - i)
        for k in range(m):
            bit = np.int64((U[r, k] >> plane) & np.uint32(1))
            grad[k] += (-bit) & part


@njit(cache=True)
def run_epoch_kernel(
    U, labels, model, s, batch, shift, loss, sync, timing, depth
):  # pragma: no cover - compiled
    """One pass over ``U`` (n, m) uint32; ``model`` int64 holding int32 Q8.23 values.

    ``labels`` are Q.27 int64, ``shift`` = j + log2 B, ``loss`` a ``LOSS_CODES`` value.  Sync
    reads the model of the batch start; async (``sync`` false) reads, per chunk, the version
    ``perf.advance_versions`` gives for ``timing`` = (starts, batch_end, L, bytes per cycle,
    bytes per group), keeping a ring of ``depth`` (1 + the largest lag) architectural models.
    Returns the working model after the last group and how many times a model register or a
    gradient accumulator wrapped (the hardware wraps silently; the host is told).
    """
    n, m = U.shape
    chunks = (m + 63) // 64
    groups = (n + 7) // 8
    per_batch = batch // 8
    starts, batch_end, latency, per_cycle, group_bytes = timing
    ring = np.empty((depth, m), dtype=np.int64)
    ring[0, :] = model
    work = model.copy()
    table = np.empty((s, m), dtype=np.int64)
    tabulated = np.full(chunks, -1, dtype=np.int64)
    seen = np.zeros(chunks, dtype=np.int64)
    grad = np.zeros(m, dtype=np.int64)
    wraps = 0
    for g in range(groups):
        k = g // per_batch
        if sync:
            seen[:] = k
        else:
            advance_versions(g, starts[g], batch_end, k, seen, s, latency, per_cycle, group_bytes)
        for c in range(chunks):
            if seen[c] != tabulated[c]:
                _tabulate(ring[seen[c] % depth], table, s, c)
                tabulated[c] = seen[c]
        grad[:] = 0
        for r in range(8 * g, min(8 * g + 8, n)):  # padded samples add nothing: a = 0
            dot = _dot(U, r, table, s)
            scale = serial_part(dot, labels[r], loss, shift)
            if scale != 0:
                _accumulate_gradient(U, r, scale, grad, s)
        for i in range(m):  # working model, every 8 samples
            acc = wrap(grad[i], 36)
            wide = work[i] - (acc >> np.int64(EXTRA))
            work[i] = wrap(wide, 32)
            if acc != grad[i] or work[i] != wide:
                wraps += 1
        if (g + 1) % per_batch == 0 or g == groups - 1:  # architectural model, every B
            ring[(k + 1) % depth, :] = work
    return work, wraps
