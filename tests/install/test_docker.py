"""The Docker image: no Docker engine runs here, so its Dockerfile is linted with hadolint (the
Dockerfile linter, its shell with ShellCheck), its init script with ShellCheck, and the init
script — CREATE EXTENSION, then the demo in a database of its own — runs against a server
loomdb was installed into the way the image installs it (a wheel, then ``loomdb pg prepare``'s
files and ``CREATE EXTENSION``: what ``loomdb pg install`` does, which made the test server)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

import loomdb
from conftest import need

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
INIT = ROOT / "docker" / "loomdb-init.sh"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        need(f"{name} (pip install '.[test]')")
    assert found is not None
    return found


def test_the_dockerfile_passes_hadolint():
    config = ROOT / ".hadolint.yaml"
    done = subprocess.run(
        [_tool("hadolint"), "--config", str(config), str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_init_script_passes_shellcheck():
    done = subprocess.run([_tool("shellcheck"), str(INIT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_installs_the_documented_way():
    text = DOCKERFILE.read_text()
    assert re.search(r"bin/pip install [^\n]*/opt/loomdb/src", text)  # pip install of loomdb
    assert "bin/loomdb pg prepare" in text  # the server machine's part of `loomdb pg install`
    assert "COPY sql/demo.sql /opt/loomdb/demo.sql" in text
    assert "docker-entrypoint-initdb.d/" in text


@pytest.mark.postgres
def test_the_init_script_creates_loomdb_and_runs_the_demo(pg_dsn):
    from support import pgserver

    if pgserver.cluster is None and not os.environ.get("LOOMDB_TEST_ALLOW_ROLES"):
        pytest.skip("not a server this test run made: the init script creates databases")
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    database, demo = f"loom_image_{uuid.uuid4().hex[:8]}", f"loom_demo_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")  # what the image's initdb made
    env = dict(
        os.environ,
        PGHOST=str(info.get("host", "")),
        PGPORT=str(info.get("port", "5432")),
        POSTGRES_USER=str(info.get("user", "postgres")),
        POSTGRES_DB=database,
        LOOMDB_DEMO_DB=demo,
        LOOMDB_DEMO_SQL=str(ROOT / "sql" / "demo.sql"),
    )
    try:
        done = subprocess.run(["sh", str(INIT)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert loomdb.__version__ in done.stdout  # loom_version() in $POSTGRES_DB
        assert "compression_ratio" in done.stdout and "images_called_zero" in done.stdout
        assert "ERROR" not in done.stdout + done.stderr
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            for name in (database, demo):
                admin.execute(f"DROP DATABASE IF EXISTS {name}")
