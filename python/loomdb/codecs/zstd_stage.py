"""The optional zstd stage over a record's bytes, inflated under a cap the caller derives.

No paper section: an entropy stage beyond TOC's physical encoding (§3.2), chosen per index.

A zstd frame states its own content size, and a hostile one can state anything: trusting it
(as ``ZstdDecompressor.decompress`` does to size its buffer) lets a 40-byte record ask for
gigabytes.  ``inflate`` never sizes anything from the frame: it streams the output in bounded
chunks and stops with a ``LoomFormatError`` as soon as it passes ``cap``, which the caller derives
from what the record's header says it can legitimately hold.  The frame's content size (loomdb
always writes one) is used only *after* inflating, as a check that the frame was neither
truncated nor followed by a second one.
"""

from __future__ import annotations

import zstandard

from loomdb.codecs.blob import REBUILD
from loomdb.errors import LoomFormatError

# Level 19 compresses with a window of at most 8 MiB (windowLog 23), so no frame loomdb wrote
# needs more; a larger claimed window is refused before the decoder allocates it.
MAX_WINDOW = 1 << 23
CHUNK = 1 << 20  # output is read this much at a time, so memory grows only as bytes arrive


def deflate(data: bytes, level: int) -> bytes:
    return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)


def inflate(frame: bytes | memoryview, cap: int, what: str) -> bytes:
    """The bytes of one zstd frame, at most ``cap`` of them, or a ``LoomFormatError``."""
    try:
        claimed = zstandard.frame_content_size(frame)
        if claimed > cap:
            raise _too_big(f"{what}: its zstd frame claims {claimed:,} bytes", cap)
        if claimed < 0:  # CONTENTSIZE_UNKNOWN: loomdb always writes the size
            raise LoomFormatError(f"{what}: its zstd frame does not state its size", hint=REBUILD)
        reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(
            frame, read_across_frames=False
        )
        chunks, total = [], 0
        while chunk := reader.read(min(CHUNK, cap + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise _too_big(f"{what}: its zstd frame inflates past {cap:,} bytes", cap)
    except zstandard.ZstdError as e:
        raise LoomFormatError(f"{what}: its zstd stage cannot be read: {e}", hint=REBUILD) from None
    if total != claimed:
        raise LoomFormatError(
            f"{what}: its zstd frame inflates to {total:,} bytes but states {claimed:,} "
            "(truncated, or followed by another frame)",
            hint=REBUILD,
        )
    return b"".join(chunks)


def _too_big(claim: str, cap: int) -> LoomFormatError:
    return LoomFormatError(
        f"{claim}; its header allows at most {cap:,} (rows × cols bounds what it can hold)",
        hint=REBUILD,
    )
