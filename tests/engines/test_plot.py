"""``loomdb plot``: models' loss per epoch, read through SQL from either engine, as a PNG."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from loomdb.cli.plot import curves

LOOMDB = [sys.executable, "-m", "loomdb.cli.main"]


def _train(engine):
    rng = np.random.default_rng(0)
    X = rng.random((400, 3))
    engine.load("pts", X, (X[:, 0] > X[:, 1]).astype(float), ["a", "b", "c"])
    engine.scalar("""SELECT loom_train('p_dense', 'pts', 'y', '{"epochs": 6, "tol": 0}')""")
    engine.scalar("""SELECT loom_create_index('p_ix', 'pts', 'y', '{"format": "mlweaving"}')""")
    engine.scalar(
        "SELECT loom_train('p_adaptive', NULL, 'y', "
        """'{"index": "p_ix", "precision": "adaptive", "epochs": 12, "tol": 0}')"""
    )


def test_curves_are_the_training_history(engine):
    _train(engine)
    dense, adaptive = curves(engine.rows, ["p_dense", "p_adaptive"])
    assert dense.epochs == list(range(1, 7)) and not dense.varying_precision
    assert adaptive.varying_precision and adaptive.precision == sorted(adaptive.precision)
    history = engine.rows("SELECT loss FROM loom_training_info('p_adaptive') ORDER BY epoch")
    assert adaptive.loss == [r[0] for r in history]
    with pytest.raises(engine.errors):
        curves(engine.rows, ["nope"])


def test_the_cli_writes_a_png(tmp_path):
    from PIL import Image

    from support.engines import DuckEngine

    path = tmp_path / "p.duckdb"
    engine = DuckEngine(str(path))
    _train(engine)
    engine.close()
    out = tmp_path / "loss.png"
    cmd = [*LOOMDB, "plot", "p_dense", "p_adaptive", "--duckdb", str(path), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (800, 600)  # two panels: bits read too
    done = subprocess.run([*cmd[:4], "nope", *cmd[6:]], capture_output=True, text=True)
    assert done.returncode == 1 and "loomdb: error: model 'nope'" in done.stderr


def test_the_cli_refuses_what_it_cannot_read_or_write(tmp_path, capsys):
    from loomdb.cli.main import main

    missing = tmp_path / "nonexist.duckdb"
    cases = [
        (["plot", "m", "--duckdb", str(missing)], f"there is no DuckDB database {missing}"),
        (
            ["plot", "m", "--duckdb", str(missing), "-o", str(tmp_path / "no" / "x.png")],
            f"there is no folder {tmp_path / 'no'}",
        ),
        (
            ["plot", "m", "--duckdb", str(missing), "-o", str(tmp_path / "x.txt")],
            "matplotlib writes no '.txt' files",
        ),
        (["plot", "m", "--dsn", "host=/nonexist dbname=x"], "could not connect to PostgreSQL"),
        (
            ["load", "libsvm", str(tmp_path / "nope.svm"), "s", "--duckdb", str(tmp_path / "l.db")],
            f"libsvm: there is no file {tmp_path / 'nope.svm'}",
        ),
        (
            ["load", "libsvm", "x.svm", "s", "--dsn", "host=/nonexist dbname=x"],
            "could not connect to PostgreSQL",
        ),
    ]
    for argv, message in cases:
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("loomdb: error: ") and message in err and "hint: " in err, err
        assert "Traceback" not in err
    assert not missing.exists()  # plot reads a database: it never makes an empty one


@pytest.mark.postgres
def test_the_cli_says_what_postgresql_refused(pg_dsn, tmp_path, capsys):
    """A model the server does not have: loomdb's error and hint, as on DuckDB, not psycopg's
    traceback."""
    from loomdb.cli.main import main

    assert main(["plot", "nope", "--dsn", pg_dsn, "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("loomdb: error: model 'nope' does not exist\nhint: train it"), err
    assert not (tmp_path / "x.png").exists()


def test_an_output_folder_this_user_cannot_write_is_refused_up_front(tmp_path, monkeypatch):
    """Checked before any model is read (as root every folder is writable: access is asked)."""
    from loomdb.cli import plot
    from loomdb.errors import LoomStateError

    asked = []
    monkeypatch.setattr(plot.os, "access", lambda path, mode: asked.append(path) and False)
    with pytest.raises(LoomStateError, match="is not writable by this user") as e:
        plot.writable_image(str(tmp_path / "loss.png"))
    assert asked == [str(tmp_path)] and "-o" in (e.value.hint or "")


def _one_epoch(tmp_path):
    from support.engines import DuckEngine

    path = tmp_path / "one.duckdb"
    engine = DuckEngine(str(path))
    engine.scalar("SELECT loom_load('sample', 'iris', 'iris')")
    engine.scalar("""SELECT loom_train('one', 'iris', 'species', '{"epochs": 1}')""")
    engine.close()
    return path


def test_the_cli_writes_and_prints_the_very_path_it_was_given(tmp_path, capsys):
    """-o without a suffix is a PNG at exactly that path (matplotlib alone would add .png and
    the path printed would name no file); a folder there, or a write that fails, is a LoomError
    (exit 1), never a traceback nor a file left half-written."""
    from PIL import Image

    from loomdb.cli.main import main

    db = str(_one_epoch(tmp_path))
    out = tmp_path / "loss"
    assert main(["plot", "one", "--duckdb", db, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    with Image.open(out) as image:
        assert image.format == "PNG"
    assert not (tmp_path / "loss.png").exists()
    for folder in (tmp_path / "taken.png", tmp_path / "taken"):
        folder.mkdir()
        assert main(["plot", "one", "--duckdb", db, "-o", str(folder)]) == 1
        err = capsys.readouterr().err
        assert f"cannot write {folder}: it is a folder" in err and "hint: " in err, err


def test_a_failed_write_is_a_loom_error(tmp_path, monkeypatch, capsys):
    import errno

    from matplotlib.figure import Figure

    from loomdb.cli.main import main

    def full(self, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"\x89PNG")  # the start of the image, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    db = str(_one_epoch(tmp_path))
    monkeypatch.setattr(Figure, "savefig", full)
    out = tmp_path / "full.png"
    assert main(["plot", "one", "--duckdb", db, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"cannot write {out}: No space left on device" in err and "hint: " in err, err
    assert not out.exists()
