"""What loomdb keeps per DuckDB connection: its database's identity, interrupts, progress,
whether the caller holds a transaction open.  No paper section.

Progress reaches Python users by default: through the ``loomdb.progress`` logger when logging
is configured (every message, at INFO), else as plain lines on stderr, one a second at most
(``loomdb.connect(progress=False)`` silences it; ``{"progress": false}`` silences one call).
"""

from __future__ import annotations

import logging
import secrets
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from loomdb.errors import LoomInterrupted, LoomStateError

progress_log = logging.getLogger("loomdb.progress")
PRINT_EVERY_S = 1.0


@dataclass
class ConnectionState:
    """One DuckDB connection as loomdb knows it; ``token`` names it in its macros (a random
    BIGINT: DuckDB hands a UDF a number column for less than a text one)."""

    identity: str
    read_only: bool = False
    progress: bool = True
    interrupted: threading.Event = field(default_factory=threading.Event)
    in_transaction: bool = False
    last_printed: float = 0.0
    token: int = field(default_factory=lambda: secrets.randbits(63))
    #: how the calling connection resolves names, which loomdb's cursor follows: its
    #: ``search_path`` after ``SET schema``/``SET search_path`` ("": DuckDB's default), and
    #: the database ``USE`` made its default when that is not loomdb's (None: loomdb's)
    search_path: str = ""
    elsewhere: str | None = None
    namespace_changed: bool = False  # a USE/SET/RESET ran: read the two again before the next

    def notice(self, message: str) -> None:
        if not self.progress:
            return
        if progress_log.hasHandlers():  # logging is configured: it decides what is shown
            progress_log.info(message)
            return
        now = time.monotonic()
        if now - self.last_printed >= PRINT_EVERY_S:  # plain stderr: a line a second at most
            self.last_printed = now
            print(message, file=sys.stderr, flush=True)

    def follow(self, cursor: Any) -> None:
        """Make ``cursor`` (loomdb's own) resolve names as the calling connection does."""
        if self.search_path:
            cursor.execute("SET search_path = '" + self.search_path.replace("'", "''") + "'")

    def check_interrupt(self) -> None:
        if self.interrupted.is_set():
            raise LoomInterrupted("interrupted: the call was cancelled with interrupt()")

    def may_write(self, function: str) -> None:
        """Refuse a writing function where its writes could not be what the caller sees."""
        if self.read_only:
            raise LoomStateError(
                f"{function} writes the catalog, and this database is open read-only",
                hint="connect without read_only=True to train or build indexes",
            )
        if self.in_transaction:
            raise LoomStateError(
                f"{function} cannot run inside an open transaction on DuckDB: it commits on "
                "a connection of its own, so a ROLLBACK could not undo it",
                hint="COMMIT or ROLLBACK first, then run it on its own",
            )


class Instance:
    """The loomdb functions of one DuckDB database instance (shared by all its connections and
    cursors): the live connections they may open cursors on, and each connection's state."""

    def __init__(self, identity: str, read_only: bool):
        self.identity, self.read_only = identity, read_only
        self.connections: list[weakref.ref[Any]] = []
        self.states: dict[int, ConnectionState] = {}
        self.default = ConnectionState(identity, read_only)
        self.owner: weakref.ref[Any] | None = None  # the connection that registered the functions
        # each connection equipped with macros, and its state (what registering it again finds)
        self.equipped: weakref.WeakKeyDictionary[Any, ConnectionState] = weakref.WeakKeyDictionary()

    def add(self, con: Any, state: ConnectionState) -> None:
        self.connections = [r for r in self.connections if r() is not None] + [weakref.ref(con)]
        self.states[state.token] = state
        self.equipped[con] = state

    def cursor(self) -> Any:
        """A cursor on any live connection of this database (a connection of its own)."""
        from loomdb.errors import LoomError

        for ref in reversed(self.connections):
            con = ref()
            if con is not None:
                try:
                    return con.cursor()
                except Exception:  # noqa: BLE001 - closed: try another
                    continue
        raise LoomError("every DuckDB connection these loomdb functions belong to is closed")

    def lazy_cursor(self) -> LazyCursor:
        """A cursor opened on first use: a vector whose model is pinned runs no query, and
        opening a cursor costs about as much as scoring 2,048 rows."""
        return LazyCursor(self)

    def state(self, token: int | None) -> ConnectionState:
        """The calling connection's state (its macros pass the token), else a neutral one."""
        return self.states.get(token, self.default) if token is not None else self.default


class LazyCursor:
    """An :meth:`Instance.cursor` opened when first used; ``close`` closes it if it was."""

    def __init__(self, instance: Instance):
        self._instance = instance
        self._cursor: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._cursor is None:
            self._cursor = self._instance.cursor()
        return getattr(self._cursor, name)

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()
