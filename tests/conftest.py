"""Fixtures shared by the test suite.

``engine`` is parametrised over DuckDB and PostgreSQL, so every engine-level test runs on both.
PostgreSQL is installed the way the README says (``loomdb pg install --dsn …`` from a fresh
virtual environment holding a wheel of this checkout; tests/support/pgserver.py).  When no
server can be had the PostgreSQL tests skip locally and FAIL in CI (``CI`` set); so do tests
that need the shared datasets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from loomdb.datasets import shared_datasets  # noqa: E402
from support import pgserver, wheel  # noqa: E402
from support.engines import DuckEngine, Engine, PgEngine  # noqa: E402


def need(what: str) -> None:
    """Skip locally, fail in CI: a missing prerequisite is never a silent pass there."""
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {what}")
    pytest.skip(what)


@pytest.fixture(scope="session")
def wheel_python(tmp_path_factory) -> Path:
    """The python of a fresh venv holding a wheel of this checkout (and its dependencies)."""
    return wheel.wheel_venv(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def pg_dsn(request) -> Iterator[str]:
    def cli() -> Path:  # built only when loomdb must be installed
        return request.getfixturevalue("wheel_python").parent / "loomdb"

    try:
        with pgserver.provision(cli) as dsn:
            yield dsn
    except pgserver.PostgresUnavailable as e:
        need(f"PostgreSQL: {e}")


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request) -> Iterator[Engine]:
    if request.param == "duckdb":
        e: Engine = DuckEngine()
    else:
        e = PgEngine(request.getfixturevalue("pg_dsn"))
    yield e
    e.close()


LOOMDB_SQL = [sys.executable, "-m", "loomdb.cli.main", "sql", "-q", "--keep-going", "--echo"]
DEMO = Path(__file__).resolve().parents[1] / "sql" / "demo.sql"


def sql_env(**extra: str) -> dict[str, str]:
    """The environment ``loomdb sql`` and psql run in: UTF-8 output, plus ``extra``."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8", PGCLIENTENCODING="UTF8")
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def demo_on_duckdb(tmp_path_factory) -> tuple[list[str], subprocess.CompletedProcess]:
    """``sql/demo.sql`` run once by ``loomdb sql`` on a fresh DuckDB file: the command and
    what it did.  The demo is the suite's slowest script: this one run is the output
    test_sql_regression pins and the first of the two runs on one file test_cli compares."""
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    cmd = [*LOOMDB_SQL, "--duckdb", str(path), "-f", str(DEMO)]
    done = subprocess.run(cmd, capture_output=True, encoding="utf-8", env=sql_env(), timeout=600)
    return cmd, done


@pytest.fixture(scope="session")
def datasets() -> Path:
    path = shared_datasets()
    if path is None:
        need("the shared datasets folder (../shared/datasets)")
    assert path is not None
    return path
