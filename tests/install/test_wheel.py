"""A wheel of this checkout, installed into a fresh virtual environment, trains and predicts.

What users get from ``pip install loomdb`` (here: a wheel built from the files of a clean
clone): the UDF catalogue and the extension's SQL ship inside it, and DuckDB works from it.
The README's ``loomdb pg install`` from the same environment is what provisions the session's
PostgreSQL server (tests/support/pgserver.py).
"""

from __future__ import annotations

import json
import subprocess
import zipfile

SCRIPT = """
import json, loomdb
con = loomdb.connect(progress=False)
con.execute("CREATE TABLE t AS SELECT i::DOUBLE AS x, (i % 7)::DOUBLE AS z, "
            "CASE WHEN i % 7 > 3 THEN 1.0 ELSE 0.0 END AS y FROM range(500) r(i)")
summary = json.loads(con.execute("SELECT loom_train('m', 't', 'y')").fetchall()[0][0])
[(label,)] = con.execute("SELECT loom_predict('m', [3.0, 6.0])").fetchall()
metrics = json.loads(con.execute("SELECT loom_evaluate('m', 't')").fetchall()[0][0])
print(json.dumps({"file": loomdb.__file__, "summary": summary, "label": label,
                  "accuracy": metrics["accuracy"]}))
"""


def test_the_wheel_holds_what_loomdb_reads_at_run_time(wheel_python):
    wheel = next((wheel_python.parents[2] / "dist").glob("loomdb-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "loomdb/udfs/catalogue.toml" in names
    assert "loomdb/engines/postgres/security.sql" in names
    assert "loomdb/loaders/samples/digits.csv.gz" in names


def test_duckdb_trains_and_predicts_from_the_wheel(wheel_python, tmp_path):
    done = subprocess.run(
        [str(wheel_python), "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "site-packages" in out["file"]  # the wheel's copy, not this checkout
    assert out["summary"]["rows"] == 500 and out["label"] == 1.0 and out["accuracy"] > 0.9
