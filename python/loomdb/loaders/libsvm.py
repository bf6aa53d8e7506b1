"""LIBSVM text (``label index:value …``, indexes 1-based) into a table of sparse rows.

No paper section.  Each line becomes ``(label double, indices integer[], "values" double[])``:
indexes 0-based, strictly increasing, values as written (zeros dropped).  A line that is not
LIBSVM (a bad or non-finite number, an index below 1 or at/above 2^31, indexes out of order)
is skipped and counted; a file with SVMlight's query ids (``qid:7``, ranking data) is refused.
The ``indices``/``values`` pair is the sparse row form a source may hold
(``store/sparse.py``).

``cross_bits`` k (1–30) adds every row's hashed pairwise feature crosses, deterministically
(``loaders/hashing.py``): the features keep their columns (below 2^k; a line with a larger
index is skipped and counted), the crosses land in columns 2^k … 2^(k+1) − 1, so the table
is a 2^(k+1)-wide sparse source (k = 20: 2,097,152 columns).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from loomdb.errors import LoomFormatError
from loomdb.loaders import regular_file
from loomdb.loaders.hashing import with_crosses
from loomdb.options import Boolean, Interval, Option, Options, Text

MAX_INDEX = 2**31 - 1


class LibsvmLoader:
    name = "libsvm"
    options = Options(
        "libsvm",
        Option("label", Text(), "label", "the label column's name"),
        Option("zero_based", Boolean(), False, "indexes start at 0 instead of 1"),
        Option(
            "cross_bits",
            Interval(True, 0, 30),
            0,
            "add hashed pairwise feature crosses in 2^k columns above the features (0: none)",
        ),
    )
    reads_files = True
    skipped = 0

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        return [(options["label"], "double"), ("indices", "integer[]"), ("values", "double[]")]

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        self.skipped = 0
        shift = 0 if options["zero_based"] else 1
        bits = options["cross_bits"]
        regular_file(self.name, path)
        _not_compressed(path)
        with open(path, encoding="utf-8-sig", errors="replace") as lines:  # a BOM: no label
            for number, line in enumerate(lines, 1):
                _no_query_id(line, number, path)
                row = parse_line(line, shift)
                if row is not None and bits and row[1] and row[1][-1] >= 1 << bits:
                    row = None  # a feature where the crosses live
                if row is None:
                    if line.strip() and not line.lstrip().startswith("#"):
                        self.skipped += 1
                    continue
                if bits:
                    row = (row[0], *with_crosses(row[1], row[2], bits))
                yield row


COMPRESSED = {  # the first bytes of a file compressed by each of these
    b"\x1f\x8b": ("gzip", "gunzip"),
    b"BZh": ("bzip2", "bunzip2"),
    b"\xfd7zXZ\x00": ("xz", "unxz"),
    b"\x28\xb5\x2f\xfd": ("zstd", "unzstd"),
    b"PK\x03\x04": ("zip", "unzip"),
}


def _not_compressed(path: str) -> None:
    """Refuse a compressed file (LIBSVM sets ship as .bz2): read as text, every line would be
    skipped as garbage and the load would make an empty table."""
    with open(path, "rb") as f:
        start = f.read(6)
    for magic, (kind, tool) in COMPRESSED.items():
        if start.startswith(magic):
            raise LoomFormatError(
                f"libsvm: {path} is a {kind}-compressed file, not LIBSVM text",
                hint=f"decompress it first ({tool} {path}) and load the text file",
            )


def _no_query_id(line: str, number: int, path: str) -> None:
    """Refuse an SVMlight ranking line (``label qid:7 1:0.5 …``): its ``qid`` is no feature,
    and skipping every such line as unreadable made an empty table."""
    if "qid:" not in line:  # most lines: no second split
        return
    qid = [word for word in line.split("#", 1)[0].split()[1:] if word.startswith("qid:")]
    if qid:
        raise LoomFormatError(
            f"libsvm: line {number} of {path} holds a query id ({qid[0]}): an SVMlight "
            "ranking file, whose query ids loomdb does not load",
            hint="remove the qid:… words to load the rows without their queries "
            "(sed -E 's/ qid:[^ ]+//' FILE > OUT)",
        )


def parse_line(line: str, shift: int) -> tuple[float, list[int], list[float]] | None:
    """``(label, indexes, values)`` of one LIBSVM line, or None when it is not one."""
    parts = line.split("#", 1)[0].split()
    if not parts:
        return None
    try:
        label = float(parts[0])
        pairs = [item.split(":", 1) for item in parts[1:]]
        indexes = [int(i) - shift for i, _ in pairs]
        values = [float(v) for _, v in pairs]
    except ValueError:
        return None
    if any(not 0 <= i <= MAX_INDEX for i in indexes) or any(
        b <= a for a, b in zip(indexes, indexes[1:])
    ):
        return None
    if not all(math.isfinite(x) for x in (label, *values)):
        return None
    kept = [(i, v) for i, v in zip(indexes, values) if v != 0.0]
    return label, [i for i, _ in kept], [v for _, v in kept]
