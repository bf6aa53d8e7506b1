"""A JPEG's scans as separate parts, and back: the cut points of Progressive Compressed Records.

PCR §3.2 ("Encoding"): the encoder "scans the binary representation of the progressive JPEG
files, searching for the markers that designate the end of a scan"; decoding concatenates the
parts of the scans it has and "terminate[s] the byte stream with an End-of-Image (EOI) JPEG
token", which any standard decoder renders at full width × height, at lower fidelity.

Cut points (ITU T.81 B.1.1): part 1 runs from SOI through the entropy-coded data of scan 1, so
it carries every table and the frame header; part s runs from the end of scan s − 1's data
through the end of scan s's, so a table written before a later scan (a progressive file's
per-scan Huffman tables) travels with that scan.  A scan's entropy-coded data ends at the first
0xFF that is followed by neither a stuffed 0x00 nor a restart marker (RST0–7).  The EOI, and
anything after it, is dropped: :func:`join` writes a fresh one.

Hostile input: the parser walks marker segments by their stated lengths and refuses a length
past the end, a missing EOI, a second frame header, a scan before the frame, a frame of
0 width or height (a DNL frame) or of more than ``MAX_PIXELS`` pixels, more than
``MAX_SCANS`` scans or ``MAX_BYTES`` bytes — all before anything is allocated for pixels.
No loomdb imports but ``errors`` and ``codecs.blob``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from loomdb.codecs.blob import byte_view
from loomdb.errors import LoomFormatError

SOI, EOI = b"\xff\xd8", b"\xff\xd9"
SOS = 0xDA
# Start-of-frame markers: C0–C3, C5–C7, C9–CB, CD–CF (C4 is DHT, C8 JPG, CC DAC)
SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
PROGRESSIVE = frozenset({0xC2, 0xC6, 0xCA, 0xCE})
STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0–7: no length field
MAX_BYTES = 64 << 20  # one image
MAX_PIXELS = 1 << 25  # 33.5 megapixels: bounds what a decoder allocates for coefficients
MAX_SCANS = 64  # libjpeg's default progressions have 6 (gray) to 18 (CMYK) scans
_SEGMENT = struct.Struct(">H")
_FRAME = struct.Struct(">BHHB")  # precision, height, width, components
# the end of entropy-coded data: 0xFF followed by anything but a stuffed 0x00 or RST0–7
_DATA_END = re.compile(rb"\xff[^\x00\xd0-\xd7]")


@dataclass(frozen=True)
class Scan:
    """A scan header (T.81 B.2.3): its components, spectral band Ss…Se, approximation Ah/Al."""

    components: tuple[int, ...]
    ss: int
    se: int
    ah: int
    al: int

    @property
    def refines_dc(self) -> bool:
        return self.ss == 0 and self.ah > 0


@dataclass(frozen=True)
class Frame:
    """What a JPEG's frame header says, its scans' headers, and where its scans end."""

    width: int
    height: int
    components: int
    precision: int
    progressive: bool
    cuts: tuple[int, ...]  # the offset after each scan's entropy-coded data
    headers: tuple[Scan, ...] = ()

    @property
    def scans(self) -> int:
        return len(self.cuts)


def _bad(what: str) -> LoomFormatError:
    return LoomFormatError(
        f"not a readable JPEG: {what}",
        hint="store the image as a complete baseline or "
        "progressive JPEG (loomdb load images skips files it cannot read)",
    )


def _frame_header(segment: bytes, marker: int, at: int) -> tuple[int, int, int, int]:
    if len(segment) < _FRAME.size:
        raise _bad(f"the frame header at offset {at} is {len(segment)} bytes")
    precision, height, width, components = _FRAME.unpack_from(segment)
    if not 1 <= components <= 4 or len(segment) != _FRAME.size + 3 * components:
        raise _bad(f"the frame header at offset {at} declares {components} components")
    if width == 0 or height == 0:
        raise _bad("a frame of zero width or height (DNL) is not supported")
    if width * height > MAX_PIXELS:
        raise _bad(f"{width} × {height} pixels exceed the {MAX_PIXELS:,}-pixel limit")
    return precision, height, width, components


def _scan_header(segment: bytes, at: int) -> Scan:
    count = segment[0] if segment else 0
    if not 1 <= count <= 4 or len(segment) != 1 + 2 * count + 3:
        raise _bad(f"the scan header at offset {at} declares {count} components")
    ss, se, approximation = segment[1 + 2 * count : 4 + 2 * count]
    ids = tuple(segment[1 + 2 * i] for i in range(count))
    return Scan(ids, ss, se, approximation >> 4, approximation & 15)


def _bytes(jpeg: object) -> bytes:
    return jpeg if isinstance(jpeg, bytes) else bytes(byte_view(jpeg, "a JPEG image"))


def parse(jpeg: object) -> Frame:
    """The frame of a JPEG and the cut point after each scan, or ``LoomFormatError``."""
    data = _bytes(jpeg)
    n = len(data)
    if n > MAX_BYTES:
        raise _bad(f"{n:,} bytes exceed the {MAX_BYTES:,}-byte limit")
    if not data.startswith(SOI):
        raise _bad("it does not start with SOI (FF D8)")
    pos, header = 2, None
    cuts: list[int] = []
    scans: list[Scan] = []
    while True:
        if pos >= n or data[pos] != 0xFF:
            raise _bad(
                f"expected a marker at offset {pos}, found "
                + ("the end of the data (no EOI)" if pos >= n else f"byte {data[pos]:#04x}")
            )
        while pos < n and data[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= n:
            raise _bad("it ends inside a marker (no EOI)")
        marker, pos = data[pos], pos + 1
        if marker == EOI[1]:
            break
        if marker in STANDALONE:
            continue
        if pos + 2 > n:
            raise _bad(f"marker {marker:#04x} at offset {pos - 2} has no length")
        (length,) = _SEGMENT.unpack_from(data, pos)
        if length < 2 or pos + length > n:
            raise _bad(f"marker {marker:#04x} at offset {pos - 2} claims {length} bytes")
        segment = data[pos + 2 : pos + length]
        if marker in SOF:
            if header is not None:
                raise _bad("it has two frame headers")
            header = (marker, *_frame_header(segment, marker, pos - 2))
        elif marker == 0xDC:
            raise _bad("a DNL marker (height defined after the first scan) is not supported")
        pos += length
        if marker == SOS:
            if header is None:
                raise _bad(f"a scan at offset {pos - length - 2} comes before the frame header")
            scans.append(_scan_header(segment, pos - length - 2))
            end = _DATA_END.search(data, pos)
            if end is None:
                raise _bad(f"scan {len(cuts) + 1} runs to the end of the data (no EOI)")
            pos = end.start()
            cuts.append(pos)
            if len(cuts) > MAX_SCANS:
                raise _bad(f"it has more than {MAX_SCANS} scans")
    if header is None or not cuts:
        raise _bad("it has no " + ("frame header" if header is None else "scan"))
    marker, precision, height, width, components = header
    progressive = marker in PROGRESSIVE
    return Frame(width, height, components, precision, progressive, tuple(cuts), tuple(scans))


def split(jpeg: object) -> list[bytes]:
    """The scan parts of a JPEG: part 1 from SOI through scan 1's entropy-coded data, part s
    from there through scan s's; ``join(split(x))`` is ``x`` up to its last scan, plus EOI."""
    data = _bytes(jpeg)
    frame = parse(data)
    starts = (0, *frame.cuts[:-1])
    return [data[a:b] for a, b in zip(starts, frame.cuts)]


def join(parts: Sequence[bytes]) -> bytes:
    """The JPEG made of the first scans' parts: their bytes, then EOI."""
    return b"".join(parts) + EOI
