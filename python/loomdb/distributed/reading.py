"""A worker reading its partition of an index from PostgreSQL itself (``dsn``).  No paper
section (SketchML's workers read their partition from HDFS; loomdb's from the database).

The worker connects with psycopg and reads its runs of minibatches from the index's storage
table through ``store.storage.Reader``, which checks every row (count, order, checksum) as the
driver's reads do.  It sees committed rows only: an index made in the train's own transaction
is not there yet, and the read says so.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

from loomdb.errors import LoomError, LoomStateError
from loomdb.store import storage

_PLACEHOLDER = re.compile(r"\$(\d+)")


class _Client:
    """What ``storage.Reader`` asks of a database, over a psycopg connection (its ``$n``
    placeholders become psycopg's ``%s``, as ``engines/postgres/client.py`` does: the engines
    sit above this layer)."""

    dialect = "postgres"
    concurrent_reads = False  # a run is read whole (read_runs)

    def __init__(self, conn: Any):
        self.conn = conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        order = [int(n) - 1 for n in _PLACEHOLDER.findall(sql)]
        text = _PLACEHOLDER.sub("%s", sql.replace("%", "%%"))
        with self.conn.cursor() as cur:
            cur.execute(text, [params[i] for i in order] or None)
            return cur.fetchall() if cur.description else []

    def query_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.query(sql, params)  # psycopg hands each bytea over as bytes already

    def check_interrupt(self) -> None:
        """The driver cancels a worker's task; nothing to poll here."""

    def as_role(self, role: str | None) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # the DSN's role reads


def read_runs(
    dsn: str, reader: dict[str, Any], runs: list[tuple[int, int]], parts: int
) -> Iterator[list[storage.Stored]]:
    """The minibatches of ``runs`` (``[first, stop)`` each), a run at a time."""
    try:
        import psycopg
    except ImportError:
        raise LoomStateError(
            "a worker cannot read from PostgreSQL: psycopg is not installed there",
            hint="install loomdb with its dependencies on every worker (pip install "
            "'loomdb[dask]'), or leave 'dsn' out",
        ) from None
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as e:
        raise LoomStateError(
            f"a worker could not connect to PostgreSQL with the train's 'dsn': {e}",
            hint="give a DSN the workers can reach, or leave 'dsn' out",
        ) from None
    with conn:
        r = storage.Reader(
            _Client(conn),  # type: ignore[arg-type]  # what Reader uses of a Database
            reader["relation"], reader["index"], reader["uid"],
            reader["version"], None,
        )  # fmt: skip
        for first, stop in runs:
            try:
                yield list(r.read(first, stop, parts, reader["batch_bytes"]))
            except LoomError:
                raise
            except psycopg.Error as e:
                raise LoomStateError(
                    f"a worker could not read index '{reader['index']}': {e}",
                    hint="the workers read committed rows as the DSN's role: commit the "
                    "index first and let that role read it, or leave 'dsn' out",
                ) from None
