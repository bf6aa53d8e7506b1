"""The server environment's packages (``engines/postgres/venv``): what ``install_requirements``
asks pip for, with and without a loomdb extra (``loomdb pg install --gpu``).  pip itself is not
run: the commands are recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loomdb.engines.postgres import install, venv
from loomdb.errors import LoomOptionError

ENV = venv.ServerVenv("/srv/venv", "/srv/venv/bin/python", "3.11", ("/srv/site",))


def test_the_gpu_extras_are_loomdbs_own():
    assert venv.extra_requirements("gpu") == ("cupy-cuda12x>=13",)
    assert venv.extra_requirements("gpu-cuda13") == ("cupy-cuda13x>=13",)
    with pytest.raises(LoomOptionError, match="no extra 'gpu-cuda99'"):
        venv.extra_requirements("gpu-cuda99")


HERE = {name: "1.0" for name in venv.SERVER_PACKAGES}  # what this side has, at which version


def _recorded(monkeypatch, here: dict[str, str]) -> list[list[str]]:
    """pip's commands, with this side holding ``here`` and the environment holding the server
    packages at this side's versions (and everything, once pip ran)."""
    commands: list[list[str]] = []

    def run(cmd, what, hint):
        if "-c" in cmd:  # installed_versions: every name asked for
            names = cmd[cmd.index("-c") + 2 :]
            held = HERE if not commands else {n: here.get(n, "2.0") for n in names}
            return json.dumps({n: held.get(n) for n in names})
        commands.append(list(cmd))
        return ""

    monkeypatch.setattr(venv, "_run", run)
    monkeypatch.setattr(venv, "_caller_version", here.get)
    return commands


def test_an_extra_is_installed_beside_the_server_packages(monkeypatch):
    commands = _recorded(monkeypatch, HERE)
    got = venv.install_requirements(ENV, "3.11", lambda line: None, ("cupy-cuda12x>=13",))
    assert len(commands) == 1 and commands[0][-1] == "cupy-cuda12x>=13"  # the only one missing
    assert got["cupy-cuda12x"] == "2.0" and set(venv.SERVER_PACKAGES) <= set(got)


def test_an_extra_this_side_has_is_pinned_to_its_version(monkeypatch):
    commands = _recorded(monkeypatch, {**HERE, "cupy-cuda12x": "13.3.0"})
    venv.install_requirements(ENV, "3.11", lambda line: None, ("cupy-cuda12x>=13",))
    assert [c[-1] for c in commands] == ["cupy-cuda12x==13.3.0"]


def test_without_an_extra_nothing_more_is_asked_for(monkeypatch):
    commands = _recorded(monkeypatch, HERE)
    got = venv.install_requirements(ENV, "3.11", lambda line: None)
    assert commands == [] and got == HERE


def test_pg_install_takes_gpu_extras_only():
    import argparse

    parser = argparse.ArgumentParser()
    install.add_arguments(parser)
    args = parser.parse_args(["--dsn", "x", "--gpu", "gpu-cuda13"])
    assert args.gpu == "gpu-cuda13" and parser.parse_args(["--dsn", "x"]).gpu is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--dsn", "x", "--gpu", "cuda"])


def _other_python(folder) -> None:
    """A ``bin/python`` in ``folder`` that reports another Python version than this one."""
    fake = folder / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho \'{"version": "2.7", "site": ["/nowhere"]}\'\n')
    fake.chmod(0o755)


def test_a_venv_path_holding_other_files_is_refused_and_left_alone(tmp_path):
    """``--venv /usr`` (a bin/python of another version): remaking it with ``venv --clear``
    would delete what the folder holds."""
    folder = tmp_path / "project"
    _other_python(folder)
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(LoomOptionError, match="not a virtual environment") as refused:
        venv.ensure_venv(str(folder), sys.executable, lambda line: None)
    assert "--venv" in (refused.value.hint or "")
    assert (folder / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in folder.iterdir()) == ["bin", "keep.txt"]


def test_pg_prepare_refuses_a_venv_that_is_a_file_without_a_traceback(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    done = subprocess.run(
        [sys.executable, "-m", "loomdb.cli.main", "pg", "prepare", "--server-user", "root"]
        + ["--extension-dir", str(tmp_path / "ext"), "--venv", str(a_file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"loomdb: error: --venv {a_file} is not a folder" in done.stderr
    assert "hint: give --venv a path" in done.stderr and "Traceback" not in done.stderr
    assert a_file.read_text() == "mine" and not (tmp_path / "ext").exists()


def loomdb_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "loomdb.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_numba_cache_folder_of_someone_elses_files_is_refused_and_left_alone(tmp_path):
    """``--numba-cache-dir /etc`` would have the whole tree given to the server's OS user."""
    from loomdb.engines.postgres import server_setup

    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "passwd").write_text("mine")
    server_uid = os.getuid() + 1  # the server runs as another OS user than the folder's owner
    with pytest.raises(LoomOptionError, match="holds files and is not the server's"):
        server_setup.check_private_path(str(folder), server_uid)
    with pytest.raises(LoomOptionError, match="is not a folder"):
        server_setup.check_private_path(str(folder / "passwd"), server_uid)
    server_setup.check_private_path(str(tmp_path / "new"), server_uid)  # made by install
    (tmp_path / "empty").mkdir()
    server_setup.check_private_path(str(tmp_path / "empty"), server_uid)
    server_setup.check_private_path(str(folder), os.getuid())  # the server's already
    done = loomdb_cli(
        "pg", "prepare", "--server-user", "root", "--extension-dir", str(tmp_path / "ext"),
        "--venv", str(tmp_path / "venv"), "--numba-cache-dir", str(folder / "passwd"),
    )  # fmt: skip
    assert done.returncode == 1 and "is not a folder" in done.stderr
    assert "hint: give --numba-cache-dir" in done.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "ext").exists()
    assert (folder / "passwd").read_text() == "mine"


def test_pg_prepare_refuses_an_os_user_that_does_not_exist(tmp_path):
    done = loomdb_cli(
        "pg", "prepare", "--server-user", "no_such_user_here", "--extension-dir", str(tmp_path)
    )
    assert done.returncode == 1
    assert "loomdb: error: there is no OS user 'no_such_user_here'" in done.stderr
    assert "hint: give --server-user" in done.stderr


def test_pg_install_refuses_drop_catalog_without_reinstall():
    """Before connecting: the option would otherwise be ignored by an update in place."""
    done = loomdb_cli("pg", "install", "--dsn", "host=127.0.0.1 port=1", "--drop-catalog")
    assert done.returncode == 1
    assert "--drop-catalog drops the catalog only with --reinstall" in done.stderr
    assert "checking the server" not in done.stderr
