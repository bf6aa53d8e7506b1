"""What loomdb keeps per DuckDB connection: its database's identity, interrupts, progress,
whether the caller holds a transaction open.  No paper section.

Progress reaches Python users by default: through the ``loomdb.progress`` logger when logging
is configured (every message, at INFO), else as plain lines on stderr, one a second at most
(``loomdb.connect(progress=False)`` silences it; ``{"progress": false}`` silences one call).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field

from loomdb.errors import LoomInterrupted, LoomStateError

progress_log = logging.getLogger("loomdb.progress")
PRINT_EVERY_S = 1.0


@dataclass
class ConnectionState:
    identity: str
    read_only: bool = False
    progress: bool = True
    interrupted: threading.Event = field(default_factory=threading.Event)
    in_transaction: bool = False
    last_printed: float = 0.0

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
