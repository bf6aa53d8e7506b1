"""Install loomdb into a PostgreSQL server: ``loomdb pg install --dsn DSN``.  No paper section.

The PostgreSQL side of loomdb is a plpython3u extension whose functions import loomdb inside
the server.  Installing it means, in order:

1. check the server: a superuser connection to a server on this machine, plpython3u available,
   the extension directory writable (run as root otherwise), no database holding a loomdb
   newer than this one;
2. make (or reuse) a virtual environment from the server's Python, install numpy, numba,
   sqlglot, zstandard and pillow there, and copy in the loomdb this command runs (from a wheel
   or a checkout; ``--source`` makes the server import a checkout instead, for development);
3. open the environment to the server's OS user for reading, and give it a numba cache
   directory of its own (owner the server's OS user, mode 0700);
4. write the extension files into ``SHAREDIR/extension``, with where loomdb lives fixed in the
   install script's ``loom.settings`` — written only by superusers, never a setting a role can
   change (loomdb 0.1's ``loomdb.*`` server settings are removed) — and, where PostgreSQL's
   server headers, ``make`` and a C compiler are present, compile the index access methods
   (``CREATE INDEX … USING mlweaving`` in psql) into the server's library directory
   (``index_am_install``; optional: what is missing is reported and the rest goes on);
5. check inside the server that its Python imports loomdb, numpy and numba from there;
6. ``CREATE EXTENSION loomdb`` in the DSN's database (``ALTER EXTENSION … UPDATE`` and new
   settings when present; drop and create again with ``reinstall``);
7. check, in a new session, that a train and a prediction run (rolled back), and name the
   server's other databases still at an older loomdb, with the command that updates each.

Steps 2–4 are :func:`prepare` (``loomdb pg prepare``, for an image built before its server
runs).  Every step is idempotent.  Progress lines go to ``log`` (stderr by default).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import loomdb
from loomdb.engines.postgres import extension, index_am_install, server_setup
from loomdb.engines.postgres.venv import (
    GPU_EXTRAS,
    check_venv_path,
    copy_loomdb,
    ensure_venv,
    extra_requirements,
    install_requirements,
    make_readable,
)
from loomdb.errors import LoomOptionError, LoomStateError

DEFAULT_VENV = extension.DEFAULT_VENV
DEFAULT_PYTHON = "/usr/bin/python3"

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


def prepare(
    *,
    venv: str | None = None,
    python: str = DEFAULT_PYTHON,
    source: str | None = None,
    numba_cache_dir: str | None = None,
    extension_dir: str,
    server_uid: int,
    server_gid: int,
    pg_config: str | None = None,
    gpu: str | None = None,
    log: Log = _stderr,
) -> dict[str, Any]:
    """The steps on the server's machine (2–4): environment, loomdb, cache, extension files,
    the index access methods' library (built with ``pg_config``'s PGXS when it can be);
    ``gpu``: a loomdb extra (``GPU_EXTRAS``) whose CuPy the environment gets too.

    ``loomdb pg prepare`` runs just these (an image build has no running server yet)."""
    venv = os.path.abspath(venv or DEFAULT_VENV)
    source_dir = source_python_dir(source) if source is not None else None
    settings = extension.default_settings(venv)
    if numba_cache_dir:
        settings["numba_cache_dir"] = os.path.abspath(numba_cache_dir)
    settings["extra_path"] = source_dir or ""
    extra = extra_requirements(gpu) if gpu else ()
    check_venv_path(venv)
    server_setup.check_private_path(settings["numba_cache_dir"], server_uid)
    env = ensure_venv(venv, python, log)
    caller_python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    packages = install_requirements(env, caller_python, log, extra)
    loomdb_from = copy_loomdb(env, log)
    if source_dir:
        log(f"the server will import loomdb from the source tree {source_dir} first")
    make_readable(venv)
    cache = settings["numba_cache_dir"]
    server_setup.make_private_to(cache, server_uid, server_gid)
    log(f"numba cache {cache}: owned by uid {server_uid}, mode 0700")
    written = extension.write(extension.files(settings), extension_dir)
    log(f"wrote {', '.join(sorted(written))} into {extension_dir}")
    index_am_library = index_am_install.build_module(pg_config, log)
    paths = [p for p in (source_dir,) if p] + list(env.site_packages)
    return {
        "venv": venv,
        "python": python,
        "python_version": env.version,
        "packages": packages,
        "loomdb_from": loomdb_from,
        "settings": settings,
        "extension_dir": extension_dir,
        "extension_files": sorted(written),
        "index_am_library": index_am_library,
        "paths": paths,
    }


def install(
    dsn: str,
    *,
    venv: str | None = None,
    python: str = DEFAULT_PYTHON,
    source: str | None = None,
    reinstall: bool = False,
    drop_catalog: bool = False,
    numba_cache_dir: str | None = None,
    gpu: str | None = None,
    log: Log = _stderr,
) -> dict[str, Any]:
    """Install loomdb into the server (and database) of ``dsn``; return what was done.
    ``reinstall`` drops the extension and its catalog first: refused while the catalog holds
    a model or an index, unless ``drop_catalog`` says to lose them."""
    if drop_catalog and not reinstall:
        raise LoomOptionError(
            "--drop-catalog drops the catalog only with --reinstall",
            hint="add --reinstall to drop the extension and its catalog, or leave out "
            "--drop-catalog to install or update in place, keeping the catalog",
        )
    log(f"checking the server at {server_setup.describe_dsn(dsn)}")
    server = server_setup.inspect_server(dsn)
    if reinstall and not drop_catalog:
        _refuse_losing_the_catalog(dsn)
    others = _refuse_no_update(dsn, reinstall)
    log(
        f"PostgreSQL {server.version} (OS user {server.os_user}), extensions in "
        f"{server.extension_dir}"
    )
    done = prepare(
        venv=venv,
        python=python,
        source=source,
        numba_cache_dir=numba_cache_dir,
        extension_dir=server.extension_dir,
        server_uid=server.os_uid,
        server_gid=server.os_gid,
        pg_config=_server_pg_config(server),
        gpu=gpu,
        log=log,
    )
    removed = server_setup.reset_old_settings(dsn)
    if removed:
        log(f"removed the old server settings {', '.join(removed)}")
    settings = done["settings"]
    found = server_setup.check_server_python(
        dsn, done["python_version"], done["paths"], settings["numba_cache_dir"]
    )
    log(f"the server imports loomdb from {found['loomdb']} (numpy {found['numpy']})")
    action, version = server_setup.create_extension(dsn, reinstall=reinstall)
    if action in ("updated", "already installed"):
        server_setup.write_settings(dsn, settings)
    log(f"extension loomdb {version}: {action}")
    methods, native = server_setup.index_methods(dsn), server_setup.native_predict(dsn)
    if done["index_am_library"] and not (methods and native):
        added = server_setup.add_native(dsn)
        log(f"the extension predates the C module: added {len(added)} objects in place")
        methods, native = server_setup.index_methods(dsn), server_setup.native_predict(dsn)
    if methods:
        log(f"CREATE INDEX … USING {'|'.join(methods)}: available")
    log(
        "loom_predict per row in C, loom.finite guards compiled models: available"
        if native
        else "loom_predict per row in Python, compiled models guarded portably (no C module)"
    )
    server_setup.check_functions_run(dsn)
    log("checked: a train and a prediction run in a new session")
    return {
        **done,
        "dsn": server_setup.describe_dsn(dsn),
        "extension_version": version,
        "action": action,
        "index_methods": methods,
        "native_predict": native,
        "server_loomdb_file": found["loomdb"],
        "outdated": _name_outdated(dsn, version, others, log),
    }


def _name_outdated(
    dsn: str, version: str, others: tuple[dict[str, str], dict[str, str]], log: Log
) -> dict[str, str]:
    """Say which other databases of the server hold an older loomdb, and how to update each:
    the environment they import loomdb from now runs this version's Python."""
    outdated, unread = others
    for name, held in outdated.items():
        there = server_setup.describe_dsn(server_setup.in_database(dsn, name))
        log(
            f"database {name} holds loomdb {held}, but the server's loomdb environment is now "
            f"{version}: update it with loomdb pg install --dsn {shell_word(there)} "
            "(or, as a superuser, ALTER EXTENSION loomdb UPDATE in it)"
        )
    for name, why in unread.items():
        log(f"database {name} could not be checked for an older loomdb: {why}")
    return outdated


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell command line, in the README's double quotes where
    nothing in it means anything there: a database's name (which its owner may choose) is
    printed in a command to copy, run as root, where ``$(…)`` in double quotes would run."""
    if not any(c in text for c in '"$`\\!\n'):
        return f'"{text}"'
    return shlex.quote(text)


def _server_pg_config(server: server_setup.ServerInfo) -> str | None:
    """The server's own pg_config (its BINDIR), else the one on PATH."""
    own = os.path.join(server.bin_dir, "pg_config") if server.bin_dir else ""
    return own if own and os.access(own, os.X_OK) else shutil.which("pg_config")


def add_arguments(parser: argparse.ArgumentParser, prepare_only: bool = False) -> None:
    """Add ``loomdb pg install``'s (or ``pg prepare``'s) options to ``parser``."""
    if prepare_only:
        parser.add_argument("--extension-dir", required=True, help="SHAREDIR/extension")
        parser.add_argument("--server-user", default="postgres", help="the server's OS user")
        parser.add_argument(
            "--pg-config",
            default=None,
            help="the server's pg_config, to build CREATE INDEX … USING (default: on PATH)",
        )
    else:
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
        help="development: the server imports loomdb from this checkout before the venv",
    )
    parser.add_argument(
        "--numba-cache-dir", default=None, help="numba cache directory (default <venv>/numba-cache)"
    )
    parser.add_argument(
        "--gpu",
        choices=GPU_EXTRAS,
        default=None,
        help="also install CuPy into the server environment, for the gpu backend: the loomdb "
        "extra of that name (gpu: CUDA 12, gpu-cuda13: CUDA 13)",
    )
    if prepare_only:
        return
    parser.add_argument(
        "--reinstall",
        action="store_true",
        help="drop the extension and create it again (its tables, loom.models and "
        "loom.indexes, go with it; refused while they hold rows, see --drop-catalog); needed "
        "when the SQL changed but not the version",
    )
    parser.add_argument(
        "--drop-catalog",
        action="store_true",
        help="with --reinstall: drop the models and indexes the catalog holds",
    )


def _refuse_losing_the_catalog(dsn: str) -> None:
    held = server_setup.catalog_counts(dsn)
    if any(held.values()):
        models = _count(held["models"], "model", "models")
        indexes = _count(held["indexes"], "index", "indexes")
        raise LoomStateError(
            "--reinstall drops the loomdb extension with its catalog, which holds "
            f"{models} and {indexes}",
            hint="run loomdb pg install without --reinstall to update in place and keep them, "
            "or add --drop-catalog to drop them with the extension",
        )


def _refuse_no_update(dsn: str, reinstall: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Refuse, before anything is written, a database of the server holding a loomdb this one
    cannot update (a newer version): the server's environment, which every database imports
    loomdb from, would be replaced by this older loomdb under that version's SQL (and, in the
    DSN's database, ALTER EXTENSION would then fail).  ``reinstall`` replaces the DSN's own.
    The other databases not at this version, and those that could not be looked into."""
    version, upgrades = loomdb.__version__, extension.UPGRADES_FROM
    here = None if reinstall else server_setup.extension_version(dsn)
    outdated, unread = server_setup.outdated_databases(dsn, version)
    for name, held in ([("", here)] if here else []) + list(outdated.items()):
        if held == version or held in upgrades:
            continue
        where = f"database {name} of this server" if name else "the database"
        raise LoomStateError(
            f"{where} holds loomdb {held}, which loomdb {version} cannot update "
            f"(it updates from {', '.join(upgrades)})",
            hint=f"run loomdb pg install from a loomdb {held} or newer (pip install it here)"
            + (
                f", or DROP EXTENSION loomdb in database {name} first"
                if name
                else ", or add --reinstall --drop-catalog to replace it with this version, "
                "losing its catalog"
            ),
        )
    return outdated, unread


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def run(args: argparse.Namespace) -> int:
    """Run ``loomdb pg install`` with parsed ``args``; print a summary; return the exit status."""
    done = install(
        args.dsn,
        venv=args.venv,
        python=args.python,
        source=args.source,
        reinstall=args.reinstall,
        drop_catalog=args.drop_catalog,
        numba_cache_dir=getattr(args, "numba_cache_dir", None),
        gpu=getattr(args, "gpu", None),
    )
    print(f"loomdb {done['extension_version']} {done['action']} in {done['dsn']}")
    print(f"  server environment  {done['venv']}")
    print(f"  numba cache         {done['settings']['numba_cache_dir']}")
    methods = "|".join(done["index_methods"]) or "not installed (see above)"
    print(f"  CREATE INDEX USING  {methods}")
    print(f"  loom_predict        {'C' if done['native_predict'] else 'Python'}")
    print(f"  users: GRANT {extension.ROLE} TO <role>;  (see the README's 'Several users')")
    for name, held in done["outdated"].items():
        print(f"  to update           database {name} (loomdb {held}): see above")
    return 0


def run_prepare(args: argparse.Namespace) -> int:
    """``loomdb pg prepare``: the machine-side steps, for images built without a server."""
    import pwd

    try:
        user = pwd.getpwnam(args.server_user)
    except KeyError:
        raise LoomOptionError(
            f"there is no OS user {args.server_user!r} on this machine",
            hint="give --server-user the OS user the PostgreSQL server runs as (e.g. postgres)",
        ) from None
    done = prepare(
        venv=args.venv,
        python=args.python,
        source=args.source,
        numba_cache_dir=args.numba_cache_dir,
        extension_dir=args.extension_dir,
        server_uid=user.pw_uid,
        server_gid=user.pw_gid,
        pg_config=args.pg_config or shutil.which("pg_config"),
        gpu=args.gpu,
    )
    print(f"loomdb prepared in {done['venv']}; now CREATE EXTENSION loomdb as a superuser")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m loomdb.engines.postgres.install --dsn DSN``."""
    parser = argparse.ArgumentParser(prog="loomdb pg install", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
