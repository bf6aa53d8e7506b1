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
