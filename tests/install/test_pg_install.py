"""``loomdb pg install``: the server imports loomdb, the settings are set, reinstalling is safe.

The server tests use the session's ``pg_dsn`` (tests/pgserver.py provisions it); the install is
only run again on a throwaway cluster that provisioning made itself.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import psycopg
import pytest

import loomdb
from loomdb.engines.postgres import extension_files, server_setup
from loomdb.engines.postgres import install as pg_install
from loomdb.errors import LoomOptionError, LoomStateError

REPO = Path(__file__).resolve().parent.parent


# -- without a server --------------------------------------------------------------------------


def test_source_accepts_checkout_or_its_python_dir():
    assert pg_install.source_python_dir(str(REPO)) == str(REPO / "python")
    assert pg_install.source_python_dir(str(REPO / "python")) == str(REPO / "python")
    with pytest.raises(LoomOptionError, match="holds no loomdb package"):
        pg_install.source_python_dir(str(REPO / "tests"))


def test_extension_files_have_control_and_script():
    files = extension_files.load()
    assert "loomdb.control" in files
    assert any(name.startswith("loomdb--") and name.endswith(".sql") for name in files)
    assert "plpython3u" in files["loomdb.control"]


def test_copy_extension_files_refuses_paths(tmp_path):
    with pytest.raises(LoomStateError, match="refusing"):
        extension_files.write({"../evil.sql": ""}, str(tmp_path))
    written = extension_files.write({"loomdb.control": "x"}, str(tmp_path))
    assert written == ["loomdb.control"]
    assert (tmp_path / "loomdb.control").stat().st_mode & 0o777 == 0o644


def test_describe_dsn_hides_the_password():
    shown = server_setup.describe_dsn("postgresql://alice:secret@db.example:5433/prod")
    assert "secret" not in shown and "db.example" in shown and "5433" in shown


def test_install_says_when_the_server_cannot_be_reached():
    with pytest.raises(LoomStateError, match="could not connect"):
        pg_install.install("host=127.0.0.1 port=1 user=postgres connect_timeout=2", log=print)


def test_cli_arguments():
    parser = argparse.ArgumentParser()
    pg_install.add_arguments(parser)
    args = parser.parse_args(["--dsn", "host=x", "--source", ".", "--reinstall"])
    assert (args.dsn, args.source, args.reinstall) == ("host=x", ".", True)
    assert args.venv == pg_install.DEFAULT_VENV and args.python == pg_install.DEFAULT_PYTHON


# -- against the provisioned server ------------------------------------------------------------


def _scalar(conn: psycopg.Connection, query: str, params: list[str] | None = None) -> object:
    row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def _settings(dsn: str) -> dict[str, object]:
    with psycopg.connect(dsn) as conn:
        return {
            name: _scalar(conn, "SELECT current_setting(%s, true)", [name])
            for name in ("loomdb.python_path", "loomdb.numba_cache_dir")
        }


@pytest.mark.postgres
def test_loom_version_runs_in_the_server(pg_dsn):
    with psycopg.connect(pg_dsn) as conn:
        assert _scalar(conn, "SELECT loom_version()") == loomdb.__version__


@pytest.mark.postgres
def test_server_python_imports_numpy_and_numba(pg_dsn):
    notices: list[str] = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SELECT loom_version()")  # bootstraps sys.path in this backend
        conn.execute(
            "DO $$\n"
            "import os, sys, numpy, numba\n"
            "plpy.notice(sys.modules['loomdb'].__file__)\n"
            "plpy.notice(os.environ.get('NUMBA_CACHE_DIR', ''))\n"
            "$$ LANGUAGE plpython3u"
        )
    loomdb_file, cache_dir = notices[-2:]
    assert loomdb_file.endswith(os.path.join("loomdb", "__init__.py"))
    assert cache_dir == _settings(pg_dsn)["loomdb.numba_cache_dir"]


@pytest.mark.postgres
def test_settings_are_set_server_wide(pg_dsn):
    settings = _settings(pg_dsn)
    assert settings["loomdb.numba_cache_dir"]
    path = str(settings["loomdb.python_path"] or "")
    assert any(entry.endswith("site-packages") for entry in path.split(":"))
    with psycopg.connect(pg_dsn) as conn:
        in_files = conn.execute(
            "SELECT name, setting FROM pg_file_settings WHERE name LIKE 'loomdb.%' AND applied"
        ).fetchall()
    assert dict(in_files) == settings  # from the configuration files, for every session


@pytest.mark.postgres
def test_install_again_is_idempotent(pg_dsn):
    import pgserver  # beside this file, as conftest imports it

    made = pgserver.cluster_install
    if made is None or made["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not installing into it again")
    first = made["result"]
    lines: list[str] = []
    again = pg_install.install(pg_dsn, **made["arguments"], log=lines.append)
    assert again["action"] == "already installed"
    assert again["python_path"] == first["python_path"]
    assert again["server_loomdb_file"] == first["server_loomdb_file"]
    assert any("reusing virtual environment" in line for line in lines)
    assert _settings(pg_dsn)["loomdb.python_path"] == first["python_path"]

    redone = pg_install.install(pg_dsn, **made["arguments"], reinstall=True, log=lines.append)
    assert redone["action"] == "reinstalled"
    with psycopg.connect(pg_dsn) as conn:
        assert _scalar(conn, "SELECT loom_version()") == loomdb.__version__


@pytest.mark.postgres
def test_install_refuses_a_role_that_is_not_superuser(pg_dsn):
    import pgserver

    if pgserver.cluster_install is None or pgserver.cluster_install["dsn"] != pg_dsn:
        pytest.skip("the server was not made by the tests: not adding a role to it")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE loom_plain LOGIN")
    try:
        with pytest.raises(LoomStateError, match="not a superuser"):
            pg_install.install(f"{pg_dsn} user=loom_plain", log=lambda line: None)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE loom_plain")
