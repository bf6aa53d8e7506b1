"""MNIST digits rendered as grayscale JPEGs, into the table the ``images`` loader makes.

No paper section.  PATH is a folder holding MNIST's test set in IDX form
(``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``); images ``first`` …
``first + limit`` are encoded by Pillow (libjpeg, baseline, ``quality``) and stored as
``(file, class_name, label, image)``: the image's number, its digit as text and as the label.
Small real images for tests and ``bench pcr`` (grayscale: 6 scans once progressive).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from loomdb.datasets import mnist_jpegs
from loomdb.loaders import regular_file
from loomdb.loaders.images import IMAGE_OPTIONS, image_columns
from loomdb.options import Interval, Option, Options

MNIST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")  # what it reads


class MnistJpegLoader:
    name = "mnist-jpeg"
    options = Options(
        "mnist-jpeg",
        *IMAGE_OPTIONS,
        Option("first", Interval(True, 0, 10_000_000), 0, "the first image's number"),
        Option("limit", Interval(True, 1, 10_000_000), None, "how many images (default: all)"),
        Option("quality", Interval(True, 1, 100), 90, "the JPEG encoder's quality"),
    )
    reads_files = True
    skipped = 0

    def columns(self, path: str, options: dict[str, Any]) -> list[tuple[str, str]]:
        return image_columns(options)

    def rows(self, path: str, options: dict[str, Any]) -> Iterator[tuple]:
        for name in MNIST_FILES:  # a FIFO of that name would block the load for ever
            regular_file(self.name, os.path.join(path, name))
        first = options["first"]
        jpegs, labels = mnist_jpegs(path, first, options["limit"], options["quality"])
        for i, (jpeg, label) in enumerate(zip(jpegs, labels)):
            yield f"{first + i:05d}", str(int(label)), int(label), jpeg
