"""The same SQL on both engines: every function called with only its required arguments.

Each call is derived from the UDF catalogue (arguments with a default are left out), so a new
function is covered the day it is declared; a table function is called in FROM.  DuckDB binds
defaults through macros; a Binder Error here means an omitted-default call does not work there.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import loomdb
from loomdb.udfs import load
from support.engines import readable_dir

pytestmark = pytest.mark.postgres

VALUES = {
    "model": "'m'",
    "source": "'t'",
    "label": "'y'",
    "features": "ARRAY[1.0, 2.0]",
    "feature_indices": "ARRAY[0, 1]",
    "feature_values": "ARRAY[1.0, 2.0]",
    "index": "'i'",
    "role": "'public'",
    "kind": "'libsvm'",
    "target": "'loaded'",
    "image": "(SELECT image FROM imgs LIMIT 1)",
    "input": "(SELECT t FROM t LIMIT 1)",
}
NAMES = {  # (function, argument) whose value is not the shared one
    ("loom_create_index", "name"): "'i2'",
    ("loom_drop_index", "name"): "'i2'",
    ("loom_reindex", "name"): "'i'",
    ("loom_train", "model"): "'m2'",
    ("loom_tune", "model"): "'m3'",
    ("loom_trials", "model"): "'m3'",  # declared after loom_tune, which makes m3's trials
    ("loom_predict_image", "model"): "'mi'",
}
LAST = ("loom_drop_model", "loom_drop_index")  # after the calls that need what they drop
NO_ROLES = {"loom_grant", "loom_revoke"}  # DuckDB has no roles: refused, with the reason


def shortest_call(udf) -> str:
    args = []
    for arg in udf.args:
        if arg.default is not None:
            break
        args.append(NAMES.get((udf.name, arg.name)) or VALUES[arg.name])
    call = f"{udf.name}({', '.join(args)})"
    return f"SELECT * FROM {call}" if udf.table else f"SELECT {call}"  # rows: in FROM


def image_folder():
    """Two classes of two small JPEGs each, readable by the database's process."""
    folder = readable_dir()
    for c, name in enumerate(("a", "b")):
        (folder / name).mkdir(mode=0o755)
        for i in range(2):
            pixels = np.full((8, 8, 3), 60 * (2 * c + i), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{i}.jpg", "JPEG")
            (folder / name / f"{i}.jpg").chmod(0o644)
    return folder


def test_every_function_runs_with_only_its_required_arguments(engine):
    svm = readable_dir() / "one.svm"
    svm.write_text("+1 1:1\n-1 2:1\n")
    svm.chmod(0o644)
    VALUES["path"] = f"'{svm}'"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 2))  # loom_tune holds out 0.2 of the 256-row batches
    engine.load("t", X, (X[:, 0] > 0).astype(float))
    engine.rows("SELECT loom_train('m', 't', 'y', '{\"epochs\": 1}')")
    engine.rows("SELECT loom_create_index('i', 't', 'y', '{\"format\": \"mlweaving\"}')")
    photos = image_folder()
    engine.rows(f"SELECT loom_load('images', '{photos}', 'imgs')")
    engine.rows("SELECT loom_train('mi', 'imgs', 'label', '{\"format\": \"pcr\", \"epochs\": 1}')")
    udfs = sorted(load(), key=lambda u: u.name in LAST)
    for udf in udfs:
        sql = shortest_call(udf)
        if engine.name == "duckdb" and udf.name in NO_ROLES:
            with pytest.raises(loomdb.LoomStateError, match="DuckDB has none"):
                engine.rows(sql)
            continue
        assert engine.rows(sql), sql
