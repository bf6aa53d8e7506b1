"""The byte format of a TOC-compressed minibatch (version 1).

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
Every count is checked against the bytes that are left before anything is allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from loomdb.errors import LoomFormatError

MAGIC = b"TOC"
VERSION = 1
HEADER = struct.Struct("<3sBBBHII")
LOGICAL, PACKED, VALUE_INDEX, ZSTD = 1, 2, 4, 8
KNOWN_FLAGS = LOGICAL | PACKED | VALUE_INDEX | ZSTD
INT_HEAD = struct.Struct("<IB")
FLOAT_HEAD = struct.Struct("<I")
MAX_INFLATED = 1 << 30  # a zstd frame never inflates past 1 GiB
# Products allocate a vector of ``cols`` values: a header may not claim more columns than
# this (33.5M, far beyond Rcv1's 47,236), or a 400-byte blob could make v·A allocate gigabytes.
MAX_COLS = 1 << 25


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
        import zstandard

        data = zstandard.ZstdCompressor(level=zstd_level).compress(data)
        flags |= ZSTD
    return HEADER.pack(MAGIC, VERSION, flags, 0, 0, s.rows, s.cols) + data


class _Reader:
    def __init__(self, data: bytes | memoryview):
        self.data, self.at = memoryview(data), 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.at + n > len(self.data):
            raise LoomFormatError(
                f"TOC blob truncated: {what} needs {n} bytes at offset {self.at}, "
                f"{len(self.data) - self.at} left"
            )
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def ints(self, what: str) -> np.ndarray:
        count, width = INT_HEAD.unpack(self.take(INT_HEAD.size, what))
        if not 1 <= width <= 4:
            raise LoomFormatError(f"TOC blob: {what} has integer width {width}; must be 1 to 4")
        raw = np.frombuffer(self.take(count * width, what), dtype=np.uint8).reshape(count, width)
        out = np.zeros((count, 4), dtype=np.uint8)
        out[:, :width] = raw
        return out.view("<u4")[:, 0].astype(np.int64)

    def floats(self, what: str) -> np.ndarray:
        (count,) = FLOAT_HEAD.unpack(self.take(FLOAT_HEAD.size, what))
        return np.frombuffer(self.take(count * 8, what), dtype="<f8").copy()


def parse(blob: bytes | memoryview) -> Sections:
    """Sections of a blob, with every structural invariant checked."""
    if len(blob) < HEADER.size:
        raise LoomFormatError(f"TOC blob of {len(blob)} bytes is shorter than its header")
    magic, version, flags, _, _, rows, cols = HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise LoomFormatError(f"not a TOC blob (magic {bytes(magic)!r})")
    if version != VERSION:
        raise LoomFormatError(
            f"TOC blob version {version}; this loomdb reads version {VERSION}",
            hint="rebuild the index with this version of loomdb",
        )
    if flags & ~KNOWN_FLAGS:
        raise LoomFormatError(f"TOC blob has unknown flags {flags:#x}")
    if cols > MAX_COLS:
        raise LoomFormatError(f"TOC blob claims {cols:,} columns; at most {MAX_COLS:,} are read")
    data: bytes | memoryview = memoryview(blob)[HEADER.size :]
    if flags & ZSTD:
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompress(
                bytes(data), max_output_size=MAX_INFLATED
            )
        except zstandard.ZstdError as e:
            raise LoomFormatError(f"TOC blob: its zstd stage cannot be read: {e}") from None
    r = _Reader(data)
    icol = r.ints("I.col")
    values = r.floats("values")
    ivalue = r.ints("I.value") if flags & VALUE_INDEX else None
    codes = r.ints("D") if flags & LOGICAL else None
    lengths = r.ints("lengths")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    if r.at != len(r.data):
        raise LoomFormatError(f"TOC blob has {len(r.data) - r.at} bytes after its last section")
    _check(rows, cols, icol, values, ivalue, codes, lengths)
    return Sections(rows, cols, flags, icol, values, ivalue, codes, starts)


def _check(rows, cols, icol, values, ivalue, codes, lengths) -> None:
    if len(lengths) != rows:
        raise LoomFormatError(f"TOC blob: {len(lengths)} row lengths for {rows} rows")
    if icol.size and icol.max() >= cols:
        raise LoomFormatError(f"TOC blob: a pair names column {icol.max()} of {cols}")
    if ivalue is not None:
        if len(ivalue) != len(icol):
            raise LoomFormatError("TOC blob: I.col and I.value differ in length")
        if ivalue.size and ivalue.max() >= len(values):
            raise LoomFormatError("TOC blob: a pair points past the value table")
    elif len(values) != len(icol):
        raise LoomFormatError("TOC blob: I.col and the pair values differ in length")
    total = len(codes) if codes is not None else len(icol)
    if int(lengths.sum()) != total:
        raise LoomFormatError(f"TOC blob: row lengths add up to {lengths.sum()}, not {total}")
    if codes is not None and codes.size and (codes.min() < 1):
        raise LoomFormatError("TOC blob: code 0 (the root) appears in D")
