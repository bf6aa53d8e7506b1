"""Bit-exact fixed-point model of the MLWeaving SGD engine (MLWeaving §4.2, Algorithm 1, Fig. 7).

Arithmetic, as the engine's reference design does it:
* the model is int32 with 23 fraction bits (Q8.23); values wrap as int32 on update;
* a sample's value is read at precision s: bits a[1..s], bit 1 the most significant;
* products are bit-serial, Q_s(a)·x = Σ_{i=1..s} a[i]·(x >> i), on the model widened to
  4 extra fraction bits; dot products accumulate in a 36-bit accumulator (wrapping);
* the serial part computes scale = (dot − b) >> (j + log2 B): λ = 2^−j and the mini-batch
  average are both shifts (least squares, the loss the paper's engine trains);
* gradients are bit-serial products of a and scale, accumulated in 36 bits per feature;
* the working model takes the accumulated gradient (>> 4, back to Q8.23) every 8 samples;
  the architectural model becomes the working model every B samples.  Sync mode (default)
  reads the architectural model for every sample of a mini-batch — true mini-batch SGD;
  async mode reads the working model, at most 8 samples stale.
The loss is computed by the host in floating point, as in the paper.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from loomdb.accel.fpga_sim.job import Job

FRAC = 23  # model fraction bits
EXTRA = 4  # accumulator fraction bits beyond the model's
ACC_BITS = 36


@njit(cache=True)
def _wrap(value, bits):  # pragma: no cover
    half = np.int64(1) << np.int64(bits - 1)
    return ((value + half) & ((np.int64(1) << np.int64(bits)) - 1)) - half


@njit(cache=True)
def _serial(a, x, s):  # pragma: no cover
    """Σ_{i=1..s} a[i]·(x >> i): a holds the s top bits of the value, bit 1 first."""
    acc = np.int64(0)
    for i in range(1, s + 1):
        if (a >> np.int64(s - i)) & 1:
            acc += x >> np.int64(i)
    return acc


@njit(cache=True)
def run_batches(U, labels, model, s, batch, shift, batch_shift, sync):  # pragma: no cover
    """One pass over U (n, m) uint32 codes; model is int64 holding int32 Q8.23 values."""
    n, m = U.shape
    arch = model.copy()
    work = model.copy()
    grad = np.zeros(m, dtype=np.int64)
    wide = np.zeros(m, dtype=np.int64)
    top = np.uint32(32 - s)
    for start in range(0, n, batch):
        arch[:] = work
        stop = min(start + batch, n)
        for g in range(start, stop, 8):
            read = arch if sync else work
            for k in range(m):
                wide[k] = read[k] << EXTRA
            for r in range(g, min(g + 8, stop)):
                dot = np.int64(0)
                for k in range(m):
                    a = np.int64(U[r, k] >> top)
                    if a:
                        dot += _serial(a, wide[k], s)
                dot = _wrap(dot, ACC_BITS)
                scale = (dot - labels[r]) >> np.int64(shift + batch_shift)
                if scale == 0:
                    continue
                for k in range(m):
                    a = np.int64(U[r, k] >> top)
                    if a:
                        grad[k] = _wrap(grad[k] + _serial(a, scale, s), ACC_BITS)
            for k in range(m):  # the working model, every 8 samples
                work[k] = _wrap(work[k] - (grad[k] >> EXTRA), 32)
                grad[k] = 0
    return work


def to_fixed(values: np.ndarray, frac: int) -> np.ndarray:
    return np.floor(np.asarray(values, dtype=np.float64) * 2.0**frac).astype(np.int64)


def to_float(model: np.ndarray) -> np.ndarray:
    return np.asarray(model, dtype=np.float64) / 2.0**FRAC


class Engine:
    """Runs a job's arithmetic on quantised data: ``U`` uint32 codes, ``y`` float labels."""

    def __init__(self, job: Job):
        self.job = job

    def run_epoch(self, U: np.ndarray, y: np.ndarray, model: np.ndarray) -> np.ndarray:
        job = self.job
        labels = to_fixed(y, FRAC + EXTRA)
        return run_batches(
            np.ascontiguousarray(U, dtype=np.uint32),
            labels,
            np.asarray(model, np.int64),
            job.bits,
            job.mini_batch,
            job.step_shift,
            job.batch_shift,
            job.mode == "sync",
        )


def reference_sgd(values: np.ndarray, y: np.ndarray, job: Job, epochs: int = 1) -> np.ndarray:
    """Float mini-batch SGD on the same (fixed-point) data: the engine's intended arithmetic."""
    w = np.zeros(values.shape[1])
    lam = 2.0**-job.step_shift
    for _ in range(epochs):
        for start in range(0, len(y), job.mini_batch):
            X, b = values[start : start + job.mini_batch], y[start : start + job.mini_batch]
            w = w - lam / job.mini_batch * ((X @ w - b) @ X)
    return w


def least_squares_loss(values: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float(0.5 * np.mean((values @ w - y) ** 2))
