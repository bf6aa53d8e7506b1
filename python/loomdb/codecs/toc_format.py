"""The byte format of a TOC-compressed minibatch (version 1): TOC §3.2, physical encoding.

All integers little-endian.  Fixed header (16 bytes)::

    0   b"TOC"        magic
    3   uint8  1      version
    4   uint8  flags  bit 0 LOGICAL (LZW codes; else every pair is its own code),
                      bit 1 PACKED (1–4-byte integers; else 4 bytes each),
                      bit 2 VALUE_INDEX (pair values index a table of distinct values),
                      bit 3 ZSTD (the sections below are one zstd frame)
    5   uint8  0      reserved
    6   uint16 0      reserved
    8   uint32 rows
    12  uint32 cols

Then the sections, in this order (an integer section is ``uint32 count, uint8 width,
count·width bytes``; a float section is ``uint32 count, count·8 bytes`` of float64)::

    I.col      integer   column of each first-layer pair, 0-based
    values     float     distinct values (VALUE_INDEX) or each pair's value
    I.value    integer   index into ``values`` of each pair (VALUE_INDEX only)
    D          integer   the codes of all rows, concatenated (LOGICAL only)
    lengths    integer   how many codes each row has (rows entries; an all-zero row has 0)

Row *lengths* rather than start offsets: they are small, so they pack into fewer bytes
(a9a.t: ratio 80.1 instead of 74.1); readers rebuild the starts by a cumulative sum.

The tree (C′) is never stored: readers rebuild it from I and D (TOC §3.1, Algorithm 2).

Reading hostile bytes: every size claim is capped before anything is allocated.  The header
may claim at most ``MAX_ROWS`` rows and ``MAX_COLS`` columns; a section may hold at most as
many entries as a rows×cols batch can (``lengths`` exactly ``rows``), and no more than the bytes
left; the zstd stage inflates to at most ``inflated_cap(rows, cols)`` bytes (what the sections
of such a batch can take, and never past ``MAX_INFLATED``), whatever its frame claims.  So a
hostile blob costs at most what a legitimate one of the same inflated size costs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from loomdb.codecs.blob import REBUILD, byte_view
from loomdb.codecs.zstd_stage import deflate, inflate
from loomdb.errors import LoomFormatError, LoomOptionError

MAGIC = b"TOC"
VERSION = 1
HEADER = struct.Struct("<3sBBBHII")
LOGICAL, PACKED, VALUE_INDEX, ZSTD = 1, 2, 4, 8
KNOWN_FLAGS = LOGICAL | PACKED | VALUE_INDEX | ZSTD
INT_HEAD = struct.Struct("<IB")
FLOAT_HEAD = struct.Struct("<I")
# Products allocate a vector of ``cols`` values: a header may not claim more columns than
# this (33.5M, far beyond Rcv1's 47,236), or a 400-byte blob could make v·A allocate gigabytes.
MAX_COLS = 1 << 25
# Reading allocates a few integers per row: a minibatch has at most 4M rows (the paper's has 250).
MAX_ROWS = 1 << 22
# The sections of a zstd blob never inflate past 16 MiB: room for ~1M nonzeros per batch (the
# paper's 250-row batches hold at most ~70K).  This also bounds what a hostile blob costs: the
# worst found, 1.6 KB inflating to 16M one-byte codes, reads and multiplies in ~2 s and ~0.7 GB
# (the decode tree and the products' passes), as a legitimate 16 MiB one would.  Writers
# refuse larger batches (``serialize``).
MAX_INFLATED = 1 << 24
# The most bytes one entry of each section can take: I.col 4, values 8, I.value 4, D 4.
SECTION_BYTES_PER_CELL = 20
SECTION_HEADS = 4 * INT_HEAD.size + FLOAT_HEAD.size


@dataclass
class Sections:
    rows: int
    cols: int
    flags: int
    icol: np.ndarray
    values: np.ndarray
    ivalue: np.ndarray | None
    codes: np.ndarray | None
    starts: np.ndarray


def width_for(values: np.ndarray) -> int:
    """Bytes per integer: ⌈log2(max + 1) / 8⌉, at least 1 (TOC §3.2)."""
    top = int(values.max()) if values.size else 0
    return max(1, (top.bit_length() + 7) // 8)


def pack_ints(values: np.ndarray, packed: bool) -> bytes:
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= 1 << 32):
        raise ValueError("TOC packs integers from 0 to 2**32 - 1")
    width = width_for(values) if packed else 4
    raw = values.astype("<u4").view(np.uint8).reshape(-1, 4)[:, :width]
    return INT_HEAD.pack(len(values), width) + raw.tobytes()


def pack_floats(values: np.ndarray) -> bytes:
    return FLOAT_HEAD.pack(len(values)) + np.ascontiguousarray(values, dtype="<f8").tobytes()


def inflated_cap(rows: int, cols: int) -> int:
    """The most bytes the sections of a rows×cols batch can take, capped at ``MAX_INFLATED``."""
    return min(MAX_INFLATED, SECTION_HEADS + 4 * rows + SECTION_BYTES_PER_CELL * rows * cols)


def serialize(s: Sections, zstd_level: int | None = None) -> bytes:
    packed = bool(s.flags & PACKED)
    body = [pack_ints(s.icol, packed), pack_floats(s.values)]
    if s.flags & VALUE_INDEX:
        assert s.ivalue is not None
        body.append(pack_ints(s.ivalue, packed))
    if s.flags & LOGICAL:
        assert s.codes is not None
        body.append(pack_ints(s.codes, packed))
    total = len(s.codes) if s.codes is not None else len(s.icol)
    body.append(pack_ints(np.diff(np.append(s.starts, total)), packed))
    data = b"".join(body)
    flags = s.flags
    if zstd_level is not None:
        if len(data) > inflated_cap(s.rows, s.cols):
            raise LoomOptionError(
                f"a TOC batch of {len(data):,} bytes is too large for the zstd stage, which "
                f"readers inflate to at most {MAX_INFLATED:,} bytes",
                hint="use a smaller batch_size, or no entropy stage",
            )
        data = deflate(data, zstd_level)
        flags |= ZSTD
    return HEADER.pack(MAGIC, VERSION, flags, 0, 0, s.rows, s.cols) + data


class _Reader:
    def __init__(self, data: bytes | memoryview):
        self.data, self.at = memoryview(data), 0

    def take(self, n: int, what: str) -> memoryview:
        if self.at + n > len(self.data):
            raise LoomFormatError(
                f"TOC blob truncated: {what} needs {n:,} bytes at offset {self.at:,}, "
                f"{len(self.data) - self.at:,} left",
                hint=REBUILD,
            )
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def count(self, head: struct.Struct, what: str, most: int) -> tuple[int, ...]:
        fields = head.unpack(self.take(head.size, what))
        if fields[0] > most:
            raise LoomFormatError(
                f"TOC blob: {what} claims {fields[0]:,} entries; its header's shape allows "
                f"at most {most:,}",
                hint=REBUILD,
            )
        return fields

    def ints(self, what: str, most: int) -> np.ndarray:
        count, width = self.count(INT_HEAD, what, most)
        if not 1 <= width <= 4:
            raise LoomFormatError(
                f"TOC blob: {what} has integer width {width}; must be 1 to 4", hint=REBUILD
            )
        raw = self.take(count * width, what)
        if width != 3:
            return np.frombuffer(raw, dtype=f"<u{width}").astype(np.int64)
        out = np.zeros((count, 4), dtype=np.uint8)  # 3-byte integers: copy into a uint32
        out[:, :3] = np.frombuffer(raw, dtype=np.uint8).reshape(count, 3)
        return out.view("<u4")[:, 0].astype(np.int64)

    def floats(self, what: str, most: int) -> np.ndarray:
        (count,) = self.count(FLOAT_HEAD, what, most)
        return np.frombuffer(self.take(count * 8, what), dtype="<f8").copy()


def opened(blob: bytes | memoryview) -> tuple[int, int, int, bytes | memoryview]:
    """``(flags, rows, cols, sections' bytes)`` of a blob whose header is checked (and whose
    zstd stage is inflated)."""
    view = byte_view(blob, "a TOC blob")
    if len(view) < HEADER.size:
        raise LoomFormatError(
            f"TOC blob of {len(view)} bytes is shorter than its {HEADER.size}-byte header",
            hint=REBUILD,
        )
    magic, version, flags, _, _, rows, cols = HEADER.unpack_from(view)
    if magic != MAGIC:
        raise LoomFormatError(f"not a TOC blob (magic {bytes(magic)!r})", hint=REBUILD)
    if version != VERSION:
        raise LoomFormatError(
            f"TOC blob version {version}; this loomdb reads version {VERSION}",
            hint="rebuild the index with this version of loomdb",
        )
    if flags & ~KNOWN_FLAGS:
        raise LoomFormatError(f"TOC blob has unknown flags {flags:#x}", hint=REBUILD)
    if cols > MAX_COLS or rows > MAX_ROWS:
        raise LoomFormatError(
            f"TOC blob claims {rows:,} rows and {cols:,} columns; at most {MAX_ROWS:,} rows "
            f"and {MAX_COLS:,} columns are read",
            hint=REBUILD,
        )
    data: bytes | memoryview = view[HEADER.size :]
    if flags & ZSTD:
        data = inflate(data, inflated_cap(rows, cols), "TOC blob")
    return flags, rows, cols, data


def parse(blob: bytes | memoryview) -> Sections:
    """Sections of a blob, with every structural invariant checked."""
    return parse_sections(*opened(blob))


def parse_sections(flags: int, rows: int, cols: int, data: bytes | memoryview) -> Sections:
    r, cells = _Reader(data), rows * cols
    icol = r.ints("I.col", cells)
    values = r.floats("values", cells)
    ivalue = r.ints("I.value", cells) if flags & VALUE_INDEX else None
    codes = r.ints("D", cells) if flags & LOGICAL else None
    lengths = r.ints("lengths", rows)
    if r.at != len(r.data):
        raise LoomFormatError(
            f"TOC blob has {len(r.data) - r.at:,} bytes after its last section", hint=REBUILD
        )
    _check(rows, cols, icol, values, ivalue, codes, lengths)
    return Sections(rows, cols, flags, icol, values, ivalue, codes, np.cumsum(lengths) - lengths)


def _check(rows, cols, icol, values, ivalue, codes, lengths) -> None:
    def bad(message: str) -> LoomFormatError:
        return LoomFormatError(f"TOC blob: {message}", hint=REBUILD)

    if len(lengths) != rows:
        raise bad(f"{len(lengths)} row lengths for {rows} rows")
    if icol.size and icol.max() >= cols:
        raise bad(f"a pair names column {icol.max()} of {cols}")
    if ivalue is not None:
        if len(ivalue) != len(icol):
            raise bad(f"I.col has {len(icol)} entries and I.value {len(ivalue)}; they must match")
        if ivalue.size and ivalue.max() >= len(values):
            raise bad(f"a pair points to value {ivalue.max()} of a table of {len(values)}")
    elif len(values) != len(icol):
        raise bad(f"I.col has {len(icol)} entries and the pair values {len(values)}")
    total = len(codes) if codes is not None else len(icol)
    if int(lengths.sum()) != total:
        raise bad(f"row lengths add up to {lengths.sum()}, not the {total} codes stored")
    if codes is not None and codes.size and (codes.min() < 1):
        raise bad("code 0 (the root) appears in D")
