"""The server environment's packages (``engines/postgres/venv``): what ``install_requirements``
asks pip for, with and without a loomdb extra (``loomdb pg install --gpu``).  pip itself is not
run: the commands are recorded."""

from __future__ import annotations

import json

import pytest

from loomdb.engines.postgres import install, venv
from loomdb.errors import LoomOptionError

ENV = venv.ServerVenv("/srv/venv", "/srv/venv/bin/python", "3.11", ("/srv/site",))


def test_the_gpu_extras_are_loomdbs_own():
    assert venv.extra_requirements("gpu") == ("cupy-cuda12x>=13",)
    assert venv.extra_requirements("gpu-cuda13") == ("cupy-cuda13x>=13",)
    with pytest.raises(LoomOptionError, match="no extra 'gpu-cuda99'"):
        venv.extra_requirements("gpu-cuda99")


def _as_here() -> dict[str, str]:
    """The server packages installed at the versions this process has (any where it has none)."""
    return {name: venv._caller_version(name) or "9.9" for name in venv.SERVER_PACKAGES}


def _recorded(monkeypatch, have: dict[str, str | None]) -> list[list[str]]:
    """pip's commands, with ``have`` installed in the environment (and after pip ran)."""
    commands: list[list[str]] = []

    def run(cmd, what, hint):
        if "-c" in cmd:  # installed_versions: every name asked for
            names = cmd[cmd.index("-c") + 2 :]
            done = any("install" in c for c in commands)
            return json.dumps({n: "1.0" if done else have.get(n) for n in names})
        commands.append(list(cmd))
        return ""

    monkeypatch.setattr(venv, "_run", run)
    return commands


def test_an_extra_is_installed_beside_the_server_packages(monkeypatch):
    commands = _recorded(monkeypatch, _as_here())
    got = venv.install_requirements(ENV, "3.11", lambda line: None, ("cupy-cuda12x>=13",))
    assert len(commands) == 1 and commands[0][-1] == "cupy-cuda12x>=13"  # the only one missing
    assert got["cupy-cuda12x"] == "1.0" and set(venv.SERVER_PACKAGES) <= set(got)


def test_without_an_extra_nothing_more_is_asked_for(monkeypatch):
    commands = _recorded(monkeypatch, _as_here())
    got = venv.install_requirements(ENV, "3.11", lambda line: None)
    assert commands == [] and set(got) == set(venv.SERVER_PACKAGES)


def test_pg_install_takes_gpu_extras_only():
    import argparse

    parser = argparse.ArgumentParser()
    install.add_arguments(parser)
    args = parser.parse_args(["--dsn", "x", "--gpu", "gpu-cuda13"])
    assert args.gpu == "gpu-cuda13" and parser.parse_args(["--dsn", "x"]).gpu is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--dsn", "x", "--gpu", "cuda"])
