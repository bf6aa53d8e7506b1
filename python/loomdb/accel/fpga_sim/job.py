"""The job descriptor of the MLWeaving SGD engine (MLWeaving §3 "DoppioDB integration", §4).

Like the hardware's: mini-batch size, step size as a shift, epochs, dimension, samples and the
number of bits, plus the platform constants of the performance model (HARP v2: Arria 10 at
400 MHz, 512 bits per cycle, ~15 GB/s of read bandwidth) and the engine's options.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loomdb.errors import LoomOptionError

MAX_DIMENSION = 32 * 1024  # M_max of the hardware (8 banks × 4K-entry model slices)


@dataclass(frozen=True)
class Job:
    samples: int
    dimension: int
    bits: int = 32
    mini_batch: int = 64
    step_shift: int = 10  # λ = 2^-step_shift
    epochs: int = 1
    mode: str = "sync"  # sync | async
    chaining: bool = True
    bandwidth_gbs: float = 15.0
    clock_mhz: float = 400.0
    line_bits: int = 512
    latency_cycles: int = 32  # fixed pipeline latency L (adder tree, serial part, update)

    def __post_init__(self) -> None:
        b = self.mini_batch
        checks = [
            (self.samples >= 1, "samples must be at least 1"),
            (
                1 <= self.dimension <= MAX_DIMENSION,
                f"dimension must be 1 to {MAX_DIMENSION} (the engine's model memory)",
            ),
            (1 <= self.bits <= 32, "bits must be an integer from 1 to 32"),
            (
                b >= 8 and b % 8 == 0 and (b & (b - 1)) == 0,
                "mini_batch must be a power of two ≥ 8 (averaging is a shift; 8 banks)",
            ),
            (0 <= self.step_shift <= 30, "step_shift must be 0 to 30 (λ = 2^-step_shift)"),
            (self.epochs >= 1, "epochs must be at least 1"),
            (self.mode in ("sync", "async"), "mode must be 'sync' or 'async'"),
            (self.bandwidth_gbs > 0 and self.clock_mhz > 0, "bandwidth and clock must be > 0"),
            (self.latency_cycles >= 0, "latency_cycles must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise LoomOptionError(f"fpga-sim job: {message}", hint=f"got {self}")

    @property
    def chunks(self) -> int:
        """C = ⌈M/64⌉, the 64-feature chunks of a sample."""
        return -(-self.dimension // 64)

    @property
    def batch_shift(self) -> int:
        return self.mini_batch.bit_length() - 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


OPTION_NAMES = {f for f in Job.__dataclass_fields__}
