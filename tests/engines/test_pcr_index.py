"""Photos from a folder, laid out as Progressive Compressed Records, trained on and predicted
through SQL at every fidelity, on both engines: bytes read are exactly the prefix offsets.

The folder is a small copy of the shared ants-and-bees photos (4 per class, plus a GIF, a
truncated and a corrupt JPEG and a text file that must be skipped) and a few MNIST digits
rendered as JPEGs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from loomdb.codecs import array_json
from loomdb.store.catalog import storage_relation
from support.engines import readable_dir

pytestmark = pytest.mark.postgres
PER_CLASS = 4
RECORD = 3  # images per record: 8 photos make 3 records, the last one short


@pytest.fixture(scope="module")
def folder(request):
    from loomdb.datasets import shared_datasets

    data = shared_datasets()
    if data is None:
        request.getfixturevalue("datasets")  # skips locally, fails in CI
    root = readable_dir()
    for name in ("ants", "bees"):
        (root / name).mkdir()
        (root / name).chmod(0o755)
        for src in sorted((data / "hymenoptera_data" / "train" / name).glob("*.jpg"))[:PER_CLASS]:
            shutil.copy(src, root / name / src.name)
    shutil.copy(data / "hymenoptera_data" / "train" / "ants" / "imageNotFound.gif", root / "ants")
    whole = next(iter(sorted((root / "bees").glob("*.jpg")))).read_bytes()
    (root / "bees" / "cut.jpg").write_bytes(whole[: len(whole) // 2])  # truncated
    # junk before the EOI: Pillow decodes it without a word, jpegtran warns (corrupt data)
    (root / "bees" / "junk.jpg").write_bytes(whole[:-2] + bytes(8) + whole[-2:])
    (root / "bees" / "notes.txt").write_text("not an image")
    (root / "stray.jpg").write_bytes(whole)  # in no class folder
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def load(engine, folder, table="ph"):
    return json.loads(engine.scalar(f"SELECT loom_load('images', '{folder}', '{table}')"))


def create(engine, name="pi", table="ph", **options):
    opts = {"format": "pcr", "record_size": RECORD, "image_size": 16, "color": "gray", **options}
    return json.loads(
        engine.scalar(
            f"SELECT loom_create_index('{name}', '{table}', 'label', '{json.dumps(opts)}')"
        )
    )


def stats(engine, name="pi"):
    return json.loads(engine.scalar(f"SELECT stats FROM loom.indexes WHERE name = '{name}'"))


def train(engine, name, **options):
    opts = {"index": "pi", "epochs": 2, "cache_mb": 0, "tol": 0, "progress": False, **options}
    engine.scalar(f"SELECT loom_train('{name}', NULL, 'label', '{json.dumps(opts)}')")
    return json.loads(engine.scalar(f"SELECT history FROM loom.models WHERE name = '{name}'"))


def test_a_folder_loads_its_jpegs_and_counts_what_it_skips(engine, folder):
    done = load(engine, folder)
    assert done["rows"] == 2 * PER_CLASS and done["skipped"] == 5
    assert done["classes"] == {"ants": 0, "bees": 1}
    assert "Corrupt JPEG data" in done["skipped_files"]["bees/junk.jpg"]
    assert set(done["skipped_files"]) == {
        "ants/imageNotFound.gif",
        "bees/cut.jpg",
        "bees/junk.jpg",
        "bees/notes.txt",
        "stray.jpg",
    }
    rows = engine.rows("SELECT file, class_name, label, image FROM ph ORDER BY file")
    assert [(r[1], r[2]) for r in rows] == [("ants", 0)] * PER_CLASS + [("bees", 1)] * PER_CLASS
    for file, _, _, image in rows:
        assert bytes(image) == (folder / file).read_bytes()  # the file, unchanged


def test_load_options_that_cannot_be_honoured_are_refused(engine, folder, datasets):
    cases = [
        ("mnist-jpeg", datasets, "dg", {"first": 10000}, "'first' is 10000, but"),
        ("images", folder, "ph", {"label": "file"}, "two columns named 'file'"),
        ("images", folder, "ph", {"image": "Label"}, "'label' and 'Label': one name to DuckDB"),
        ("images", folder, "ph", {"classes": ["ants", "ants"]}, "list of distinct class names"),
    ]
    for kind, path, table, options, message in cases:
        sql = f"SELECT loom_load('{kind}', '{path}', '{table}', '{json.dumps(options)}')"
        with pytest.raises(engine.errors, match=message):
            engine.scalar(sql)
    made = (
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name IN ('dg', 'ph')"
    )
    assert engine.scalar(made) == 0  # nothing half-written


def test_every_record_has_10_groups_and_k_reads_exactly_offsets_k(engine, folder):
    load(engine, folder)
    info = create(engine)
    assert (info["format"], info["rows"], info["batches"]) == ("pcr", 2 * PER_CLASS, 3)
    s = stats(engine)
    assert s["groups"] == 10 and s["scans"] == {"10": 2 * PER_CLASS}
    assert sum(s["group_bytes"]) == info["bytes"]
    offsets = [sum(s["group_bytes"][: k + 1]) for k in range(11)]
    assert all(b > a for a, b in zip(offsets, offsets[1:]))  # strictly increasing
    table = storage_relation("pi")
    for k in (1, 2, 5, 10):
        stored = engine.scalar(f"SELECT sum(octet_length(payload)) FROM {table} WHERE part <= {k}")
        history = train(engine, f"k{k}", scans=k)
        assert [h["bytes_read"] for h in history] == [offsets[k]] * 2 == [int(stored)] * 2
        assert [h["precision"] for h in history] == [k, k]
    parts = engine.rows(f"SELECT batch, count(*) FROM {table} GROUP BY batch ORDER BY batch")
    assert [int(n) for _, n in parts] == [11, 11, 11]


def test_photos_train_and_predict_through_sql_at_every_k(engine, folder):
    load(engine, folder)
    create(engine)
    for k in range(1, 11):
        train(engine, f"m{k}", scans=k, epochs=3)
        predicted = engine.rows(
            f"SELECT label, loom_predict_image('m{k}', image, {k}), "
            f"loom_predict_image('m{k}', image) FROM ph"
        )
        assert {p for _, p, _ in predicted} <= {0.0, 1.0} and len(predicted) == 2 * PER_CLASS
        assert {p for _, _, p in predicted} <= {0.0, 1.0}
        at_k = json.loads(
            engine.scalar(f"SELECT loom_evaluate('m{k}', 'ph', '{{\"scans\": {k}}}')")
        )
        assert (at_k["rows"], at_k["skipped"], at_k["scans"]) == (2 * PER_CLASS, 0, k)
        hits = sum(1 for y, p, _ in predicted if y == p)
        assert at_k["accuracy"] == pytest.approx(hits / len(predicted))
        full = json.loads(engine.scalar(f"SELECT loom_evaluate('m{k}', 'ph')"))
        assert full["accuracy"] == pytest.approx(
            sum(1 for y, _, p in predicted if y == p) / len(predicted)
        )
    assert (
        train(engine, "m10b", scans=10)[0]["bytes_read"] == train(engine, "mall")[0]["bytes_read"]
    )


def test_a_scan_schedule_raises_k_like_a_learning_rate_drop(engine, folder):
    load(engine, folder)
    create(engine)
    s = stats(engine)
    history = train(engine, "sched", scans="adaptive", epochs=6)
    assert [h["precision"] for h in history] == [2, 2, 2, 2, 3, 3]
    assert [h["bytes_read"] for h in history] == [
        sum(s["group_bytes"][: h["precision"] + 1]) for h in history
    ]
    plateau = [h["precision"] for h in train(engine, "plat", scans="adaptive-plateau", epochs=12)]
    assert plateau == sorted(plateau) and max(plateau) <= 10


def test_fidelity_options_are_honoured_or_refused(engine, folder):
    load(engine, folder)
    create(engine)
    engine.load("nums", np.eye(4), np.array([0, 1, 0, 1.0]))
    engine.scalar("SELECT loom_create_index('nd', 'nums', 'y')")
    cases = [
        (
            "SELECT loom_train('e1', NULL, 'label', '{\"index\": \"pi\", \"scans\": 11}')",
            "'scans' is 11, but index 'pi' holds 10",
        ),
        (
            "SELECT loom_train('e2', NULL, 'label', '{\"index\": \"pi\", \"precision\": 4}')",
            "'precision' applies to any-precision indexes",
        ),
        (
            "SELECT loom_train('e3', NULL, 'y', '{\"index\": \"nd\", \"scans\": 2}')",
            "'scans' applies to progressive image indexes",
        ),
        (
            "SELECT loom_create_index('e4', 'nums', 'y', '{\"format\": \"pcr\"}')",
            "0 bytea/BLOB columns",
        ),
        (
            "SELECT loom_create_index('e5', 'ph', 'label', "
            '\'{"format": "pcr", "dtype": "float32"}\')',
            "'dtype' does not apply",
        ),
        (
            "SELECT loom_train('e6', 'ph', 'label', "
            '\'{"format": "pcr", "preprocess": {"image": {"impute": 0}}}\')',
            "'preprocess' encodes or fills named feature columns; a pcr layout",
        ),
        (
            "SELECT loom_train('e7', 'ph', 'label', "
            '\'{"format": "pcr", "sparse": {"width": 3}}\')',
            "'sparse' reads a sparse source's array columns; a pcr layout",
        ),
        (
            "SELECT loom_create_index('e8', 'ph', 'label', "
            '\'{"format": "pcr", "sparse": {}}\')',
            "'sparse' reads a sparse source's array columns; a pcr layout",
        ),
    ]
    for sql, message in cases:
        with pytest.raises(engine.errors, match=message):
            engine.scalar(sql)
    train(engine, "ok", scans=2)
    train(engine, "same", image_size=16, color="gray", record_size=RECORD)  # as it was built
    with pytest.raises(engine.errors, match="index 'pi' was built with image_size = 16"):
        train(engine, "other", image_size=8)
    engine.scalar("SELECT loom_train('num', 'nums', 'y', '{\"progress\": false}')")
    with pytest.raises(engine.errors, match="was not trained on images"):
        engine.scalar("SELECT loom_predict_image('num', image) FROM ph LIMIT 1")
    engine.scalar("SELECT loom_deploy('num')")  # a deployed model cannot become an image model
    cannot = "deployed as .*predict_num, a function the logistic model it would become cannot be"
    with pytest.raises(engine.errors, match=cannot):
        train(engine, "num", replace=True)
    assert engine.scalar("SELECT loom_predict('num', ARRAY[1.0, 0, 0, 0])") in (0, 1)
    with pytest.raises(engine.errors, match="scans must be a whole number"):
        engine.scalar("SELECT loom_predict_image('ok', image, 0) FROM ph LIMIT 1")
    broken = engine.scalar(
        "SELECT loom_predict_image('ok', CAST('not a jpeg' AS "
        + ("BLOB" if engine.name == "duckdb" else "bytea")
        + "), 2)"
    )
    assert broken is None  # an unreadable image predicts NULL, like a NaN feature
    engine.rows("CREATE TABLE ph_text AS SELECT label, file AS image FROM ph")
    with pytest.raises(engine.errors, match="column 'image' of ph_text is text, not bytea/BLOB"):
        engine.scalar("SELECT loom_evaluate('ok', 'ph_text')")


def test_a_corrupt_jpeg_predicts_null_with_or_without_scans(engine, folder):
    """Junk before the EOI: Pillow decodes it without a word, jpegtran warns (what the loader
    and a pcr index refuse).  Read at k scans it was NULL, read whole a class: NULL both ways,
    and loom_evaluate skips it both ways."""
    load(engine, folder)
    create(engine)
    train(engine, "ok", scans=2)
    whole = folder / "bees" / sorted(p.name for p in (folder / "bees").glob("*.jpg"))[0]
    junk = whole.read_bytes()
    junk = (junk[:-2] + bytes(8) + junk[-2:]).hex()
    cast = f"unhex('{junk}')" if engine.name == "duckdb" else f"decode('{junk}', 'hex')"
    engine.rows(f"CREATE TABLE junk AS SELECT 1 AS label, {cast} AS image")
    got = engine.rows(
        "SELECT loom_predict_image('ok', image), loom_predict_image('ok', image, 2) FROM junk"
    )
    assert got == [(None, None)]
    for options in ("{}", '{"scans": 2}'):
        done = json.loads(engine.scalar(f"SELECT loom_evaluate('ok', 'junk', '{options}')"))
        assert done["rows"] == 0 and done["skipped"] == 1
    good = engine.rows("SELECT loom_predict_image('ok', image) FROM ph")
    assert all(v in (0, 1) for (v,) in good)  # whole images still predict


def test_evaluating_an_index_of_another_image_size_says_so(engine, folder):
    load(engine, folder)
    create(engine)  # 16 × 16 gray
    train(engine, "ok", scans=2)
    create(engine, name="pi8", image_size=8, color="rgb")
    with pytest.raises(engine.errors) as info:
        engine.scalar("SELECT loom_evaluate_index('ok', 'pi8')")
    said = str(info.value)
    assert (
        "index 'pi8' lays its images out at 8 × 8 rgb; model 'ok' learnt from 16 × 16 gray" in said
    )
    assert "image_size = 16, color = 'gray'" in said + hint_of(info.value)
    engine.load("nums", np.eye(4), np.array([0, 1, 0, 1.0]), label="label")
    engine.scalar("SELECT loom_train('num', 'nums', 'label', '{\"progress\": false}')")
    with pytest.raises(engine.errors, match="index 'pi8' holds images .* learnt from feature"):
        engine.scalar("SELECT loom_evaluate_index('num', 'pi8')")


def hint_of(error: BaseException) -> str:
    diag = getattr(error, "diag", None)
    return (getattr(diag, "message_hint", None) or "") if diag is not None else ""


def test_an_unreadable_image_in_the_table_stops_the_layout_with_a_hint(engine, folder):
    load(engine, folder)
    blob = "BLOB" if engine.name == "duckdb" else "bytea"
    engine.rows(f"INSERT INTO ph VALUES ('x', 'ants', 0, CAST('garbage' AS {blob}))")
    with pytest.raises(engine.errors, match="cannot be laid out as pcr"):
        create(engine)
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0


def test_a_train_without_an_index_lays_the_images_out_for_itself(engine, folder):
    load(engine, folder)
    opts = {"format": "pcr", "scans": 3, "epochs": 2, "image_size": 8, "progress": False}
    summary = json.loads(
        engine.scalar(f"SELECT loom_train('scratch', 'ph', 'label', '{json.dumps(opts)}')")
    )
    assert summary["format"] == "pcr" and summary["features"] == 8 * 8 * 3
    assert engine.scalar("SELECT loom_predict_image('scratch', image, 3) FROM ph LIMIT 1") in (0, 1)


def test_gray_digits_and_colour_photos_pad_to_one_number_of_groups(engine, folder, datasets):
    engine.scalar(f"SELECT loom_load('mnist-jpeg', '{datasets}', 'dg', '{{\"limit\": 6}}')")
    load(engine, folder)
    engine.rows("INSERT INTO dg SELECT file, class_name, label, image FROM ph")
    info = create(engine, table="dg", record_size=1)
    s = stats(engine)
    assert s["groups"] == 10 and s["scans"] == {"6": 6, "10": 2 * PER_CLASS}
    table = storage_relation("pi")
    counts = engine.rows(f"SELECT count(*) FROM {table} GROUP BY batch")
    assert {int(n) for (n,) in counts} == {11} and len(counts) == info["batches"] == 14
    empty = engine.scalar(f"SELECT count(*) FROM {table} WHERE octet_length(payload) = 0")
    assert empty == 6 * 4  # each digit's groups 7 … 10
    assert train(engine, "mix", scans=10)[0]["bytes_read"] == info["bytes"]


def test_the_cli_loads_a_folder_read_here(pg_dsn, folder, tmp_path):
    for where in (["--duckdb", str(tmp_path / "i.duckdb")], ["--dsn", pg_dsn]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loomdb.cli.main",
                "load",
                "images",
                str(folder),
                "cli_ph",
                *where,
                "--options",
                '{"replace": true}',
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["rows"] == 2 * PER_CLASS and summary["skipped"] == 5


def test_reindex_staleness_and_evaluation_on_the_stored_records(engine, folder):
    load(engine, folder)
    create(engine)
    train(engine, "st", scans=10)
    stored = json.loads(engine.scalar("SELECT loom_evaluate_index('st', 'pi')"))
    direct = json.loads(engine.scalar("SELECT loom_evaluate('st', 'ph')"))
    assert stored["rows"] == direct["rows"] == 2 * PER_CLASS
    assert stored["accuracy"] == pytest.approx(direct["accuracy"])  # lossless: same pixels
    with pytest.raises(engine.errors, match="learnt from images"):
        engine.scalar("SELECT loom_predict_sql('st')")
    engine.rows("DELETE FROM ph WHERE file = (SELECT min(file) FROM ph)")
    with pytest.raises(engine.errors, match="older than the last change"):
        train(engine, "st2", scans=2)
    rebuilt = json.loads(engine.scalar("SELECT loom_reindex('pi')"))
    assert rebuilt["rows"] == 2 * PER_CLASS - 1 and rebuilt["batch_size"] == RECORD
    assert train(engine, "st3", scans=2)[0]["rows"] == 2 * PER_CLASS - 1


def test_create_index_using_pcr_through_the_front_end(folder):
    from support.engines import DuckEngine

    engine = DuckEngine()
    try:
        load(engine, folder)
        engine.rows(
            "CREATE INDEX fe ON ph USING pcr (image) WITH (label = label, record_size = 5, "
            "color = 'gray', image_size = 8)"
        )
        row = engine.rows("SELECT format, batches, options FROM loom.indexes WHERE name = 'fe'")
        assert row[0][:2] == ("pcr", 2) and json.loads(row[0][2])["record_size"] == 5
    finally:
        engine.close()


def test_a_distributed_train_on_the_records_is_the_trainers_adam(engine, folder):
    """``cluster``: the workers decode the records into pixels and the model has a row per
    pixel (not per stored column); uncompressed, one minibatch a step, it is plain Adam."""
    load(engine, folder)
    create(engine)

    def fitted(name, **options):
        opts = {"index": "pi", "epochs": 3, "tol": 0, "progress": False, "scans": 4, **options}
        engine.scalar(f"SELECT loom_train('{name}', NULL, 'label', '{json.dumps(opts)}')")
        raw = engine.scalar(f"SELECT coefficients FROM loom.models WHERE name = '{name}'")
        return np.asarray(json.loads(raw, object_hook=array_json.hook))

    plain = fitted("plain", optimizer="adam")
    dist = fitted("dist", cluster="inprocess", compress="none", step_batches=1)
    assert dist.shape == plain.shape == (16 * 16, 1)
    assert np.allclose(dist, plain, rtol=1e-9, atol=1e-12)


def test_a_parallel_train_on_the_records_runs_in_threads_on_both_engines(engine, folder):
    """The records read with their index's settings (image size, colour, scans), which
    PostgreSQL's parallel workers are not given: on both engines the shards run in threads of
    the process that reads them, whether the epoch is kept (cache_mb) or read again."""
    load(engine, folder)
    create(engine)
    for cache in (0, 256):
        first = train(engine, "par", parallel=2, cache_mb=cache, replace=True)
        W = engine.scalar("SELECT coefficients FROM loom.models WHERE name = 'par'")
        again = train(engine, "par", parallel=2, cache_mb=cache, replace=True)
        assert engine.scalar("SELECT coefficients FROM loom.models WHERE name = 'par'") == W
        assert [e["loss"] for e in again] == [e["loss"] for e in first]
        assert all(e["shards"] == 2 and e["shards_in"] == "threads" for e in first)
