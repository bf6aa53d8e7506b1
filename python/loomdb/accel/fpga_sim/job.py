"""The job descriptor of the MLWeaving SGD engine (MLWeaving §3 "DoppioDB integration", §4).

Like the hardware's descriptor it holds the mini-batch size B, the step size as a shift j
(λ = 2^−j), the number of epochs, the dimension M, the number of samples N and the number of
bits s; the data, label and model *addresses* of the hardware have no counterpart (the engine is
handed arrays).  Beside those it carries the platform constants of the performance model
(HARP v2: Arria 10 at 400 MHz, 512 bits per cycle, ~15 GB/s of read bandwidth), the fixed
pipeline latency L, and the engine's options: loss, sync | async, chaining on/off.

Departures, all documented here:

* B must be a *power of two* ≥ 8, not just a multiple of 8: the engine folds the mini-batch
  average into the shift ``j + log2 B`` and has no divider, so other sizes have no exact
  hardware meaning.
* ``loss`` "logistic" and "svm" are loomdb's extension (the paper's engine trains least
  squares only); they change only the serial part ``df`` (see ``fixed_point``).
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import Any

from loomdb.errors import LoomOptionError

MAX_DIMENSION = 32 * 1024  # M_max of the hardware (8 banks, 64-wide model slices in BRAM)
BANKS = 8  # samples processed in lock-step; a "group"
CHUNK = 64  # features per 64-bit bank word
LOSSES = ("linear", "logistic", "svm")
MODES = ("sync", "async")


def check_batch_size(size: int, where: str) -> None:
    """Refuse an index's (or a simulation's) ``batch_size`` the engine cannot run as it is: B
    must be a power of two ≥ 8 (8 banks; the average is a shift).  Rounding it up would divide
    each block's gradient by more rows than it holds, so it is refused, never rounded."""
    if not (_is_int(size) and size >= BANKS and (size & (size - 1)) == 0):
        up = max(BANKS, 1 << (max(int(size), 1) - 1).bit_length())
        down = max(BANKS, up >> 1)
        raise LoomOptionError(
            f"fpga-sim: {where} has batch_size = {size}, but the MLWeaving engine's mini-batch "
            "must be a power of two ≥ 8 (8 banks; the average is a shift, there is no divider)",
            hint=f"use batch_size = {down} or {up} (an index: rebuild it WITH "
            f"(batch_size = {up})), or train with the cpu backend, which honours {size}",
        )


@dataclass(frozen=True)
class Job:
    """One training job: what the host writes into the engine's descriptor."""

    samples: int  # N
    dimension: int  # M ≤ 32K
    bits: int = 32  # s, the number of bit planes read per value
    mini_batch: int = 64  # B, a power of two ≥ 8
    step_shift: int = 10  # j: λ = 2^−j
    epochs: int = 1
    loss: str = "linear"  # "linear" (the paper's); "logistic" | "svm" are loomdb's extension
    mode: str = "sync"  # sync (RAW-safe, Table 6) | async (reads whatever model is there)
    chaining: bool = True  # §5 chaining: the next batch starts after the first chunk is updated
    bandwidth_gbs: float = 15.0  # achievable read bandwidth of the platform
    clock_mhz: float = 400.0
    line_bits: int = 512  # one cache line per cycle
    latency_cycles: int = 32  # L: adder tree + serial part + update pipeline, fixed

    def __post_init__(self) -> None:
        b = self.mini_batch
        checks = [
            (_is_int(self.samples) and self.samples >= 1, "samples must be an integer ≥ 1"),
            (
                _is_int(self.dimension) and 1 <= self.dimension <= MAX_DIMENSION,
                f"dimension must be 1 to {MAX_DIMENSION} (the engine's model memory holds "
                f"{MAX_DIMENSION} weights)",
            ),
            (_is_int(self.bits) and 1 <= self.bits <= 32, "bits must be an integer from 1 to 32"),
            (
                _is_int(b) and b >= BANKS and (b & (b - 1)) == 0,
                "mini_batch must be a power of two ≥ 8 (8 banks; the average is a shift)",
            ),
            (
                _is_int(self.step_shift) and 0 <= self.step_shift <= 30,
                "step_shift must be an integer 0 to 30 (λ = 2^-step_shift)",
            ),
            (_is_int(self.epochs) and self.epochs >= 1, "epochs must be an integer ≥ 1"),
            (self.loss in LOSSES, f"loss must be one of {', '.join(LOSSES)}"),
            (self.mode in MODES, "mode must be 'sync' or 'async'"),
            (isinstance(self.chaining, bool), "chaining must be true or false"),
            (self.bandwidth_gbs > 0 and self.clock_mhz > 0, "bandwidth and clock must be > 0"),
            (
                _is_int(self.line_bits) and self.line_bits == BANKS * CHUNK,
                "line_bits must be 512 (8 banks × 64 lanes)",
            ),
            (
                _is_int(self.latency_cycles) and self.latency_cycles >= 0,
                "latency_cycles must be an integer ≥ 0",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise LoomOptionError(
                    f"fpga-sim job: {message}",
                    hint="fix that field of the job; the others were "
                    + ", ".join(f"{k}={v!r}" for k, v in asdict(self).items()),
                )

    @property
    def chunks(self) -> int:
        """C = ⌈M/64⌉, the 64-feature chunks of a sample."""
        return -(-self.dimension // CHUNK)

    @property
    def groups(self) -> int:
        """⌈N/8⌉ groups of 8 samples (the last one zero-padded)."""
        return -(-self.samples // BANKS)

    @property
    def batches(self) -> int:
        return -(-self.samples // self.mini_batch)

    @property
    def batch_shift(self) -> int:
        """log2 B: the mini-batch average as a right shift."""
        return self.mini_batch.bit_length() - 1

    @property
    def step(self) -> float:
        """λ = 2^−j."""
        return 2.0**-self.step_shift

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


OPTION_NAMES = set(Job.__dataclass_fields__)
