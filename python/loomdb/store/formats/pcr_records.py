"""The pcr layout pass: shuffled images → progressive JPEGs → records of B images → stored parts.

PCR §3.2 ("Encoding"): each image is transcoded losslessly to a progressive JPEG (jpegtran),
cut into its scans, and the scans of B images are regrouped so that group g holds scan g of
every image (``codecs/pcr.py``); the dataset is shuffled once, at conversion.  A record is
stored as one row per part: part 0 the metadata (labels, part lengths), part g scan group g.

Every record of an index has the same number of groups L, the most scans of any image: an
image with fewer scans (grayscale has 6 where colour has 10) has empty parts there, and a
record written before a later one raised L gets its missing groups as empty parts at the end
of the pass.  The same pass decodes every image once (at full fidelity, the original's pixels)
into its feature vector for the statistics the trainer standardises with (min, max, mean, std
per feature) and the squared row norms of the automatic step size (``store/norms.py``) — from
every image while their decoded pixels fit ``KEEP_BYTES``, from a shuffled prefix beyond.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from loomdb.codecs import jpeg_scans, pcr
from loomdb.errors import LoomDataError, LoomFormatError
from loomdb.imaging import pixels, transcode
from loomdb.store.image_source import read_images
from loomdb.store.norms import RowNorms
from loomdb.store.source import SourceProfile

CHUNK = 256  # images per read from the source
KEEP_BYTES = 256 << 20  # decoded uint8 feature rows kept for the row norms


class ImageStats:
    """Per-feature statistics of decoded images, as the trainer sees them (pixels / 255)."""

    def __init__(self, width: int):
        self.sum, self.sq = np.zeros(width), np.zeros(width)
        self.lo, self.hi = np.full(width, 255.0), np.zeros(width)
        self.rows, self.kept_bytes = 0, 0
        self.kept: list[np.ndarray] = []

    def add(self, U: np.ndarray) -> None:
        X = U.astype(np.float64)
        self.sum += X.sum(axis=0)
        self.sq += (X * X).sum(axis=0)
        self.lo, self.hi = np.minimum(self.lo, X.min(axis=0)), np.maximum(self.hi, X.max(axis=0))
        self.rows += len(U)
        if self.kept_bytes + U.nbytes <= KEEP_BYTES:
            self.kept.append(U)
            self.kept_bytes += U.nbytes

    def summary(self) -> dict[str, Any]:
        n = max(self.rows, 1)
        mean = self.sum / n
        std = np.sqrt(np.maximum(self.sq / n - mean * mean, 0.0))
        stats = {"min": self.lo / 255, "max": self.hi / 255, "mean": mean / 255, "std": std / 255}
        norms = RowNorms(stats)
        for U in self.kept:
            norms.add(U / 255.0)
        return {**{k: v.tolist() for k, v in stats.items()}, "sq_norm": norms.summary()}


def _records(chunks: Iterable[list[tuple]], size: int) -> Iterator[list[tuple]]:
    pending: list[tuple] = []
    for chunk in chunks:
        pending.extend(chunk)
        while len(pending) >= size:
            yield pending[:size]
            pending = pending[size:]
    if pending:
        yield pending


def _transcoded(source: str, jpegs: list[bytes]) -> list[bytes]:
    try:
        return transcode.progressive_all(jpegs)
    except LoomFormatError as e:
        raise LoomDataError(
            f"an image of {source} cannot be laid out as pcr: {e.message}",
            hint="delete rows whose image is not a complete JPEG (loomdb load images skips "
            "unreadable files), or filter them out in a SELECT source",
        ) from None


class PcrEncoding:
    """The stored parts of every record (``(record, images, first part, parts)``), then the
    statistics of the pass (``stats``)."""

    def __init__(self, db: Any, prof: SourceProfile, opts: dict[str, Any], progress: Any):
        self.db, self.prof, self.opts, self.progress = db, prof, opts, progress
        self.size, self.color = int(opts["image_size"]), str(opts["color"])
        self.images = ImageStats(pixels.feature_count(self.size, self.color))
        self.groups: dict[int, tuple[int, int]] = {}  # record → (images, groups)
        self.group_bytes: list[int] = [0]  # metadata, then each group, over all records
        self.scans: Counter[int] = Counter()
        self.source_bytes = 0

    def __iter__(self) -> Iterator[tuple[int, int, int, list[bytes], None]]:
        chunks = read_images(self.db, self.prof, self.opts["seed"], CHUNK)
        done = 0
        for number, rows in enumerate(_records(chunks, int(self.opts["batch_size"]))):
            jpegs = [bytes(r[0]) for r in rows]
            labels = np.array([r[1] for r in rows], dtype=np.float64)
            progressive = _transcoded(self.prof.source, jpegs)
            scans = [jpeg_scans.split(p) for p in progressive]
            parts = pcr.record(labels, scans)
            self.images.add(pixels.features_all(progressive, self.size, self.color))
            self._count(number, jpegs, scans, parts)
            yield number, len(rows), 0, parts, None
            done += len(rows)
            self.progress.rows(done)
        top = self.top
        for number, (images, groups) in self.groups.items():
            if groups < top:  # written before a later record raised L
                yield number, images, groups + 1, [b""] * (top - groups), None

    def _count(self, number: int, jpegs: list[bytes], scans: list, parts: list[bytes]) -> None:
        self.groups[number] = (len(jpegs), len(parts) - 1)
        self.scans.update(len(s) for s in scans)
        self.source_bytes += sum(len(j) for j in jpegs)
        self.group_bytes += [0] * (len(parts) - len(self.group_bytes))
        for g, part in enumerate(parts):
            self.group_bytes[g] += len(part)

    @property
    def top(self) -> int:
        return max((g for _, g in self.groups.values()), default=0)

    def stats(self) -> dict[str, Any]:
        """What the pass learned: feature statistics, row norms, L, the bytes of every group
        over all records (``offsets[k]`` of an epoch is the sum of the first k + 1), the
        images' scan counts and the original JPEGs' bytes."""
        return {
            **self.images.summary(),
            "groups": self.top,
            "group_bytes": self.group_bytes,
            "scans": {str(k): v for k, v in sorted(self.scans.items())},
            "source_bytes": self.source_bytes,
        }
