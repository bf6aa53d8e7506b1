"""cache_mb's default in DuckDB: a quarter of its memory_limit as DuckDB prints it, at most a
quarter of the machine's memory."""

from __future__ import annotations

import pytest

from loomdb.engines.duckdb import memory


@pytest.mark.parametrize(
    "text, size",
    [
        ("953.6 MiB", int(953.6 * 2**20)),
        ("18.8 GiB", int(18.8 * 2**30)),
        ("512 bytes", 512),
        ("3GB", 3 * 10**9),
        ("1.5 TiB", int(1.5 * 2**40)),
        ("", None),
        ("lots", None),
        ("12 parsecs", None),
    ],
)
def test_sizes_read_as_duckdb_prints_them(text, size):
    assert memory.size_bytes(text) == size


def test_the_default_is_a_quarter_of_the_limit_in_cache_mb_units():
    assert memory.cache_default_mb("953.6 MiB") == 250  # SET memory_limit = '1GB'
    assert memory.cache_default_mb("95.3 MiB") == 25


def test_an_unlimited_duckdb_keeps_a_quarter_of_the_machine(monkeypatch):
    monkeypatch.setattr(memory, "machine_bytes", lambda: 16 * 10**9)
    assert memory.cache_default_mb("16383.9 PiB") == 4000  # SET memory_limit = '-1'
    assert memory.cache_default_mb("1.0 GiB") == 268
    monkeypatch.setattr(memory, "machine_bytes", lambda: None)
    assert memory.cache_default_mb("not a size") == 256
