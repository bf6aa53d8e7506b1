"""How much memory a train in DuckDB keeps between epochs by default.  No paper section.

DuckDB runs in the user's own process, where a user would otherwise fetch the table into numpy
(10M × 20 float64 rows: 1.6 GB): a train keeps its rows in memory up to a quarter of what DuckDB
may use — its ``memory_limit`` (80% of the machine's memory unless set), at most the machine's
memory — so that a user who lowers ``memory_limit`` lowers the cache too.
"""

from __future__ import annotations

import os
import re

from loomdb.store.budget import BACKEND_CACHE_MB, MB

CACHE_SHARE = 4  # the cache's default: 1/CACHE_SHARE of DuckDB's memory
UNITS = {"bytes": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}
UNITS.update({"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50})
SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")


def size_bytes(text: str) -> int | None:
    """A size as DuckDB prints a setting (``18.8 GiB``, ``953.6 MiB``) in bytes; None if it
    is not one."""
    match = SIZE.match(text)
    if match is None or match.group(2) not in UNITS:
        return None
    return int(float(match.group(1)) * UNITS[match.group(2)])


def machine_bytes() -> int | None:
    """The machine's physical memory (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def cache_default_mb(memory_limit: str) -> int:
    """``cache_mb``'s default for a DuckDB whose ``memory_limit`` setting reads as given."""
    sizes = [s for s in (size_bytes(memory_limit), machine_bytes()) if s]
    if not sizes:
        return BACKEND_CACHE_MB
    return round(min(sizes) / CACHE_SHARE / MB)
