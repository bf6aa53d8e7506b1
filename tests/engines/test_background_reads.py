"""DuckDB reads a cold TOC epoch on a thread of its own (``store/read_ahead``): the same model to
the bit as reading in the caller's thread, off when DuckDB is held to one thread, and a damaged
minibatch still refused with the fix, the connection usable after it."""

from __future__ import annotations

import json

import pytest

import loomdb
from loomdb.errors import LoomFormatError
from loomdb.store import read_ahead
from loomdb.store.epochs import BACKGROUND_LEAST

BATCH = 8
ROWS = BATCH * (BACKGROUND_LEAST + 40)  # enough training minibatches to read in the background


@pytest.fixture
def con():
    con = loomdb.connect(":memory:", progress=False)
    con.execute(
        "CREATE TABLE src AS SELECT CAST(i % 7 AS DOUBLE) AS a, CAST((i * 13) % 11 AS DOUBLE) "
        "AS b, CAST(i % 5 AS DOUBLE) / 4 AS c, CAST((i * 7) % 3 = 0 AS DOUBLE) AS y "
        f"FROM range({ROWS}) r(i)"
    )
    options = {"format": "toc", "batch_size": BATCH}
    con.execute(f"SELECT loom_create_index('src_toc', 'src', 'y', '{json.dumps(options)}')")
    yield con
    con.close()


@pytest.fixture
def streams(monkeypatch):
    """How many epochs were read in the background."""
    count = [0]
    stream = read_ahead.ReadAhead.stream

    def counted(self, items):
        count[0] += 1
        return stream(self, items)

    monkeypatch.setattr(read_ahead.ReadAhead, "stream", counted)
    return count


def _train(con, threads: int, **extra) -> dict:
    con.execute(f"SET threads = {threads}")
    options = {"index": "src_toc", "model": "logistic", "epochs": 3, "tol": 0, "cache_mb": 0}
    options.update(replace=True, **extra)
    con.execute(f"SELECT loom_train('bg', NULL, 'y', '{json.dumps(options)}')")
    return json.loads(con.execute("SELECT loom_model_info('bg')").fetchone()[0])


@pytest.mark.parametrize("optimizer", ["nesterov", "sgd"])
def test_the_same_model_whichever_thread_reads(con, streams, optimizer):
    alone = _train(con, 1, optimizer=optimizer)
    assert streams[0] == 0  # one DuckDB thread: the train reads on its own thread
    beside = _train(con, 2, optimizer=optimizer)
    assert streams[0] == 3  # every cold epoch read in the background
    assert beside["coefficients"] == alone["coefficients"]
    assert beside["intercept"] == alone["intercept"]
    assert [h.get("loss") for h in beside["history"]] == [h.get("loss") for h in alone["history"]]


def test_not_in_background_where_the_step_holds_the_lock_or_the_epoch_is_kept(con, streams):
    _train(con, 2, optimizer="adam")  # the per-minibatch path
    _train(con, 2, parallel=2)  # shards: one thread reads, two step
    assert streams[0] == 0
    _train(con, 2, cache_mb=64)  # the first epoch reads, later ones are kept
    assert streams[0] == 1


def test_a_damaged_minibatch_read_in_the_background_is_refused(con, streams):
    late = BACKGROUND_LEAST  # well past the first hands read
    con.execute(
        f"UPDATE loom_data.src_toc SET checksum = checksum + 1 WHERE batch = {late} AND part = 1"
    )
    with pytest.raises(LoomFormatError, match=rf"minibatch {late} part 1 does not match"):
        _train(con, 2)
    assert streams[0] == 1
    assert con.execute("SELECT count(*) FROM loom.models WHERE name = 'bg'").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM src").fetchone() == (ROWS,)  # still usable
