"""The ``pcr`` format: Progressive Compressed Records of JPEG images (Kuchnik et al., PCR §3).

A source of JPEG images (a bytea/BLOB column) and labels is laid out as records of B images
(``batch_size``, alias ``record_size``; default 64, the paper's HAM10000 records): each image
transcoded losslessly to a progressive JPEG, its scans regrouped so that scan group g of every
image of the record is stored contiguously (``codecs/pcr.py``, ``pcr_records.py``).  Each
record is one stored minibatch, one row per part: part 0 the metadata (labels and part
lengths), part g scan group g.  Reading fidelity k — the ``scans`` option of ``loom_train``,
fixed or scheduled per epoch like MLWeaving's precision — reads ``part <= k``: the engine
returns exactly ``offsets[k]`` bytes of every record and nothing of groups past k (PCR: "one
sequential prefix read").  Each image is rebuilt from its k parts and an EOI and decoded by
Pillow into the feature vector of ``imaging/pixels.py`` (``image_size``, ``color``), scaled to
[0, 1]; a model trained at any k predicts at any k (``loom_predict_image``).

Departure: PCR trains ResNets on 224² crops decoded on the fly; loomdb's GLMs learn from a
small fixed-size vector of each image, standardised with statistics of the decoded training
images (gathered in the layout pass, not in SQL).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loomdb.codecs import jpeg_scans
from loomdb.codecs import pcr as codec
from loomdb.codecs.blob import REBUILD
from loomdb.errors import LoomFormatError, LoomOptionError
from loomdb.imaging import pixels
from loomdb.options import Choices, Interval, Option, Options
from loomdb.seams import Batch, IndexInfo
from loomdb.store.formats.base import Format
from loomdb.store.image_source import profile_images
from loomdb.store.source import SourceProfile
from loomdb.store.storage import Stored

DEFAULT_RECORD = 64
CHANNEL_NAMES = ("r", "g", "b")


class PcrFormat(Format):
    name = "pcr"
    version = codec.VERSION
    any_precision = True
    fidelity = "scans"
    options = Options(
        "layout",
        Option(
            "batch_size",
            Interval(True, 1, codec.MAX_IMAGES),
            DEFAULT_RECORD,
            "images per record (B; the paper's records hold 64 to 1024)",
        ),
        Option("record_size", Interval(True, 1, codec.MAX_IMAGES), None, "same as batch_size"),
        Option("image_size", Interval(True, 4, 256), 32, "features: images resized to s × s"),
        Option("color", Choices(["rgb", "gray"]), "rgb", "features: RGB or luma pixels"),
    )

    def __init__(self, size: int = 32, color: str = "rgb", groups: int = jpeg_scans.MAX_SCANS):
        self.size, self.color, self.groups = size, color, groups

    def check(self, options: dict[str, Any]) -> None:
        if options.get("dtype", "float64") != "float64":
            raise LoomOptionError(
                "a pcr index stores JPEG scans: 'dtype' does not apply",
                hint="leave 'dtype' out (it is for the dense format)",
            )
        record = options.get("record_size")
        if record is not None:
            if options["batch_size"] not in (DEFAULT_RECORD, record):
                raise LoomOptionError(
                    f"record_size {record} and batch_size {options['batch_size']} disagree",
                    hint="they are one option: give one of them",
                )
            options["batch_size"] = record
        options["record_size"] = options["batch_size"]

    def bind(self, info: IndexInfo) -> PcrFormat:
        opts = info.options
        return PcrFormat(int(opts["image_size"]), str(opts["color"]), int(info.stats["groups"]))

    def top(self) -> int:
        return self.groups

    def parts(self, precision: int) -> int:
        return min(int(precision), self.groups)

    def features(self, info: IndexInfo) -> list[str]:
        column, s = info.columns[0], int(info.options["image_size"])
        if info.options["color"] == "gray":
            return [f"{column}[{r},{c}]" for r in range(s) for c in range(s)]
        return [
            f"{column}[{r},{c},{ch}]" for r in range(s) for c in range(s) for ch in CHANNEL_NAMES
        ]

    def inputs(self, options: dict[str, Any]) -> dict[str, Any] | None:
        return {"kind": "image", "size": options["image_size"], "color": options["color"]}

    def profile(
        self, db: Any, source: str, label: str, opts: dict[str, Any], split: Any = None
    ) -> SourceProfile:
        if opts.get("preprocess"):  # it encodes and fills named columns; an image has none
            raise LoomOptionError(
                f"'preprocess' encodes or fills named feature columns; a pcr layout's features "
                f"are the pixels of {source}'s image column, which it cannot apply to",
                hint="leave 'preprocess' out (the images are decoded and scaled as they are)",
            )
        if opts.get("sparse") is not None:  # a sparse source's rows are arrays, not images
            raise LoomOptionError(
                f"'sparse' reads a sparse source's array columns; a pcr layout's features are "
                f"the pixels of {source}'s image column",
                hint="leave 'sparse' out, or lay a sparse source out with another format",
            )
        return profile_images(db, source, label, opts["features"], opts["nulls"], split)

    def encoding(self, db: Any, prof: SourceProfile, opts: dict[str, Any], progress: Any) -> Any:
        from loomdb.store.formats.pcr_records import PcrEncoding

        return PcrEncoding(db, prof, opts, progress)

    def decode(self, stored: Stored, n_features: int, precision: int) -> Batch:
        """A record read at fidelity ``len(parts) - 1``: labels and decoded feature rows."""
        meta = codec.decode_meta(stored.parts[0])
        if meta.images != stored.rows:
            raise LoomFormatError(
                f"record {stored.batch} holds {meta.images} images for {stored.rows} rows",
                hint=REBUILD,
            )
        jpegs = codec.images(meta, stored.parts[1:])
        X = pixels.features_all(jpegs, self.size, self.color).astype(np.float64) / 255.0
        return Batch(X=X, y=meta.labels, number=stored.batch, nbytes=stored.nbytes)
