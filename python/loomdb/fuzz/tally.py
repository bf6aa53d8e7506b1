"""What a fuzzing child shares with its parent while it runs: how many inputs it has run (and
how many of those decoded), when, and the input it is running now.

No paper section: plumbing of ``loomdb fuzz``.

libFuzzer ends its process however it likes (``exit`` after the last run, ``_Exit`` from a
signal handler, or the kernel's OOM killer ends it), so nothing can be reported at the end.
Instead the child keeps this small memory-mapped file up to date before every input (a few
hundred nanoseconds), and the parent reads it after the child is gone: the count and rate of
inputs, and the input that was running when the child died — the offending one.
"""

from __future__ import annotations

import mmap
import struct
import time
from pathlib import Path

# inputs run, inputs that decoded, start time, time of the last input, its length
HEAD = struct.Struct("<QQddQ")


class Tally:
    def __init__(self, path: Path, max_len: int):
        self.max_len = max_len
        size = HEAD.size + max_len
        with open(path, "a+b") as f:
            if f.seek(0, 2) < size:
                f.truncate(size)
            self.map = mmap.mmap(f.fileno(), size)
        self.runs, self.decoded, self.start = 0, 0, time.time()

    def restart(self) -> None:
        """Count from zero from now on (after warming up on the seeds)."""
        self.runs, self.decoded, self.start = 0, 0, time.time()
        HEAD.pack_into(self.map, 0, 0, 0, self.start, self.start, 0)

    def begin(self, data: bytes) -> None:
        """Note that ``data`` is about to run (and whether the one before it decoded)."""
        data = data[: self.max_len]
        self.runs += 1
        now = time.time()
        HEAD.pack_into(self.map, 0, self.runs, self.decoded, self.start, now, len(data))
        self.map[HEAD.size : HEAD.size + len(data)] = data

    @staticmethod
    def read(path: Path) -> tuple[int, int, float, bytes]:
        """(inputs run, how many decoded, seconds they took, the last input), as a finished
        child left them; the count of decoded inputs may miss the very last one."""
        raw = path.read_bytes() if path.exists() else b""
        if len(raw) < HEAD.size:
            return 0, 0, 0.0, b""
        runs, decoded, start, last, length = HEAD.unpack_from(raw)
        return runs, decoded, max(last - start, 0.0), raw[HEAD.size : HEAD.size + length]
