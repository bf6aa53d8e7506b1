"""numba's cache of loomdb's kernels follows changes to the modules they are made of
(``loomdb.kernel_cache``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from loomdb import kernel_cache

CALLEE = """
from numba import njit

@njit(cache=True)
def value():
    return {value}
"""
CALLER = """
from numba import njit

from kpkg import callee

@njit(cache=True)
def call():
    return callee.value() + 0
"""
RUN = """
import json, sys
sys.path.insert(0, {folder!r})
from loomdb import kernel_cache
kernel_cache.install({root!r})
from kpkg import caller
got = caller.call()
print(json.dumps([got, sum(caller.call.stats.cache_hits.values())]))
"""


def _run(folder: Path) -> tuple[int, int]:
    """(what the caller returns, its cache hits) in a new process, as a new session would."""
    script = RUN.format(folder=str(folder), root=str(folder / "kpkg"))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache")}
    env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    got, hits = json.loads(done.stdout.strip().splitlines()[-1])
    return got, hits


def test_a_callee_changed_recompiles_its_caller(tmp_path: Path) -> None:
    package = tmp_path / "kpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "callee.py").write_text(CALLEE.format(value=1))
    (package / "caller.py").write_text(CALLER)
    assert _run(tmp_path) == (1, 0)  # compiled and cached
    assert _run(tmp_path) == (1, 1)  # read from the cache
    (package / "callee.py").write_text(CALLEE.format(value=2))  # caller.py is unchanged
    assert _run(tmp_path) == (2, 0)  # compiled again, with the new callee
    assert _run(tmp_path) == (2, 1)


def test_loomdb_kernels_are_stamped_with_the_digest() -> None:
    from loomdb.codecs import toc_products
    from loomdb.learn import fused_steps

    for kernel in (toc_products.matvec, fused_steps._steps):
        stamp = kernel._cache._impl.locator.get_source_stamp()
        assert stamp[1] == kernel_cache.digest()
    sources = {os.path.relpath(p, kernel_cache.ROOT) for p in kernel_cache.kernel_sources()}
    # a kernel module, and a module whose names one imports (by name and in parentheses)
    assert {"codecs/toc_products.py", "learn/fused_steps.py", "learn/step_kernels.py"} <= sources
    assert {"codecs/toc.py", "seams.py"} <= sources
    assert "functions/train.py" not in sources


def test_every_kernel_module_installs_the_stamp_before_its_kernels() -> None:
    """A module that imports numba imports kernel_cache before its first decorator runs."""
    line = "from loomdb import kernel_cache"
    for path in sorted(kernel_cache.kernel_sources()):
        text = Path(path).read_text()
        if not re.search(r"^\s*(from|import) numba\b", text, re.M) or path.endswith(
            "kernel_cache.py"
        ):
            continue
        first = re.search(r"^@(njit|overload|jit|vectorize)", text, re.M)
        at = text.find(line)
        assert at >= 0, f"{path} decorates numba kernels without {line!r}"
        assert first is None or at < first.start(), textwrap.shorten(path, 80)
