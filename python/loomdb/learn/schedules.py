"""Learning-rate schedules, indexed by epoch (0-based), like river's ``Scheduler.get(t)``.
No paper section."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    name: str
    lr: float
    decay: float

    def get(self, epoch: int) -> float:
        if self.name == "constant":
            return self.lr
        if self.name == "inverse-t":
            return self.lr / (1.0 + self.decay * epoch)
        if self.name == "exponential":
            return self.lr * self.decay**epoch
        raise ValueError(f"unknown schedule {self.name}")


SCHEDULES = ("constant", "inverse-t", "exponential")
DEFAULT_DECAY = {"constant": 0.0, "inverse-t": 0.1, "exponential": 0.9}
