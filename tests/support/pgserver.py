"""The PostgreSQL server the tests run against, with loomdb installed as the README says.

``provision(loomdb_cli)`` is a context manager yielding a superuser DSN; tests/conftest.py wraps
it in a session fixture.  ``loomdb_cli()`` gives the ``loomdb`` command of a fresh virtual
environment holding a wheel of this checkout (tests/support/wheel.py), and loomdb is installed
with exactly the README's command, ``loomdb pg install --dsn "…"``: no ``--source``, the
default server environment.  It picks, in order:

1. ``LOOMDB_TEST_DSN``: a server you run (installed into only when its database has no loomdb);
2. a Docker engine that answers ``docker info``: the image of docker/Dockerfile, started with
   testcontainers;
3. a throwaway cluster: ``initdb`` + ``pg_ctl`` in a temporary directory, on a free port of
   127.0.0.1 with ``trust`` authentication, run as the ``postgres`` OS user when we are root;
   stopped and deleted afterwards.

When none is possible ``PostgresUnavailable`` says what is missing (conftest turns it into a
skip, or a failure under CI).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGE_TAG = "loomdb-postgres:test"
DOCKER_TIMEOUT_S = 5

#: The DSN and install output of the throwaway cluster provision() made (else None), so tests
#: may install into it again without touching a server they did not make.
cluster: dict[str, str] | None = None


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be provided here; the message lists what is missing."""


def _log(line: str) -> None:
    print(f"[pgserver] {line}", file=sys.stderr, flush=True)


def readme_install(loomdb_cli: Callable[[], Path], dsn: str) -> str:
    """``loomdb pg install --dsn DSN``, as the README writes it; returns what it printed."""
    done = subprocess.run(
        [str(loomdb_cli()), "pg", "install", "--dsn", dsn], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"loomdb pg install failed:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


@contextlib.contextmanager
def provision(loomdb_cli: Callable[[], Path]) -> Iterator[str]:
    """Yield the DSN of a PostgreSQL server (superuser) with loomdb installed."""
    dsn = os.environ.get("LOOMDB_TEST_DSN")
    if dsn:
        _ensure_installed(loomdb_cli, dsn)
        yield dsn
        return
    missing = ["LOOMDB_TEST_DSN is not set"]
    docker_problem = _docker_problem()
    if docker_problem is None:
        with _container() as url:
            yield url
        return
    missing.append(docker_problem)
    cluster_problem = _cluster_problem()
    if cluster_problem is None:
        with _local_cluster(loomdb_cli) as local:
            yield local
        return
    missing.append(cluster_problem)
    raise PostgresUnavailable("no PostgreSQL server for the tests: " + "; ".join(missing))


def _ensure_installed(loomdb_cli: Callable[[], Path], dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'loomdb'").fetchone()
    if row is None:
        _log("loomdb is not installed in LOOMDB_TEST_DSN's database: installing it")
        readme_install(loomdb_cli, dsn)


def _docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client"
    try:
        done = subprocess.run(
            ["docker", "info"], capture_output=True, timeout=DOCKER_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "no Docker engine answers (docker info timed out)"
    if done.returncode != 0:
        return "no Docker engine answers docker info"
    return None


@contextlib.contextmanager
def _container() -> Iterator[str]:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:
        from testcontainers.postgres import PostgresContainer

    _log(f"building {IMAGE_TAG} from docker/Dockerfile")
    subprocess.run(
        ["docker", "build", "-f", str(REPO / "docker" / "Dockerfile"), "-t", IMAGE_TAG, str(REPO)],
        check=True,
    )
    container = PostgresContainer(
        IMAGE_TAG, username="postgres", password="loomdb", dbname="loomdb", driver=None
    )
    with container:
        yield container.get_connection_url()


def pg_bindir() -> Path | None:
    if os.environ.get("LOOMDB_PG_BINDIR"):
        return Path(os.environ["LOOMDB_PG_BINDIR"])
    installed = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    if installed:
        return max(installed, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(out.stdout.strip())
        if (bindir / "initdb").exists():
            return bindir
    return None


def _sharedir(bindir: Path) -> Path:
    out = subprocess.run(
        [str(bindir / "pg_config"), "--sharedir"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def _cluster_problem() -> str | None:
    bindir = pg_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        return "no PostgreSQL server binaries (initdb, pg_ctl) found; set LOOMDB_PG_BINDIR"
    extension_dir = _sharedir(bindir) / "extension"
    if not (extension_dir / "plpython3u.control").exists():
        major = bindir.parent.name
        return f"no plpython3u in {extension_dir} (apt-get install postgresql-plpython3-{major})"
    if not os.access(extension_dir, os.W_OK):
        return f"cannot write {extension_dir} to install loomdb there (run the tests as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no 'postgres' OS user to run the server as"
    return None


def as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(cmd: list[str], what: str, log_file: Path | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        server_log = log_file.read_text()[-3000:] if log_file and log_file.exists() else ""
        raise RuntimeError(
            f"{what} failed (exit {done.returncode}): {done.stdout}{done.stderr}{server_log}"
        )


@contextlib.contextmanager
def _local_cluster(loomdb_cli: Callable[[], Path]) -> Iterator[str]:
    global cluster
    bindir = pg_bindir()
    assert bindir is not None
    base = Path(tempfile.mkdtemp(prefix="loomdb-pg-"))
    data, log_file = base / "data", base / "server.log"
    if os.geteuid() == 0:
        server = pwd.getpwnam("postgres")
        os.chown(base, server.pw_uid, server.pw_gid)
    started = False
    try:
        _log(f"creating a throwaway cluster in {base}")
        _run(
            as_server_user(
                [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
                + ["-E", "UTF8", "--no-sync"]
            ),
            "initdb",
        )
        port = _free_port()
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run(
            as_server_user(
                [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log_file), "-o", options]
                + ["-w", "-t", "60", "start"]
            ),
            "pg_ctl start",
            log_file,
        )
        started = True
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        _log(f"installing loomdb with the README's command: loomdb pg install --dsn {dsn!r}")
        output = readme_install(loomdb_cli, dsn)
        cluster = {"dsn": dsn, "output": output, "log": str(log_file)}
        yield dsn
    finally:
        cluster = None
        if started:
            subprocess.run(
                as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
                capture_output=True,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)
