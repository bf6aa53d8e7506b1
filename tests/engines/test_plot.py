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
