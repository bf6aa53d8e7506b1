"""The Python environment a PostgreSQL server imports loomdb from.  No paper section.

plpython3u runs the interpreter PostgreSQL was linked against (``/usr/bin/python3`` on Debian),
whose site-packages are managed by the system and must not be pip-installed into.  loomdb
therefore lives in a virtual environment made from that same interpreter; the extension's
bootstrap prepends the environment's site-packages to ``sys.path`` (setting
``loomdb.python_path``).  This module makes that environment, idempotently:

* ``ensure_venv`` creates it (or reuses it when its Python matches the server's);
* ``install_requirements`` installs what the server side imports (numpy, numba, sqlglot,
  zstandard, zlib-ng, pillow…), and the packages of a loomdb extra when asked (``--gpu gpu``:
  CuPy, ``extra_requirements``), pinned to the versions the calling interpreter has so both
  sides behave alike;
* ``copy_loomdb`` puts the loomdb the caller runs (from a wheel or a checkout) into it;
* ``make_readable`` opens the tree to the server's OS user.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loomdb.errors import LoomOptionError, LoomStateError

#: What the server side imports besides loomdb (installed with their own dependencies).
SERVER_PACKAGES = (
    "numpy",
    "numba",
    "sqlglot",
    "zstandard",
    "zlib-ng",  # the storage rows' CRC-32 (store/storage.checksum)
    "pillow",
    "threadpoolctl",  # {"parallel": n}: one BLAS thread per shard
    "datasketches",  # workers a train starts inside the server encode gradients (SketchML)
    "distributed",  # loom_train's "cluster": the driver runs in the server (distributed/)
    "cryptography",  # a local cluster's throwaway TLS certificate (Security.temporary)
)

#: The extras ``loomdb pg install --gpu`` takes (pyproject.toml): CuPy for CUDA 12 or 13.
GPU_EXTRAS = ("gpu", "gpu-cuda13")

Log = Callable[[str], None]

_PROBE = (
    "import json, sys, sysconfig; "
    "paths = sysconfig.get_paths(); "
    "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], "
    "'site': [paths['purelib'], paths['platlib']]}))"
)
_INSTALLED = (
    "import importlib.metadata as m, json, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))\n"
)


@dataclass(frozen=True)
class ServerVenv:
    """A virtual environment made for the server's Python."""

    path: str
    python: str
    version: str  # "major.minor" of its interpreter
    site_packages: tuple[str, ...]


def _clean_env() -> dict[str, str]:
    """The environment for child interpreters, without the caller's own Python settings."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: Sequence[str], what: str, hint: str) -> str:
    """Run ``cmd``; return its stdout or raise LoomStateError with the end of its output."""
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, env=_clean_env(), check=False
        )
    except OSError as exc:
        raise LoomStateError(f"could not {what}: {exc}", hint=hint) from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise LoomStateError(
            f"could not {what} (exit status {done.returncode})", hint=hint, detail=tail
        )
    return done.stdout


def _probe(python: str) -> tuple[str, tuple[str, ...]]:
    out = _run(
        [python, "-c", _PROBE],
        f"run {python}",
        "pass --python with the interpreter PostgreSQL's plpython3u uses (e.g. /usr/bin/python3)",
    )
    info = json.loads(out)
    return info["version"], tuple(dict.fromkeys(info["site"]))


def refuse_foreign_folder(
    path: str, named: str, option: str, kept: str, ours: Callable[[], bool], why: str
) -> None:
    """Refuse a ``path`` loomdb would take over (make, remake or chown) unless it does not exist
    yet, is an empty folder or is ``ours()`` (what the hint calls ``kept``): a file, or a
    folder of other files (``why``)."""
    if not os.path.lexists(path):
        return
    hint = (
        f"give {option} a path that does not exist yet (it is made), an empty folder, or "
        f"{kept} an earlier loomdb pg install made"
    )
    if not os.path.isdir(path) or os.path.islink(path):
        raise LoomOptionError(f"{named} {path} is not a folder", hint=hint)
    if not ours() and os.listdir(path):
        raise LoomOptionError(f"{named} {path} {why}", hint=hint)


def check_venv_path(path: str) -> None:
    """Refuse a ``--venv`` that is neither a virtual environment nor a new or empty folder:
    making one there would mix it into other files (``/usr``: the system's Python), and
    remaking one (``venv --clear``) would delete them."""
    refuse_foreign_folder(
        path,
        "--venv",
        "--venv",
        "a virtual environment",
        lambda: os.path.isfile(os.path.join(path, "pyvenv.cfg")),
        "is a folder of other files, not a virtual environment (it has no pyvenv.cfg)",
    )


def ensure_venv(path: str, base_python: str, log: Log) -> ServerVenv:
    """Create the environment at ``path`` from ``base_python``, or reuse a matching one."""
    check_venv_path(path)
    venv_python = os.path.join(path, "bin", "python")
    want_version, _ = _probe(base_python)
    if os.path.exists(venv_python):
        have_version, site = _probe(venv_python)
        if have_version == want_version:
            log(f"reusing virtual environment {path} (Python {have_version})")
            return ServerVenv(path, venv_python, have_version, site)
        log(f"virtual environment {path} has Python {have_version}, want {want_version}: remaking")
        clear = ["--clear"]
    else:
        log(f"creating virtual environment {path} from {base_python} (Python {want_version})")
        clear = []
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o755, exist_ok=True)
    _run(
        [base_python, "-m", "venv", *clear, path],
        f"create a virtual environment at {path}",
        "install the venv module for the server's Python (Debian: apt-get install python3-venv)",
    )
    version, site = _probe(venv_python)
    return ServerVenv(path, venv_python, version, site)


def installed_versions(venv: ServerVenv, names: Sequence[str]) -> dict[str, str | None]:
    """The versions of ``names`` installed in ``venv`` (None where missing)."""
    out = _run([venv.python, "-c", _INSTALLED, *names], "list packages", "remake the venv")
    return json.loads(out)


def _caller_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _pip(venv: ServerVenv, args: Sequence[str], what: str) -> None:
    _run(
        [venv.python, "-m", "pip", "install", "--quiet", "--root-user-action=ignore", *args],
        what,
        "check that the package index is reachable from this machine, or remake the venv",
    )


def extra_requirements(extra: str) -> tuple[str, ...]:
    """The requirements of loomdb's optional ``extra``, as its installed metadata lists them."""
    try:
        requires = importlib.metadata.requires("loomdb") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise LoomStateError(
            "loomdb's package metadata is not installed, so its extras are unknown",
            hint="install loomdb with pip (pip install -e . in a checkout)",
        ) from exc
    marker = re.compile(r';\s*extra\s*==\s*"' + re.escape(extra) + r'"\s*$')
    found = tuple(r.split(";")[0].strip() for r in requires if marker.search(r))
    if not found:
        raise LoomOptionError(
            f"loomdb has no extra {extra!r}", hint=f"one of: {', '.join(GPU_EXTRAS)}"
        )
    return found


def _name(requirement: str) -> str:
    """The distribution a requirement names (``cupy-cuda12x>=13`` → ``cupy-cuda12x``)."""
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]


def install_requirements(
    venv: ServerVenv, caller_python: str, log: Log, extra: Sequence[str] = ()
) -> dict[str, str]:
    """Install SERVER_PACKAGES and the ``extra`` requirements into ``venv``; pinned when the
    caller's Python is the same minor and has them.

    Returns the installed versions.  Nothing is run when the wanted versions are already there.
    """
    specs = {name: name for name in SERVER_PACKAGES} | {_name(r): r for r in extra}
    same_python = venv.version == caller_python
    wanted = {name: _caller_version(name) if same_python else None for name in specs}
    have = installed_versions(venv, list(specs))
    missing = [
        name
        for name, version in wanted.items()
        if have[name] is None or (version is not None and have[name] != version)
    ]
    if not missing:
        log("server packages already installed: " + _describe(have))
        return {name: str(version) for name, version in have.items()}
    pinned = [
        specs[name] if wanted[name] is None else f"{name}=={wanted[name]}" for name in missing
    ]
    log(f"installing {' '.join(pinned)} into {venv.path} (this can take a minute)")
    try:
        _pip(venv, pinned, f"install {' '.join(pinned)}")
    except LoomStateError as exc:
        unpinned = [specs[name] for name in missing]
        if pinned == unpinned:
            raise
        log(f"pinned install failed ({exc.message}); installing the latest versions instead")
        _pip(venv, unpinned, f"install {' '.join(unpinned)}")
    have = installed_versions(venv, list(specs))
    log("server packages: " + _describe(have))
    return {name: str(version) for name, version in have.items()}


def _describe(versions: dict[str, str | None]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def copy_loomdb(venv: ServerVenv, log: Log) -> str:
    """Put the loomdb this process runs into ``venv``: the same files, wherever they came from
    (a wheel's site-packages or a source checkout), compiled, with a minimal dist-info."""
    import loomdb

    package = Path(loomdb.__file__).resolve().parent
    site = Path(venv.site_packages[0])
    target = site / "loomdb"
    log(f"copying loomdb {loomdb.__version__} from {package} into {site}")
    for old in [target, *site.glob("loomdb-*.dist-info"), *site.glob("__editable__*loomdb*")]:
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package, target, ignore=skip)
    info = site / f"loomdb-{loomdb.__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: loomdb\nVersion: {loomdb.__version__}\n"
    )
    (info / "INSTALLER").write_text("loomdb pg install\n")
    _run(
        [venv.python, "-m", "compileall", "-q", str(target)],
        "compile loomdb's modules",
        "check that the environment's Python works",
    )
    return str(package)


def make_readable(path: str) -> None:
    """Give everyone read access to ``path`` (and traverse access to its directories)."""
    read = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
    search = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    for directory, _dirs, files in os.walk(path):
        _add_mode(directory, read | search)
        for name in files:
            full = os.path.join(directory, name)
            if not os.path.islink(full):
                mode = os.stat(full).st_mode
                _add_mode(full, read | (search if mode & stat.S_IXUSR else 0))


def _add_mode(path: str, bits: int) -> None:
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & bits != bits:
        os.chmod(path, mode | bits)
