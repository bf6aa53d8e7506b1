"""One decoder's fuzzing campaign in a process of its own (libFuzzer takes the process over and
ends it at the first finding): ``python -m loomdb.fuzz.child DECODER WORKDIR MAX_LEN FLAGS...``.

No paper section: plumbing of ``loomdb fuzz`` (see ``loomdb.fuzz.campaign``, which starts this).

DECODER is a name of ``loomdb.fuzz.targets.TARGETS`` or ``module:function``.  The child writes
the seeds into ``WORKDIR/corpus``, runs each once to compile the numba kernels (outside
libFuzzer's per-input timeout), then hands over to libFuzzer with FLAGS (for TOC, with the
structure-aware mutator of ``loomdb.fuzz.mutators``).  Before each input it updates
``WORKDIR/tally`` (``loomdb.fuzz.tally``); an exception other than ``LoomFormatError`` is
written to ``WORKDIR/exception.txt`` and re-raised, so libFuzzer stops on it.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import atheris

# numba compiles these kernels from their bytecode: import them before the import hook, so
# they are never instrumented (coverage inside them is invisible to libFuzzer either way)
import loomdb.codecs.sketch_kernels  # noqa: F401
import loomdb.codecs.toc_kernels  # noqa: F401
import loomdb.codecs.toc_products  # noqa: F401
import loomdb.codecs.toc_read  # noqa: F401
import loomdb.codecs.weave_kernels  # noqa: F401
import loomdb.codecs.weave_products  # noqa: F401
from loomdb.fuzz.tally import Tally

with atheris.instrument_imports(include=["loomdb.codecs", "loomdb.fuzz.targets"]):
    from loomdb.errors import LoomFormatError
    from loomdb.fuzz import mutators  # not instrumented: it runs between inputs
    from loomdb.fuzz.seeds import SEEDS
    from loomdb.fuzz.targets import TARGETS

MUTATORS = {"toc": mutators.toc}


def resolve(decoder: str) -> tuple[Callable[[bytes], None], list[bytes]]:
    """The target function and its seeds (a ``module:function`` target has one empty seed)."""
    if decoder in TARGETS:
        return TARGETS[decoder], SEEDS[decoder]()
    module, _, name = decoder.partition(":")
    return getattr(importlib.import_module(module), name), [b""]


def main(argv: list[str]) -> None:
    decoder, workdir, max_len, flags = argv[1], Path(argv[2]), int(argv[3]), argv[4:]
    target, seeds = resolve(decoder)
    corpus = workdir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (corpus / hashlib.sha1(seed).hexdigest()).write_bytes(seed[:max_len])
    tally = Tally(workdir / "tally", max_len)

    def one_input(data: bytes) -> None:
        tally.begin(data)
        try:
            target(data)
            tally.decoded += 1
        except LoomFormatError:
            pass
        except BaseException:
            (workdir / "exception.txt").write_text(traceback.format_exc())
            raise

    for seed in seeds:
        one_input(seed[:max_len])
    tally.restart()
    mutator = MUTATORS.get(decoder)
    extra = {}
    if mutator is not None:
        extra["custom_mutator"] = lambda data, size, seed: mutator(data, size, seed, atheris.Mutate)
    atheris.Setup([argv[0], *flags, str(corpus)], one_input, **extra)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
