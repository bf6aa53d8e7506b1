"""A worker lost in the middle of a distributed train (distributed/runner.py): its minibatches
move to the workers left and the train ends as if nothing happened, or, with none left, the
train fails clearly and stores nothing.

The loss is made deterministic: two workers that run in this process (DuckDB runs its UDFs
here), one of which is reported lost at a chosen step, the way ``DaskWorkers`` reports a worker
whose process went away.  No clock, no killed process.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_distributed import coefficients, dense_table, record, train

from loomdb.distributed import cluster as dask_cluster
from loomdb.distributed import runner


class Flaky(dask_cluster.InProcess):
    """Workers ``w1`` and ``w2`` in this process; ``gone`` go away at map call ``at``."""

    def __init__(self, gone: list[str], at: int):
        self.workers = ["w1", "w2"]
        self.gone, self.at, self.calls = gone, at, 0

    def map(self, calls, check):
        self.calls += 1
        if self.calls >= self.at and any(w in calls for w in self.gone):
            raise dask_cluster.Lost([w for w in self.gone if w in calls], "its process went away")
        return super().map(calls, check)


@pytest.fixture
def flaky(monkeypatch):
    made: list[Flaky] = []

    def use(gone: list[str], at: int) -> list[Flaky]:
        def open_workers(_spec, _timeout_s):
            made.append(Flaky(gone, at))
            return made[-1]

        monkeypatch.setattr(runner, "open_workers", open_workers)
        return made

    return use


OPTIONS = {"cluster": "inprocess", "compress": "none", "step_batches": 2, "batch_size": 100}


@pytest.fixture
def duck(engine):
    if engine.name != "duckdb":
        pytest.skip("the workers are replaced in this process: DuckDB runs its UDFs here")
    return engine


def test_a_worker_lost_mid_train_hands_its_minibatches_to_the_others(duck, flaky):
    src = dense_table(duck)
    train(duck, "whole", src, OPTIONS)  # the reference: one worker, never lost
    made = flaky(["w2"], at=10)  # partitioning and a few steps first
    train(duck, "survived", src, OPTIONS)
    assert made[0].calls > 10  # the loss happened in the middle, and training went on
    _, history, report = record(duck, "survived")
    assert report["workers"] == 2 and report["lost_workers"] == 1
    assert report["workers_left"] == 1 and report["retries"] >= 1
    assert len(history) == 3  # every epoch ran
    assert np.allclose(
        coefficients(duck, "survived"), coefficients(duck, "whole"), rtol=1e-9, atol=1e-12
    )


def test_every_worker_lost_fails_the_train_and_stores_nothing(duck, flaky):
    src = dense_table(duck)
    flaky(["w1", "w2"], at=10)
    with pytest.raises(duck.errors, match="lost"):
        train(duck, "gone", src, OPTIONS)
    assert duck.scalar("SELECT count(*) FROM loom.models WHERE name = 'gone'") == 0
