"""The files of the ``loomdb`` PostgreSQL extension, and writing them where the server looks.

``load()`` asks loomdb's SQL generator (``loomdb.udfs.pgsql.extension_files``) for
``loomdb.control`` and ``loomdb--<version>.sql``; without it, it reads them from a source
checkout's ``extension/`` folder or the package's own ``extension/`` data.  ``write()`` puts
them into a server's ``SHAREDIR/extension``.

Needs nothing but loomdb, so image builds can run it from the server's environment::

    python -m loomdb.engines.postgres.extension_files "$(pg_config --sharedir)/extension"
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from loomdb.errors import LoomStateError


def load() -> dict[str, str]:
    """The extension's files by name: from loomdb's SQL generator, else from disk."""
    try:
        from loomdb.udfs.pgsql import extension_files as generate
    except ModuleNotFoundError as exc:
        if exc.name not in ("loomdb.udfs", "loomdb.udfs.pgsql"):
            raise
        return _on_disk()
    return generate()


def _on_disk() -> dict[str, str]:
    import loomdb

    package = Path(loomdb.__file__).resolve().parent
    for folder in (package.parent.parent / "extension", package / "extension"):
        if (folder / "loomdb.control").is_file():
            return {path.name: path.read_text() for path in sorted(folder.glob("loomdb*"))}
    raise LoomStateError(
        "found no loomdb extension files (loomdb.control, loomdb--<version>.sql)",
        hint="reinstall loomdb, or run from a source checkout that has extension/",
    )


def write(files: dict[str, str], extension_dir: str) -> list[str]:
    """Write ``files`` into ``extension_dir`` (world-readable); return their names."""
    for name in files:
        if os.path.basename(name) != name or not name.startswith("loomdb"):
            raise LoomStateError(
                f"refusing to write the extension file {name!r}",
                hint="extension files are plain names starting with 'loomdb'",
            )
    for name, text in files.items():
        target = os.path.join(extension_dir, name)
        partial = target + ".partial"
        try:
            with open(partial, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(partial, 0o644)
            os.replace(partial, target)
        except OSError as exc:
            raise LoomStateError(
                f"cannot write the extension file {target}: {exc.strerror}",
                hint="pass the server's extension directory (pg_config --sharedir, + /extension) "
                "and run as a user who may write it (root)",
            ) from exc
    return list(files)


def main(argv: list[str]) -> int:
    """``python -m loomdb.engines.postgres.extension_files DIR``: write the files into DIR."""
    if len(argv) != 1:
        print("usage: python -m loomdb.engines.postgres.extension_files EXTENSION_DIR")
        return 2
    for name in write(load(), argv[0]):
        print(os.path.join(argv[0], name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
