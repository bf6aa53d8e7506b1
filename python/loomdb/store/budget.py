"""``cache_mb``: what a train may keep in memory between epochs, its unit and its defaults.

No paper section.  A train without an index keeps its layout in memory when it fits, and
decoded batches are kept between epochs up to the same budget.  The default depends on where
the train runs: a PostgreSQL backend is one of many a server runs at once; DuckDB runs in the
user's own process (``Database.cache_default_mb``; ``engines/duckdb/memory.py``).
"""

MB = 1_000_000  # bytes in a MB of ``cache_mb``
BACKEND_CACHE_MB = 256  # the default in a PostgreSQL backend


def in_mb(size: int) -> str:
    """``size`` bytes in cache_mb's units (``MB``), as a person reads them."""
    mb = size / MB
    return f"{mb:,.0f}" if mb >= 10 else f"{mb:.2g}"
