"""numba's on-disk cache of loomdb's kernels, kept from going stale across modules.  No paper
section.

numba keeps a ``cache=True`` function's machine code until that function's own file changes (a
hash of the file), yet a kernel that calls another module's kernel has that kernel's code
compiled into its own, and a module global it reads is frozen in as a constant.  So after
``toc_products.py`` changes, ``fused_steps._steps`` would go on running the old products from
its cache, silently: in a checkout updated by git, in a PostgreSQL server installed from a
source tree, or wherever loomdb's files are replaced without emptying the cache.

Here a loomdb kernel's cache is stamped with its file's stamp and a digest of the loomdb
modules kernels are made of (:func:`kernel_sources`: those importing numba and the modules
they import): any change to one recompiles every kernel once.  A function outside loomdb keeps
numba's own stamp.  The cache stays where numba puts it (``NUMBA_CACHE_DIR``, or
``__pycache__`` beside the module when it is writable).  A module that defines kernels imports
this one before it decorates any (tests/unit/test_kernel_cache.py holds every such module to
it).  Where numba's locators are chosen by ``NUMBA_CACHE_LOCATOR_CLASSES``, numba's own stamp
is used.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Any, ClassVar

from numba.core import caching

ROOT = os.path.dirname(os.path.abspath(__file__))  # the loomdb package
_NUMBA = re.compile(rb"^\s*(?:from|import) numba\b", re.M)
# ``from loomdb.a.b import c, d`` or ``… import (c,\n d)``: the module and the names
_IMPORT = re.compile(rb"^\s*from loomdb((?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+))", re.M)


@functools.cache
def kernel_sources(root: str = ROOT) -> frozenset[str]:
    """The ``.py`` files under ``root`` that import numba, and the files of the package's
    modules they import (where the constants their kernels read come from)."""
    using: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths = (os.path.join(folder, n) for n in files if n.endswith(".py"))
        using.update(p for p in paths if _NUMBA.search(_read(p)))
    found = set(using)
    for path in using:
        for module, *names in _IMPORT.findall(_read(path)):
            base = os.path.join(root, *module.decode().split(".")[1:])
            named = re.findall(rb"\w+", b" ".join(names))  # submodules, or names in the module
            files = [base + ".py", *(os.path.join(base, n.decode() + ".py") for n in named)]
            found.update(filter(os.path.isfile, files))
    return frozenset(found)


@functools.cache
def digest(root: str = ROOT) -> str:
    """sha-256 of :func:`kernel_sources`' names (relative to ``root``) and contents."""
    h = hashlib.sha256()
    for path in sorted(kernel_sources(root)):
        h.update(os.path.relpath(path, root).encode() + b"\0")
        h.update(_read(path))
    return h.hexdigest()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class _Stamped:
    """numba's locator for a function, with ``digest`` joined to its source stamp."""

    def __init__(self, located: Any, root: str):
        self._located, self._root = located, root

    def __getattr__(self, name: str) -> Any:
        return getattr(self._located, name)

    def get_source_stamp(self) -> Any:
        return (self._located.get_source_stamp(), digest(self._root))


class KernelLocator:
    """First in numba's list of locators: a function under one of ``roots`` gets the locator
    numba's own list gives it, stamped; any other function, None (numba asks the next)."""

    roots: ClassVar[list[str]] = []
    numba_own: ClassVar[list[Any]] = []

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        path = os.path.abspath(py_file)
        root = next((r for r in cls.roots if path.startswith(r + os.sep)), None)
        if root is None:
            return None
        for locator in cls.numba_own:
            located = locator.from_function(py_func, py_file)
            if located is not None:
                return _Stamped(located, root)
        return None


def install(root: str = ROOT) -> None:
    """Stamp the kernels of the package at ``root`` (loomdb's own, unless a test names
    another) from now on; idempotent."""
    impl = caching.CacheImpl
    if KernelLocator not in impl._locator_classes:
        KernelLocator.numba_own = list(impl._locator_classes)
        impl._locator_classes = [KernelLocator, *impl._locator_classes]
    if root not in KernelLocator.roots:
        KernelLocator.roots.append(root)


install()
