"""Bundled real datasets (``loom_load('sample', 'digits', 'digits')``): no file, no download.

No paper section.  The data ships inside the package (``samples/``, provenance in its
NOTICE.md), so loading a sample reads no file of the caller's choosing and needs no
``pg_read_server_files``.  Columns are named; the label is the last column, an integer.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator
from importlib import resources
from typing import Any

from loomdb.errors import LoomOptionError
from loomdb.options import Options

_CANCER = [
    "radius",
    "texture",
    "perimeter",
    "area",
    "smoothness",
    "compactness",
    "concavity",
    "concave_points",
    "symmetry",
    "fractal_dimension",
]

# name → (file, feature columns, label column, header lines to skip)
SAMPLES: dict[str, tuple[str, list[str], str, int]] = {
    "digits": (
        "digits.csv.gz",
        [f"pixel_{r}_{c}" for r in range(8) for c in range(8)],
        "digit",
        0,
    ),
    "breast_cancer": (
        "breast_cancer.csv.gz",
        [f"{kind}_{m}" for kind in ("mean", "error", "worst") for m in _CANCER],
        "benign",  # 1 benign, 0 malignant
        1,
    ),
    "iris": (
        "iris.csv.gz",
        ["sepal_length", "sepal_width", "petal_length", "petal_width"],
        "species",  # 0 setosa, 1 versicolor, 2 virginica
        1,
    ),
}


def sample(name: str) -> tuple[str, list[str], str, int]:
    if name not in SAMPLES:
        raise LoomOptionError(
            f"unknown sample dataset {name!r}", hint=f"samples: {', '.join(sorted(SAMPLES))}"
        )
    return SAMPLES[name]


class SampleLoader:
    name = "sample"
    options = Options("sample")
    reads_files = False
    skipped = 0

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        _, features, label, _ = sample(path)
        return [(f, "double") for f in features] + [(label, "integer")]

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        file, features, _, header = sample(path)
        data = resources.files("loomdb.loaders") / "samples" / file
        with data.open("rb") as raw, gzip.open(raw, "rt", encoding="ascii") as text:
            for i, row in enumerate(csv.reader(text)):
                if i >= header:
                    yield (*(float(v) for v in row[: len(features)]), int(row[len(features)]))
