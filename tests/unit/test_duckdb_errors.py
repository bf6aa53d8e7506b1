"""DuckDB's errors as loomdb's: a race is a conflict to run again, anything else is not."""

from __future__ import annotations

import duckdb

from loomdb.engines.duckdb.database import translate
from loomdb.errors import LoomConflictError, LoomDatabaseError


def test_a_write_write_conflict_is_a_conflict():
    error = duckdb.TransactionException(
        'TransactionContext Error: Catalog write-write conflict on create with "m"'
    )
    assert isinstance(translate(error), LoomConflictError)
    assert isinstance(
        translate(duckdb.ConstraintException("PRIMARY KEY violated")), LoomConflictError
    )


def test_a_commit_without_disk_space_is_not_a_conflict():
    error = duckdb.TransactionException(
        'TransactionContext Error: Failed to commit: Could not write file "x.wal": '
        "No space left on device"
    )
    out = translate(error)
    assert type(out) is LoomDatabaseError and "No space left on device" in str(out)
