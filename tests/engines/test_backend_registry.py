"""The backend registry: built-ins, run-time registration, and an outside package's backend
found through the ``loomdb.backends`` entry-point group and used from SQL."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

from loomdb.accel import registry
from loomdb.errors import LoomOptionError

PACKAGE = '''
import numpy as np

CALLS = {"margins": 0, "gradient": 0}


class TinyBackend:
    """A third-party backend: plain numpy, counting its calls."""

    name = "tiny"

    def available(self):
        return True, ""

    def supports(self, fmt):
        return fmt == "dense"

    def margins(self, batch, W):
        CALLS["margins"] += 1
        return np.asarray(batch.X) @ W

    def gradient(self, batch, R):
        CALLS["gradient"] += 1
        return np.asarray(batch.X).T @ R
'''


@pytest.fixture
def tiny_package(tmp_path, monkeypatch):
    """An installed distribution (package + dist-info with an entry point) on sys.path."""
    (tmp_path / "tiny_loom_backend").mkdir()
    (tmp_path / "tiny_loom_backend" / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    info = tmp_path / "tiny_loom_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-loom-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[loomdb.backends]\ntiny = tiny_loom_backend:TinyBackend\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    registry._registry.pop("tiny", None)
    sys.modules.pop("tiny_loom_backend", None)


def test_outside_backend_is_listed_and_trains_from_sql(tiny_package):
    import loomdb

    assert "tiny" in registry.names()
    con = loomdb.connect()
    listed = json.loads(con.execute("SELECT loom_backends()").fetchall()[0][0])
    assert {"name": "tiny", "available": True, "reason": ""} in listed
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    from loomdb.bench.tables import load_duckdb

    load_duckdb(con.duckdb, "t", X, (X[:, 0] > 0).astype(float))
    con.execute(
        "SELECT loom_train('m', 't', 'y', "
        '\'{"backend": "tiny", "epochs": 2, "batch_size": 32, "lr": 0.1, "tol": 0}\')'
    ).fetchall()
    assert con.execute("SELECT backend FROM loom.models").fetchall() == [("tiny",)]
    calls = sys.modules["tiny_loom_backend"].CALLS
    assert calls["margins"] == calls["gradient"] == 2 * 4  # 2 epochs × 4 batches of 32
    with pytest.raises(loomdb.LoomOptionError, match="cannot train on the toc format"):
        con.execute(
            "SELECT loom_train('m2', 't', 'y', '{\"backend\": \"tiny\", \"format\": \"toc\"}')"
        ).fetchall()
    con.close()


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(LoomOptionError, match="unknown backend 'nope'") as e:
        registry.get("nope")
    assert "cpu" in (e.value.hint or "")


def test_register_at_run_time_and_clobber():
    class Mine:
        name = "mine"

        def available(self):
            return False, "switched off"

    registry.register("mine", Mine)
    try:
        with pytest.raises(LoomOptionError):
            registry.register("mine", object)
        entry = next(b for b in registry.describe() if b["name"] == "mine")
        assert entry == {"name": "mine", "available": False, "reason": "switched off"}
        with pytest.raises(Exception, match="not usable here: switched off") as e:
            registry.get("mine")
        assert "loom_backends()" in (getattr(e.value, "hint", None) or "")  # it had none
    finally:
        registry._registry.pop("mine", None)
