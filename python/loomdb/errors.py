"""One hierarchy of errors for everything loomdb raises on purpose.  No paper section.

Every message says what was wrong, what was expected and what to do.  ``hint`` carries the
"what to do" part separately so PostgreSQL can show it as the error's HINT line.
"""

from __future__ import annotations


class LoomError(Exception):
    """Base class of every error loomdb raises deliberately."""

    sqlstate = "XX000"

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} (hint: {self.hint})"


class LoomOptionError(LoomError, ValueError):
    """An option, argument or name is unknown, mistyped or out of range."""

    sqlstate = "22023"  # invalid_parameter_value


class LoomDataError(LoomError, ValueError):
    """The data cannot be trained on: NULLs, NaN/Inf, a single class, an empty source…"""

    sqlstate = "22000"  # data_exception


class LoomDivergedError(LoomDataError):
    """Training diverged (every restart at a smaller step too) or left non-finite
    coefficients: nothing was stored.  ``loom_tune`` records such a trial as failed."""


class LoomNothingTrainedError(LoomDataError):
    """A skip policy (SlimML's or a baseline's) left out every row of a train's first epoch:
    nothing was stored.  ``loom_tune`` records such a trial as failed."""


class LoomNotFoundError(LoomError, LookupError):
    """A model, index, table or column does not exist."""

    sqlstate = "42704"  # undefined_object


class LoomStateError(LoomError, RuntimeError):
    """The operation is not valid in the current state (stale index, backend unusable…)."""

    sqlstate = "55000"  # object_not_in_prerequisite_state


class LoomFormatError(LoomError, ValueError):
    """Stored bytes are truncated, corrupted, hostile or of an unknown version."""

    sqlstate = "XX001"  # data_corrupted


class LoomSyntaxError(LoomError, SyntaxError):
    """loomdb's SQL front-end could not understand a statement."""

    sqlstate = "42601"  # syntax_error


class LoomConflictError(LoomStateError):
    """Another session changed the same catalog rows first (a race, or a name another role
    holds): nothing was written; retry, or choose another name."""

    sqlstate = "40001"  # serialization_failure


class LoomDatabaseError(LoomError):
    """The database refused a statement loomdb ran for you (the engine's own message)."""

    sqlstate = "58000"  # system_error


class LoomInterrupted(LoomError):
    """The caller cancelled the call (``con.interrupt()``, ``pg_cancel_backend``, Ctrl-C)."""

    sqlstate = "57014"  # query_canceled
