"""The tiny engine-neutral interface the store talks to a database through.

``engines/duckdb`` and ``engines/postgres`` implement it; nothing below ``engines/`` knows which
engine it runs in.  SQL uses ``$1, $2, …`` placeholders on both engines and abstract type names
(``TYPES`` keys) resolved by :meth:`Database.type`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

TYPES = ("text", "bigint", "integer", "double", "bytes", "timestamp", "boolean")


class Queryable(Protocol):
    """Enough to read and write the catalog (a psycopg client has just this)."""

    dialect: str

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def columns(self, relation: str) -> list[tuple[str, str]]:
        """``(name, kind)`` of a relation's columns; kind is numeric | boolean | other."""
        ...


class Database(Queryable, Protocol):
    def type(self, abstract: str) -> str:
        """The engine's spelling of an abstract type from ``TYPES``."""
        ...

    def stream(self, sql: str, params: Sequence[Any] = (), size: int = 16) -> Iterator[tuple]:
        """Rows of a query fetched ``size`` at a time (never the whole result at once)."""
        ...

    def atomic(self) -> AbstractContextManager[None]:
        """A (sub)transaction: everything inside commits together or not at all."""
        ...

    def notice(self, message: str) -> None:
        """Report progress (a NOTICE in PostgreSQL, the progress hook in DuckDB)."""
        ...

    def signature(self, relation: str, columns: Sequence[str], where: str | None) -> str:
        """A cheap fingerprint of the rows (count and a hash sum) to tell a stale index."""
        ...

    def read_matrix(
        self,
        relation: str,
        columns: Sequence[str],
        where: str | None,
        shuffle_seed: int | None,
        chunk: int,
    ) -> Iterator[np.ndarray]:
        """Rows of ``columns`` (quoted SQL expressions) as float64 arrays of ``chunk`` rows.

        With ``shuffle_seed`` the rows come in a seeded pseudo-random order (shuffle once,
        Bismarck style).  Values travel packed, never one Python object per value.
        """
        ...
