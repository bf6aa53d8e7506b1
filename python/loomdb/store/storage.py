"""The storage table every format writes: one row per (minibatch, part), each proving itself.

No paper section (Bismarck's "one row per minibatch", generalised).  Columns::

    batch integer   the minibatch number, 0 … batches−1 (rows were shuffled once); in a
                    grouped (SlimML) layout each unit is one group of similar rows
    part integer    0: the labels; 1 … P: the format's parts (dense/toc: 1; mlweaving: plane
                    p is part p + 1, so precision s reads ``part <= s``); −1 in a grouped
                    layout: the group's aggregated point (``store.grouped``), read once per
                    train and never with the rows
    rows integer    rows of the minibatch
    version smallint  the format's record version
    payload bytes   the part's bytes
    checksum bigint CRC-32 of (index uid, batch, part, rows, version, payload)

A reader asks for minibatches ``[first, stop)`` (or a list of them) up to part P and gets every
one exactly once, in order, with parts 0…P, each matching its checksum: a missing, duplicated,
swapped (even between indexes of the same shape) or altered row is a ``LoomFormatError`` naming
the index and the fix.  Rows private to one call carry no checksum and are read unchecked
(every other check stays): a train's layout kept in memory, or in a temporary table of its
session that the call writes, reads back and drops; nothing else can write it, and a checksum
was a fifth of a cold epoch over such a table in PostgreSQL (10M × 20 rows: 3.3 s an epoch).
A table that parallel workers read is checked like an index.  A grouped layout's table is
keyed by (batch, part), so reading a few groups finds their rows by the key and the engine
returns nothing of the others.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from zlib_ng import zlib_ng

from loomdb.errors import LoomFormatError
from loomdb.store import read_ahead
from loomdb.store.db import Database

COLUMNS = [
    ("batch", "integer"),
    ("part", "integer"),
    ("rows", "integer"),
    ("version", "smallint"),
    ("payload", "bytes"),
    ("checksum", "bigint"),
]
SUMMARY_PART = -1  # a grouped layout's aggregated point of each group
_HEAD = struct.Struct("<16siiih")
Buffer = bytes | memoryview  # a payload as the engine hands it over (never copied here)
PAGE_BYTES = 64 << 20  # about this much payload held by a reader: bounded memory, few queries


def checksum(uid: str, batch: int, part: int, rows: int, version: int, payload: Buffer) -> int:
    """zlib's CRC-32, computed by zlib-ng (the same values, 18x faster here: 57 GB/s against
    3.2, where the checksum was 28% of a parallel worker's epoch over 10M × 20 rows)."""
    head = _HEAD.pack(_uid_bytes(uid), batch, part, rows, version)
    return zlib_ng.crc32(payload, zlib_ng.crc32(head))


@functools.lru_cache(maxsize=64)
def _uid_bytes(uid: str) -> bytes:
    """An index's uid as the 16 bytes a checksum starts with, made once per index rather than
    once per part (0.4 µs of a small part's 1.1 µs checksum, once the CRC took nanoseconds)."""
    return bytes.fromhex(uid)[:16].ljust(16, b"\0")


# How each engine stores the payloads: as they are.  A format compresses its own parts where it
# pays (toc, the zstd stage) and is read every epoch; otherwise DuckDB compresses the BLOBs at
# its next checkpoint (ZSTD) and PostgreSQL each bytea as it is written (pglz, TOAST), and both
# decompress them at every read.  Measured, cold epochs: DuckDB, 2M × 20 dense rows after a
# checkpoint, 0.74–0.81 s against 1.10–1.33 s; PostgreSQL, census-like 1M × 40 dense, 0.45 s
# against 0.61 s (its storage 332 MB against pglz's 49 MB; toc unchanged at 0.45 s, 64 MB).
PAYLOAD = {"duckdb": " USING COMPRESSION uncompressed", "postgres": ""}
UNCOMPRESSED = {"postgres": "ALTER TABLE {} ALTER COLUMN payload SET STORAGE EXTERNAL"}


def create(db: Database, relation: str, keyed: bool = False) -> None:
    """The storage table; ``keyed`` (grouped layouts, read a few groups at a time): with
    (batch, part) as its primary key."""
    body = ", ".join(
        f"{c} {db.type(t)}" + (PAYLOAD[db.dialect] if c == "payload" else "") for c, t in COLUMNS
    )
    if keyed:
        body += ", PRIMARY KEY (batch, part)"
    temporary = "TEMPORARY " if relation.startswith(TEMP_SCHEMAS[db.dialect]) else ""
    db.execute(f"CREATE {temporary}TABLE {relation} ({body})")
    if db.dialect in UNCOMPRESSED:  # PostgreSQL: out of line, never compressed (TOAST EXTERNAL)
        db.execute(UNCOMPRESSED[db.dialect].format(relation))


TEMP_SCHEMAS = {"postgres": "pg_temp.", "duckdb": "temp."}


def scratch_relation(db: Database, uid: str) -> str:
    """A temporary storage table, private to this session, for a train without an index."""
    return f"{TEMP_SCHEMAS[db.dialect]}loom_scratch_{uid}"


def staged_relation(uid: str) -> str:
    """The table an index's minibatches are written to, renamed to the index's storage table
    when complete (``layout.build``): no index can take the name (``$`` is not allowed)."""
    return f'loom_data."staged${uid}"'


def shared_scratch_relation(db: Database, uid: str) -> str:
    """A table for one train's layout that the engine's parallel workers can read (they cannot
    read a temporary table): in the storage schema, named so no index can take the name
    (``$`` is not allowed in index names), made and dropped inside the train's transaction."""
    return f'loom_data."scratch${uid}"'


def rows_of(
    uid: str,
    batch: int,
    rows: int,
    version: int,
    parts: Sequence[bytes],
    first: int = 0,
    checked: bool = True,
) -> list[tuple]:
    """The stored rows of one minibatch: ``parts[0]`` the labels, then the format's parts
    (numbered from ``first``: a format may add a minibatch's last parts later); without
    ``checked`` (rows private to one call, above) the checksum is None."""
    return [
        (batch, p, rows, version, payload, _crc(checked, uid, batch, p, rows, version, payload))
        for p, payload in enumerate(parts, start=first)
    ]


def summary_row(
    uid: str, batch: int, rows: int, version: int, payload: bytes, checked: bool = True
) -> tuple:
    """The stored row of a group's aggregated point (part −1)."""
    part = SUMMARY_PART
    crc = _crc(checked, uid, batch, part, rows, version, payload)
    return (batch, part, rows, version, payload, crc)


def _crc(checked: bool, *row: Any) -> int | None:
    return checksum(*row) if checked else None


def write(db: Database, relation: str, rows: list[tuple]) -> None:
    if rows:
        db.insert(relation, [c for c, _ in COLUMNS], rows)


@dataclass
class Stored:
    """One minibatch as read back: its number, rows and parts (labels first)."""

    batch: int
    rows: int
    parts: list[Buffer]

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.parts)


def damaged(index: str, what: str) -> LoomFormatError:
    return LoomFormatError(
        f"index '{index}' is damaged: {what}",
        hint=f"rebuild it from its source with SELECT loom_reindex('{index}')",
    )


# A row's place, (batch, part): readers sort a query's rows here, not in the engine.  An
# engine's ORDER BY moves every payload with its row (DuckDB: half of a 64 MB page's query,
# 0.58 s against 0.28 s for 2M × 20 dense rows), where Python's sort moves references, and the
# rows mostly arrive in the order they were written, for which it only compares.
_stored_order = operator.itemgetter(0, 1)


class Reader:
    """Reads minibatches of one index's storage table and checks each as it arrives."""

    def __init__(
        self,
        db: Database,
        relation: str,
        index: str,
        uid: str,
        version: int,
        owner: str | None,
        checked: bool = True,
    ):
        self.db, self.relation, self.index = db, relation, index
        self.uid, self.version, self.owner = uid, version, owner
        self.checked = checked  # False: a private table, its rows without checksums

    def _query(self, where: str, params: list) -> list[tuple]:
        """The rows ``where`` says, in (batch, part) order (``_stored_order``)."""
        sql = f"SELECT batch, part, rows, version, payload, checksum FROM {self.relation} "
        self.db.check_interrupt()
        with self.db.as_role(self.owner):  # the owner's table: read with the owner's rights
            rows = self.db.query_blobs(sql + f"WHERE {where}", params)
        rows.sort(key=_stored_order)
        return rows

    def read(self, first: int, stop: int, parts: int, batch_bytes: int) -> Iterator[Stored]:
        """Minibatches ``[first, stop)`` with parts ``0 … parts``, each exactly once, in order;
        where the engine allows, each page's query runs while the caller uses the page before
        (``read_ahead``: two pages of half the bytes, so a reader holds as much as before)."""
        held = PAGE_BYTES // 2 if self.db.concurrent_reads else PAGE_BYTES
        size = max(1, min(4096, held // max(batch_bytes, 1)))
        where = "batch >= $1 AND batch < $2 AND part >= 0 AND part <= $3"
        pages = [range(start, min(start + size, stop)) for start in range(first, stop, size)]
        queries = [functools.partial(self._query, where, [p.start, p.stop, parts]) for p in pages]
        concurrent = self.db.concurrent_reads and len(pages) > 1
        results: Generator[list[tuple], None, None]
        results = read_ahead.ahead(queries) if concurrent else (q() for q in queries)
        try:
            for page, rows in zip(pages, results):
                yield from self._checked(rows, page, parts)
        finally:
            results.close()  # now, not when a traceback lets go of this frame

    def read_ids(self, ids: Sequence[int], parts: int) -> Iterator[Stored]:
        """Minibatches ``ids`` (ascending) with parts ``0 … parts``; the others are not read."""
        if not len(ids):
            return iter(())
        where = f"batch = ANY(CAST($1 AS {self.db.type('integer[]')})) AND part >= 0 AND part <= $2"
        rows = self._query(where, [[int(i) for i in ids], parts])
        return self._checked(rows, list(ids), parts)

    def summaries(self, count: int) -> list[Stored]:
        """The aggregated point (part −1) of every group ``0 … count−1``, checked."""
        rows = self._query("part = $1", [SUMMARY_PART])
        out: list[Stored] = []
        for row in rows:
            batch, _part, n, _version, payload = row[:5]
            self._verify(row)
            if batch != len(out):
                what = "is missing" if batch > len(out) else "appears twice"
                raise damaged(
                    self.index, f"the aggregated point of group {min(batch, len(out))} {what}"
                )
            out.append(Stored(batch, n, [bytes(payload)]))
        if len(out) != count:
            raise damaged(self.index, f"it holds {len(out)} aggregated points, not {count}")
        return out

    def _verify(self, row: tuple) -> Buffer:
        batch, part, rows, version, payload, crc = row
        if payload is None:
            raise damaged(self.index, f"minibatch {batch} part {part} holds NULL")
        if batch is None or part is None or rows is None:
            raise damaged(self.index, f"minibatch {batch} part {part}'s row count is NULL")
        if version != self.version:
            raise damaged(
                self.index, f"minibatch {batch} is format version {version}, not {self.version}"
            )
        if not self.checked:
            return payload
        try:
            expected = checksum(self.uid, batch, part, rows, version, payload)
        except ValueError:  # bytes.fromhex: a uid edited by hand
            raise damaged(self.index, f"its catalog uid {self.uid!r} is not hexadecimal") from None
        except (struct.error, TypeError, OverflowError):  # a number out of the header's range
            raise damaged(
                self.index, f"minibatch {batch} part {part}'s header ({rows} rows) is out of range"
            ) from None
        if crc is None or expected != int(crc):
            raise damaged(self.index, f"minibatch {batch} part {part} does not match its checksum")
        return payload

    def _checked(
        self, rows: Iterable[tuple], wanted: Sequence[int], parts: int
    ) -> Iterator[Stored]:
        """The minibatches of ``rows`` (ordered by batch, part), which must be exactly
        ``wanted`` (ascending), each once with parts ``0 … parts``."""
        at, current = 0, None
        for row in rows:
            batch, part, n = row[0], row[1], row[2]
            payload = self._verify(row)
            if current is not None and batch != current.batch:
                yield self._finish(current, parts)
                at, current = at + 1, None
            if current is None:
                expected = wanted[at] if at < len(wanted) else None
                if batch != expected:
                    later = expected is not None and batch > expected
                    shown = expected if later else batch
                    raise damaged(
                        self.index,
                        f"minibatch {shown} {'is missing' if later else 'appears twice'}",
                    )
                current = Stored(batch, n, [])
            if part != len(current.parts) or n != current.rows:
                raise damaged(self.index, f"minibatch {batch} has a missing or repeated part")
            current.parts.append(payload)
        if current is not None:
            yield self._finish(current, parts)
            at += 1
        if at != len(wanted):
            raise damaged(self.index, f"minibatch {wanted[at]} is missing")

    def _finish(self, current: Stored, parts: int) -> Stored:
        if len(current.parts) != parts + 1:
            raise damaged(
                self.index, f"minibatch {current.batch} has {len(current.parts) - 1} parts"
            )
        return current
