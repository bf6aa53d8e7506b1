"""What a decoder accepts as a stored record, checked before anything reads it.

No paper section: this is loomdb's own guard.  A database hands a decoder ``bytes`` (DuckDB,
psycopg), a ``memoryview`` (psycopg's bytea), ``None`` (a NULL) or, through a bug, anything else.
Every decoder starts with ``byte_view`` so a NULL or a wrong type is a ``LoomFormatError``
naming the record, never a ``TypeError`` from deep inside numpy or struct.
"""

from __future__ import annotations

from loomdb.errors import LoomFormatError

# The hint of every "these bytes are broken" error: the codecs cannot repair a record, only the
# index's owner can rebuild it from its source table.
REBUILD = "the stored record is corrupted or was not written by loomdb: rebuild the index (REINDEX)"


def byte_view(blob: object, what: str) -> memoryview:
    """``blob`` as a flat, contiguous view of unsigned bytes, or a ``LoomFormatError``."""
    if blob is None:
        raise LoomFormatError(f"{what} is NULL; expected its stored bytes", hint=REBUILD)
    if isinstance(blob, str):  # a str has no buffer, but say so plainly: text is not a record
        raise LoomFormatError(f"{what} is text (str); expected bytes", hint=REBUILD)
    try:
        view = memoryview(blob)  # type: ignore[arg-type]
        if not view.c_contiguous:
            raise TypeError("not contiguous")
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")
    except (TypeError, ValueError, BufferError):
        raise LoomFormatError(
            f"{what} must be bytes, bytearray or a contiguous buffer; got {type(blob).__name__}",
            hint=REBUILD,
        ) from None
