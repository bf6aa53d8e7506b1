"""``loomdb``'s start: a subcommand imports what it needs and no more, and every ``--help``
still lists each subcommand's arguments (they are added when that subcommand runs)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from loomdb.bench import SUITES
from loomdb.cli.main import main
from loomdb.engines.postgres import install
from loomdb.fuzz import campaign
from loomdb.loaders import names as loader_names

NOT_FOR_DUCKDB = ("psycopg", "loomdb.engines.postgres.install", "loomdb.fuzz.campaign", "tqdm")


def helped(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def options_of(add_arguments, *args) -> list[str]:
    """The option strings and positional names ``add_arguments`` gives a parser."""
    p = argparse.ArgumentParser()
    add_arguments(p, *args)
    return [s for a in p._actions for s in (a.option_strings or [a.metavar or a.dest])]


def test_sql_on_duckdb_imports_neither_psycopg_nor_the_other_subcommands():
    probe = (
        "import sys\n"
        "from loomdb.cli.main import main\n"
        "status = main(['sql', '--duckdb', ':memory:', '-q', '-c', 'SELECT 41 + 1 AS answer'])\n"
        f"print(status, [m for m in {NOT_FOR_DUCKDB!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert " 42" in done.stdout
    assert done.stdout.splitlines()[-1] == "0 []"


def test_sql_on_postgresql_imports_no_duckdb():
    """Refused here (nothing listens on port 1): the error is PostgreSQL's, with its hint."""
    probe = (
        "import sys\n"
        "from loomdb.cli.main import main\n"
        "status = main(['sql', '--dsn', 'host=127.0.0.1 port=1', '-q', '-c', 'SELECT 1'])\n"
        "print(status, [m for m in ('duckdb', 'pyarrow', 'tqdm') if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "1 []", done.stdout + done.stderr
    assert "loomdb: error: could not connect to PostgreSQL" in done.stderr
    assert "hint: check --dsn" in done.stderr


def test_the_top_level_help_lists_every_subcommand(capsys):
    out = helped(capsys)
    for command in ("sql", "pg", "load", "plot", "bench", "fuzz"):
        assert f"\n    {command} " in out, out
    assert "install" in helped(capsys, "pg") and "prepare" in helped(capsys, "pg")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["pg", "install"], lambda: options_of(install.add_arguments)),
        (["pg", "prepare"], lambda: options_of(install.add_arguments, True)),
        (["fuzz"], lambda: [*options_of(campaign.add_arguments), *campaign.DECODERS]),
        (["bench"], lambda: [*SUITES, "--quick", "--json", "--dsn", "--rows", "--formats"]),
        (["load"], lambda: [*loader_names(), "--duckdb", "--dsn", "--options", "table"]),
        (["plot"], lambda: ["MODEL", "--duckdb", "--dsn", "--output", "--title"]),
        (["sql"], lambda: ["--duckdb", "--dsn", "--file", "--command", "--quiet", "--echo"]),
    ],
)
def test_each_subcommands_help_lists_its_arguments(capsys, argv, expected):
    out = helped(capsys, *argv)
    for word in expected():
        assert word in out, (word, out)


def test_a_subcommands_usage_error_shows_its_arguments(capsys):
    with pytest.raises(SystemExit) as done:
        main(["load"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "usage: loomdb load" in err and "--duckdb PATH" in err and "kind path table" in err


def test_every_command_exits_1_where_its_database_cannot_be_opened_and_sql_3_on_a_script(
    capsys, tmp_path
):
    """``loomdb sql`` exited 3 where it could not connect (its code for a failed statement)
    while ``loomdb load`` and ``loomdb plot`` exited 1 for the same failure."""
    dsn = "host=127.0.0.1 port=1 connect_timeout=5"  # nothing listens on port 1
    unopenable = str(tmp_path / "nosuch" / "x.duckdb")
    for argv in (
        ["sql", "--dsn", dsn, "-c", "SELECT 1"],
        ["load", "sample", "iris", "iris", "--dsn", dsn],
        ["plot", "m", "--dsn", dsn, "-o", str(tmp_path / "m.png")],
        ["sql", "--duckdb", unopenable, "-c", "SELECT 1"],
        ["load", "sample", "iris", "iris", "--duckdb", unopenable],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("loomdb: error: could not ") and "hint: check --" in err, err
    for script in ("SELECT nosuch", "SELECT 1;\n\\c otherdb\nSELECT 2;"):  # the script failed
        assert main(["sql", "--duckdb", ":memory:", "-c", script]) == 3, script
        assert capsys.readouterr().err.startswith("ERROR:  ")
