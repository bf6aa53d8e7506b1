"""A Progressive Compressed Record: B images' scans regrouped so that fidelity k is a prefix.

PCR §3.1 and Figure 2c: a record begins with metadata every task needs (the labels), followed by
scan groups; group g holds scan g of every image of the record, stored contiguously, so reading
the record up to ``offsets[k]`` yields every image at k scans.  §3.2: each group (and the
metadata) is framed separately so nothing reorders them; the offsets index is kept outside the
groups.  Here a record is a list of parts — ``[metadata, group 1, …, group L]`` — which loomdb
stores one row per part (``store/formats/pcr.py``: fidelity k reads ``part <= k``);
:func:`join` gives the same record as one byte string, the paper's ``.pcr`` file, whose prefix
of ``offsets[k]`` bytes :func:`split` reads back.  Departure: the metadata holds each image's
part lengths (B × L integers) instead of a Protobuf framing of every scan, so a group is plain
concatenated bytes and the offsets are derived from the lengths, never stored twice.

Metadata, version 1 (little-endian)::

    offset 0  b"LP"      magic
           2  uint8  1   version
           3  uint8  0   reserved
           4  uint32 n   images
           8  uint16 L   scan groups
          10  uint16 0   reserved
          12  n float64  labels
              n·L uint32 lengths[i, g]: bytes of image i's part in group g + 1 (image-major)

An image with fewer than L scans has empty parts in the last groups (PCR pads them).  The
metadata must be exactly 12 + 8n + 4nL bytes and every group exactly as long as its lengths
say, so a hostile record cannot make a reader allocate more than it holds.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loomdb.codecs import jpeg_scans
from loomdb.codecs.blob import REBUILD, byte_view
from loomdb.errors import LoomFormatError, LoomOptionError

MAGIC = b"LP"
VERSION = 1
HEADER = struct.Struct("<2sBBIHH")
MAX_IMAGES = 1 << 16  # per record (the paper's records hold 64 to 1024)


@dataclass(frozen=True)
class Meta:
    """A record's metadata: the labels and every image's part length in every group."""

    labels: np.ndarray  # (n,) float64
    lengths: np.ndarray  # (n, L) int64

    @property
    def images(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def groups(self) -> int:
        return int(self.lengths.shape[1])

    @property
    def nbytes(self) -> int:
        return HEADER.size + 8 * self.images + 4 * self.lengths.size

    def group_bytes(self) -> np.ndarray:
        """(L,) bytes of each scan group."""
        return self.lengths.sum(axis=0, dtype=np.int64)

    def offsets(self) -> np.ndarray:
        """(L + 1,) ``offsets[k]``: the bytes of a prefix read at fidelity k (metadata first)."""
        return self.nbytes + np.concatenate([[0], np.cumsum(self.group_bytes())]).astype(np.int64)


def _bad(what: str) -> LoomFormatError:
    return LoomFormatError(f"a pcr record {what}", hint=REBUILD)


def encode_meta(labels: np.ndarray, lengths: np.ndarray) -> bytes:
    labels = np.asarray(labels, dtype="<f8").reshape(-1)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(labels)
    if lengths.ndim != 2 or lengths.shape[0] != n or lengths.shape[1] > jpeg_scans.MAX_SCANS:
        raise LoomOptionError(f"part lengths of shape {lengths.shape} for {n} images")
    if n > MAX_IMAGES or (lengths < 0).any() or (lengths > jpeg_scans.MAX_BYTES).any():
        raise LoomOptionError(f"a pcr record holds at most {MAX_IMAGES} images of bounded size")
    head = HEADER.pack(MAGIC, VERSION, 0, n, lengths.shape[1], 0)
    return head + labels.tobytes() + lengths.astype("<u4").tobytes()


def decode_meta(blob: object) -> Meta:
    view = byte_view(blob, "a pcr record's metadata")
    if len(view) < HEADER.size:
        raise _bad(f"metadata of {len(view)} bytes is shorter than its {HEADER.size}-byte header")
    magic, version, reserved, n, groups, spare = HEADER.unpack_from(view)
    if magic != MAGIC or version != VERSION or reserved or spare:
        raise LoomFormatError(
            f"not pcr metadata of version {VERSION} (magic {magic!r}, version {version})",
            hint="rebuild the index with this version of loomdb",
        )
    if n > MAX_IMAGES or groups > jpeg_scans.MAX_SCANS:
        raise _bad(f"claims {n} images and {groups} scan groups")
    need = HEADER.size + 8 * n + 4 * n * groups
    if len(view) != need:
        raise _bad(f"metadata holds {len(view)} bytes; {n} images × {groups} groups need {need}")
    labels = np.frombuffer(view, dtype="<f8", count=n, offset=HEADER.size).astype(np.float64)
    lengths = np.frombuffer(view, dtype="<u4", count=n * groups, offset=HEADER.size + 8 * n)
    return Meta(labels, lengths.astype(np.int64).reshape(n, groups))


def record(labels: np.ndarray, scans: Sequence[Sequence[bytes]], groups: int = 0) -> list[bytes]:
    """The parts ``[metadata, group 1, …, group L]`` of a record of images given as their scan
    parts (``jpeg_scans.split``); L is ``groups`` or the most scans of any image, and an image
    with fewer is padded with empty parts."""
    L = max([groups, *(len(s) for s in scans)])
    lengths = np.zeros((len(scans), L), dtype=np.int64)
    for i, parts in enumerate(scans):
        lengths[i, : len(parts)] = [len(p) for p in parts]
    body = [b"".join(parts[g] for parts in scans if g < len(parts)) for g in range(L)]
    return [encode_meta(labels, lengths), *body]


def images(meta: Meta, groups: Sequence[object]) -> list[bytes]:
    """Each image of the record rebuilt from the groups read (1 … k) and an EOI: a JPEG any
    standard decoder renders at full size.  Groups past the record's L must be empty."""
    views = [byte_view(g, f"scan group {i + 1} of a pcr record") for i, g in enumerate(groups)]
    sizes = meta.group_bytes()
    for g, view in enumerate(views):
        want = int(sizes[g]) if g < meta.groups else 0
        if len(view) != want:
            raise _bad(f"scan group {g + 1} holds {len(view)} bytes; its metadata says {want}")
    k = min(len(views), meta.groups)
    starts = np.cumsum(meta.lengths[:, :k], axis=0) - meta.lengths[:, :k]
    out = []
    for i in range(meta.images):
        pieces = [views[g][starts[i, g] : starts[i, g] + meta.lengths[i, g]] for g in range(k)]
        out.append(b"".join(pieces) + jpeg_scans.EOI)
    return out


def join(parts: Sequence[bytes]) -> bytes:
    """A record as one byte string (the paper's ``.pcr`` file): metadata, then every group."""
    return b"".join(parts)


def split(blob: object, k: int | None = None) -> list[bytes]:
    """The parts of a record read as one prefix: metadata and groups 1 … k (all for None).
    The blob must be exactly ``offsets[k]`` bytes long."""
    view = byte_view(blob, "a pcr record")
    if len(view) < HEADER.size:
        raise _bad(f"of {len(view)} bytes is shorter than its {HEADER.size}-byte header")
    _, _, _, n, groups, _ = HEADER.unpack_from(view)
    if n > MAX_IMAGES or groups > jpeg_scans.MAX_SCANS:
        raise _bad(f"claims {n} images and {groups} scan groups")
    size = HEADER.size + 8 * n + 4 * n * groups
    meta = decode_meta(view[:size])
    k = meta.groups if k is None else k
    if not 0 <= k <= meta.groups:
        raise LoomOptionError(f"fidelity {k} is outside 0 … {meta.groups} scan groups")
    offsets = meta.offsets()
    if len(view) != offsets[k]:
        raise _bad(f"prefix of {len(view)} bytes is not offsets[{k}] = {offsets[k]}")
    return [bytes(view[a:b]) for a, b in zip([0, *offsets[:k]], offsets[: k + 1])]
