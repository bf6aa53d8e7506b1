"""``loomdb fuzz``: a short campaign of every decoder finds nothing, and each kind of finding
is reported, saved and fails the command.

atheris is needed: without it these tests skip locally and FAIL in CI (``CI`` set), so a
missing fuzzer is never a silent pass there.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from loomdb.cli.main import main
from loomdb.errors import LoomStateError
from loomdb.fuzz import campaign

SHORT = 20_000  # runs per decoder: a few seconds each


@pytest.fixture
def atheris():
    if importlib.util.find_spec("atheris") is None:
        if os.environ.get("CI"):
            pytest.fail("atheris is required in CI: pip install 'loomdb[fuzz]'")
        pytest.skip("atheris is not installed here (pip install 'loomdb[fuzz]')")


def test_a_short_campaign_of_every_decoder_finds_nothing(atheris, tmp_path, capsys):
    status = main(["fuzz", "--runs", str(SHORT), "--artifacts", str(tmp_path)])
    table = capsys.readouterr().out
    assert status == 0, table
    for decoder in campaign.DECODERS:
        row = next(line for line in table.splitlines() if line.startswith(decoder)).split()
        assert row[1] == f"{SHORT:,}" and row[-3:] == ["0", "0", "0"], table
    assert not list(tmp_path.iterdir())  # nothing saved


@pytest.mark.parametrize(
    ("target", "kind", "detail"),
    [
        ("raises", "exceptions", "exception: KeyError: 'planted'"),
        ("hangs", "hangs", "hang: an input ran past the per-input timeout"),
        ("aborts", "crashes", "crash: a deadly signal"),
        ("is_killed", "crashes", "crash: killed by signal 9"),
    ],
)
def test_each_kind_of_finding_is_reported_and_saved(
    atheris, tmp_path, monkeypatch, capsys, target, kind, detail
):
    here = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    args = ["fuzz", f"fuzz_faulty:{target}", "--runs", "1000", "--timeout", "1"]
    status = main([*args, "--artifacts", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert f"fuzz_faulty:{target}: {detail}; input saved to {tmp_path}" in out
    row = next(line for line in out.splitlines() if line.startswith("fuzz_faulty")).split()
    counts = dict(zip(["crashes", "hangs", "exceptions"], row[-3:]))
    assert counts == {k: "1" if k == kind else "0" for k in counts}
    (saved,) = tmp_path.glob("*.bin")
    assert saved.read_bytes() and saved.with_suffix(".log").exists()  # the non-empty input


def test_without_atheris_the_command_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(LoomStateError) as info:
        campaign.require_atheris()
    assert info.value.hint == "pip install 'loomdb[fuzz]'"
    assert main(["fuzz", "--runs", "10"]) == 1
    assert "hint: pip install 'loomdb[fuzz]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch"], "unknown decoder 'nosuch'"),
        (["--runs", "0"], "--runs must be at least 1"),
        (["--timeout", "-1"], "--timeout must be at least 1"),
        (["--max-len", "0"], "--max-len must be at least 1"),
    ],
)
def test_bad_arguments_are_option_errors(args, message, capsys):
    """Each says what was wrong and, on a hint line, what to give instead."""
    assert main(["fuzz", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and "\nhint: " in err, err
