"""Fuzz targets with planted bugs, to prove that ``loomdb fuzz`` reports each kind of finding.

Each misbehaves on any non-empty input (its only seed is empty, so the warm-up passes).
"""

from __future__ import annotations

import os
import signal
import time


def raises(data: bytes) -> None:
    if data:
        raise KeyError("planted")


def hangs(data: bytes) -> None:
    if data:
        time.sleep(60)


def aborts(data: bytes) -> None:
    if data:
        os.abort()


def is_killed(data: bytes) -> None:
    if data:
        os.kill(os.getpid(), signal.SIGKILL)
