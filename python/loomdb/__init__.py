"""loomdb: in-database machine learning for DuckDB and PostgreSQL.

Lay a table out for learning (dense, TOC-compressed or MLWeaving bit-plane minibatches), train
generalized linear models over that layout on a pluggable backend, and predict inside SELECT.

>>> import loomdb
>>> con = loomdb.connect()            # embedded DuckDB with every loom_* function registered
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loomdb.errors import (
    LoomConflictError,
    LoomDatabaseError,
    LoomDataError,
    LoomError,
    LoomFormatError,
    LoomInterrupted,
    LoomNotFoundError,
    LoomOptionError,
    LoomStateError,
    LoomSyntaxError,
)

__version__ = "0.6.0"

if TYPE_CHECKING:
    from loomdb.engines.duckdb.connection import Connection

__all__ = [
    "LoomConflictError",
    "LoomDataError",
    "LoomDatabaseError",
    "LoomError",
    "LoomFormatError",
    "LoomInterrupted",
    "LoomNotFoundError",
    "LoomOptionError",
    "LoomStateError",
    "LoomSyntaxError",
    "__version__",
    "connect",
    "register",
]


def connect(path: str | None = None, **config: Any) -> Connection:
    """Open (or create) a DuckDB database with loomdb's functions and catalog in it."""
    from loomdb.engines.duckdb.connection import connect as _connect

    return _connect(path, **config)


def register(con: Any, progress: bool = True) -> Any:
    """Register loomdb's functions and catalog on an existing ``duckdb`` connection."""
    from loomdb.engines.duckdb.connection import register as _register

    _register(con, progress)
    return con
