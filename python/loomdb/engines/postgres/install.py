"""Install loomdb into a PostgreSQL server: ``loomdb pg install --dsn DSN``.

The PostgreSQL side of loomdb is a plpython3u extension.  Its functions import loomdb inside the
server, so installing it means, in order:

1. check the server: a superuser connection to a server on this machine, plpython3u available,
   the extension directory writable (run as root otherwise);
2. make (or reuse) a virtual environment from the server's Python and install loomdb, numpy,
   numba and sqlglot there (``venv.py``); with ``source`` the server imports loomdb from a
   source tree instead, for development;
3. open that environment to the server's OS user and give it a writable numba cache directory;
4. copy the extension files (``loomdb.control``, ``loomdb--<version>.sql``) into the server's
   ``SHAREDIR/extension``;
5. point the extension's bootstrap at them with two server-wide settings,
   ``loomdb.python_path`` (directories prepended to ``sys.path``) and ``loomdb.numba_cache_dir``
   (``ALTER SYSTEM`` + ``pg_reload_conf()``);
6. check, inside the server (plpython3u), that its Python matches the environment's and imports
   loomdb, numpy and numba, and that the numba cache is writable;
7. ``CREATE EXTENSION loomdb`` in the DSN's database (``ALTER EXTENSION … UPDATE`` when
   present, drop and create again with ``reinstall``).

Every step is idempotent: running it again reuses the environment and leaves the database as
it is.  Progress lines go to ``log`` (stderr by default).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loomdb.engines.postgres import extension_files, server_setup
from loomdb.engines.postgres.venv import (
    ensure_venv,
    install_loomdb,
    install_requirements,
    make_readable,
)
from loomdb.errors import LoomOptionError

DEFAULT_VENV = "/var/lib/loomdb/venv"
DEFAULT_PYTHON = "/usr/bin/python3"
#: Name of the numba cache directory made inside the environment.
NUMBA_CACHE = "numba-cache"

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(f"loomdb pg install: {line}", file=sys.stderr, flush=True)


def source_python_dir(source: str) -> str:
    """The directory holding the ``loomdb`` package: ``source`` itself or ``source/python``."""
    base = Path(source).resolve()
    for candidate in (base, base / "python"):
        if (candidate / "loomdb" / "__init__.py").is_file():
            return str(candidate)
    raise LoomOptionError(
        f"--source {source!r} holds no loomdb package",
        hint="pass a loomdb checkout (or its python/ directory), "
        "where python/loomdb/__init__.py exists",
    )


def install(
    dsn: str,
    *,
    venv: str | None = None,
    python: str = DEFAULT_PYTHON,
    source: str | None = None,
    reinstall: bool = False,
    numba_cache_dir: str | None = None,
    log: Log = _stderr,
) -> dict[str, Any]:
    """Install loomdb into the server (and database) of ``dsn``; return what was done.

    ``venv`` is where the server's virtual environment goes (default /var/lib/loomdb/venv),
    ``python`` the interpreter plpython3u runs, ``source`` a loomdb checkout the server imports
    loomdb from instead of the environment (development), ``reinstall`` drops and creates the
    extension again, ``numba_cache_dir`` overrides ``<venv>/numba-cache``.
    """
    venv = os.path.abspath(venv or DEFAULT_VENV)
    source_dir = source_python_dir(source) if source is not None else None
    cache_dir = os.path.abspath(numba_cache_dir or os.path.join(venv, NUMBA_CACHE))
    files = extension_files.load()

    log(f"checking the server at {server_setup.describe_dsn(dsn)}")
    server = server_setup.inspect_server(dsn)
    log(
        f"PostgreSQL {server.version}, data directory {server.data_directory} "
        f"(OS user {server.os_user}), extensions in {server.extension_dir}"
    )

    env = ensure_venv(venv, python, log)
    caller_python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    packages = install_requirements(env, caller_python, log)
    if source_dir is None:
        loomdb_from = install_loomdb(env, log)
    else:
        loomdb_from = source_dir
        log(f"the server will import loomdb from the source tree {source_dir}")
    python_path = ":".join(([source_dir] if source_dir else []) + list(env.site_packages))

    log(f"opening {venv} to the server and making {cache_dir} writable by {server.os_user}")
    make_readable(venv)
    server_setup.make_writable_by(cache_dir, server.os_uid, server.os_gid)

    written = extension_files.write(files, server.extension_dir)
    log(f"copied {', '.join(sorted(written))} into {server.extension_dir}")

    settings = {"loomdb.python_path": python_path, "loomdb.numba_cache_dir": cache_dir}
    server_setup.set_server_settings(dsn, settings)
    log(f"set {', '.join(f'{k} = {v!r}' for k, v in settings.items())} and reloaded")

    found = server_setup.check_server_python(dsn, env.version)
    log(f"the server imports loomdb from {found['loomdb']} (numpy {found['numpy']})")

    action, version = server_setup.create_extension(dsn, reinstall=reinstall)
    log(f"extension loomdb {version}: {action}")
    return {
        "dsn": server_setup.describe_dsn(dsn),
        "venv": venv,
        "python": python,
        "python_version": env.version,
        "packages": packages,
        "loomdb_from": loomdb_from,
        "python_path": python_path,
        "numba_cache_dir": cache_dir,
        "extension_dir": server.extension_dir,
        "extension_files": sorted(written),
        "extension_version": version,
        "action": action,
        "server_loomdb_file": found["loomdb"],
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``loomdb pg install``'s options to ``parser``."""
    parser.add_argument("--dsn", required=True, help="connection string of a superuser")
    parser.add_argument(
        "--venv", default=DEFAULT_VENV, help=f"server virtual environment (default {DEFAULT_VENV})"
    )
    parser.add_argument(
        "--python",
        default=DEFAULT_PYTHON,
        help=f"the Python plpython3u runs, to make the environment from (default {DEFAULT_PYTHON})",
    )
    parser.add_argument(
        "--source",
        default=None,
        help="development: the server imports loomdb from this checkout instead of the venv",
    )
    parser.add_argument(
        "--numba-cache-dir", default=None, help="numba cache directory (default <venv>/numba-cache)"
    )
    parser.add_argument(
        "--reinstall",
        action="store_true",
        help="drop the extension and create it again (its tables, loom.models and "
        "loom.indexes, go with it); needed when the SQL changed but not the version",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``loomdb pg install`` with parsed ``args``; print a summary; return the exit status."""
    done = install(
        args.dsn,
        venv=args.venv,
        python=args.python,
        source=args.source,
        reinstall=args.reinstall,
        numba_cache_dir=getattr(args, "numba_cache_dir", None),
    )
    print(f"loomdb {done['extension_version']} {done['action']} in {done['dsn']}")
    print(f"  loomdb.python_path     = {done['python_path']}")
    print(f"  loomdb.numba_cache_dir = {done['numba_cache_dir']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m loomdb.engines.postgres.install --dsn DSN``."""
    parser = argparse.ArgumentParser(prog="loomdb pg install", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
