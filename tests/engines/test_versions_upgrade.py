"""A DuckDB file whose catalog an older loomdb wrote (no ``version`` column, no
``loom.model_versions``) gains them when opened: its model is version 1 and keeps working."""

from __future__ import annotations

import json

import loomdb

TRAIN = (
    "SELECT loom_train('m', 't', 'y', '{\"epochs\": %d, \"replace\": true, \"progress\": false}')"
)


def test_an_older_duckdb_catalog_gains_versions(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = loomdb.connect(path)
    con.execute(
        "CREATE TABLE t AS SELECT i::DOUBLE AS a, (i % 2)::DOUBLE AS y FROM range(100) r(i)"
    )
    con.execute(TRAIN % 2)
    con.execute("DROP TABLE loom.model_versions")
    con.execute("ALTER TABLE loom.models DROP COLUMN version")  # as 0.2.0 wrote it
    con.close()
    con = loomdb.connect(path)
    assert con.execute("SELECT version, current FROM loom_model_versions('m')").fetchall() == [
        (1, True)
    ]
    before = con.execute("SELECT loom_predict_proba('m', [a]) FROM t ORDER BY a").fetchall()
    con.execute(TRAIN % 3)
    listed = con.execute("SELECT version, current, epochs FROM loom_model_versions('m')")
    assert listed.fetchall() == [(1, False, 2), (2, True, 3)]
    rolled = json.loads(con.execute("SELECT loom_rollback('m')").fetchone()[0])
    assert rolled == {"model": "m", "version": 1, "previous": 2}
    after = con.execute("SELECT loom_predict_proba('m', [a]) FROM t ORDER BY a").fetchall()
    assert after == before
    con.close()


def test_an_older_duckdb_catalog_gains_the_trials_metric(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = loomdb.connect(path)
    con.execute(
        "CREATE TABLE t AS SELECT i::DOUBLE AS a, (i % 2)::DOUBLE AS y FROM range(100) r(i)"
    )
    tune = (
        "SELECT loom_tune('%s', 't', 'y', "
        '\'{"lr": [0.01, 0.1], "batch_size": 10, "progress": false%s}\')'
    )
    con.execute(tune % ("old", ""))
    con.execute("ALTER TABLE loom.trials DROP COLUMN metric")  # as loomdb wrote it before
    con.close()
    con = loomdb.connect(path)
    listed = con.execute("SELECT metric FROM loom_trials('old')").fetchall()
    assert listed == [("validation loss",)] * 2  # scored by the loss, the only metric then
    con.execute(tune % ("new", ', "metric": "accuracy"'))
    listed = con.execute("SELECT metric FROM loom_trials('new')").fetchall()
    assert listed == [("validation accuracy",)] * 2
    con.close()
