"""The storage table every format writes: one row per (minibatch, part), each proving itself.

No paper section (Bismarck's "one row per minibatch", generalised).  Columns::

    batch integer   the minibatch number, 0 … batches−1 (rows were shuffled once)
    part integer    0: the labels; 1 … P: the format's parts (dense/toc: 1; mlweaving: plane
                    p is part p + 1, so precision s reads ``part <= s``)
    rows integer    rows of the minibatch
    version smallint  the format's record version
    payload bytes   the part's bytes
    checksum bigint CRC-32 of (index uid, batch, part, rows, version, payload)

A reader asks for minibatches ``[first, stop)`` up to part P and gets every one exactly once, in
order, with parts 0…P, each matching its checksum: a missing, duplicated, swapped (even between
indexes of the same shape) or altered row is a ``LoomFormatError`` naming the index and the fix.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from loomdb.errors import LoomFormatError
from loomdb.store.db import Database

COLUMNS = [
    ("batch", "integer"),
    ("part", "integer"),
    ("rows", "integer"),
    ("version", "smallint"),
    ("payload", "bytes"),
    ("checksum", "bigint"),
]
_HEAD = struct.Struct("<16siiih")
PAGE_BYTES = 64 << 20  # about this much payload per query: bounded memory, few round trips


def checksum(uid: str, batch: int, part: int, rows: int, version: int, payload: bytes) -> int:
    head = _HEAD.pack(bytes.fromhex(uid)[:16].ljust(16, b"\0"), batch, part, rows, version)
    return zlib.crc32(payload, zlib.crc32(head))


def create(db: Database, relation: str) -> None:
    body = ", ".join(f"{c} {db.type(t)}" for c, t in COLUMNS)
    temporary = "TEMPORARY " if relation.startswith(TEMP_SCHEMAS[db.dialect]) else ""
    db.execute(f"CREATE {temporary}TABLE {relation} ({body})")


TEMP_SCHEMAS = {"postgres": "pg_temp.", "duckdb": "temp."}


def scratch_relation(db: Database, uid: str) -> str:
    """A temporary storage table, private to this session, for a train without an index."""
    return f"{TEMP_SCHEMAS[db.dialect]}loom_scratch_{uid}"


def shared_scratch_relation(db: Database, uid: str) -> str:
    """A table for one train's layout that the engine's parallel workers can read (they cannot
    read a temporary table): in the storage schema, named so no index can take the name
    (``$`` is not allowed in index names), made and dropped inside the train's transaction."""
    return f'loom_data."scratch${uid}"'


def rows_of(uid: str, batch: int, rows: int, version: int, parts: Sequence[bytes]) -> list[tuple]:
    """The stored rows of one minibatch: ``parts[0]`` the labels, then the format's parts."""
    return [
        (batch, p, rows, version, payload, checksum(uid, batch, p, rows, version, payload))
        for p, payload in enumerate(parts)
    ]


def write(db: Database, relation: str, rows: list[tuple]) -> None:
    if rows:
        db.insert(relation, [c for c, _ in COLUMNS], rows)


@dataclass
class Stored:
    """One minibatch as read back: its number, rows and parts (labels first)."""

    batch: int
    rows: int
    parts: list[bytes]

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.parts)


def damaged(index: str, what: str) -> LoomFormatError:
    return LoomFormatError(
        f"index '{index}' is damaged: {what}",
        hint=f"rebuild it from its source with SELECT loom_reindex('{index}')",
    )


class Reader:
    """Reads minibatches of one index's storage table and checks each as it arrives."""

    def __init__(
        self, db: Database, relation: str, index: str, uid: str, version: int, owner: str | None
    ):
        self.db, self.relation, self.index = db, relation, index
        self.uid, self.version, self.owner = uid, version, owner

    def read(self, first: int, stop: int, parts: int, batch_bytes: int) -> Iterator[Stored]:
        """Minibatches ``[first, stop)`` with parts ``0 … parts``, each exactly once, in order."""
        page = max(1, min(4096, PAGE_BYTES // max(batch_bytes, 1)))
        sql = (
            f"SELECT batch, part, rows, version, payload, checksum FROM {self.relation} "
            "WHERE batch >= $1 AND batch < $2 AND part <= $3 ORDER BY batch, part"
        )
        expected = first
        for start in range(first, stop, page):
            end = min(start + page, stop)
            self.db.check_interrupt()
            current: Stored | None = None
            with self.db.as_role(self.owner):  # the owner's table: read with the owner's rights
                rows = self.db.query(sql, [start, end, parts])
            for row in rows:
                current, done = self._take(current, row, expected, parts)
                if done is not None:
                    yield done
                    expected += 1
            if current is not None:
                yield self._finish(current, parts)
                expected += 1
            if expected != end:
                raise damaged(self.index, f"minibatch {expected} is missing")

    def _take(
        self, current: Stored | None, row: tuple, expected: int, parts: int
    ) -> tuple[Stored, Stored | None]:
        batch, part, rows, version, payload, crc = row
        if payload is None:
            raise damaged(self.index, f"minibatch {batch} part {part} holds NULL")
        payload = bytes(payload)
        if version != self.version:
            raise damaged(
                self.index, f"minibatch {batch} is format version {version}, not {self.version}"
            )
        if crc is None or checksum(self.uid, batch, part, rows, version, payload) != int(crc):
            raise damaged(self.index, f"minibatch {batch} part {part} does not match its checksum")
        done = None
        if current is not None and batch != current.batch:
            done, current = self._finish(current, parts), None
            expected += 1
        if current is None:
            if batch != expected:
                what = "is missing" if batch > expected else "appears twice"
                raise damaged(self.index, f"minibatch {min(batch, expected)} {what}")
            current = Stored(batch, rows, [])
        if part != len(current.parts) or rows != current.rows:
            raise damaged(self.index, f"minibatch {batch} has a missing or repeated part")
        current.parts.append(payload)
        return current, done

    def _finish(self, current: Stored, parts: int) -> Stored:
        if len(current.parts) != parts + 1:
            raise damaged(
                self.index, f"minibatch {current.batch} has {len(current.parts) - 1} parts"
            )
        return current
