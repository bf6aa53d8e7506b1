"""Loaders: LIBSVM text into a table of sparse rows, from the CLI (read here) and from SQL
(read by the database's process), on both engines; unreadable lines skipped and counted."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from loomdb.loaders.libsvm import parse_line
from support.engines import readable_dir

pytestmark = pytest.mark.postgres

TEXT = """\
+1 1:0.5 3:2 10:1
-1 2:1.5
# a comment line
+1 4:x
-1 5:1 3:2
+1 0:1
+1 7:nan
-1 1:1 2:0 9:-3
"""


def test_a_line_is_parsed_or_refused():
    assert parse_line("+1 1:0.5 3:2", 1) == (1.0, [0, 2], [0.5, 2.0])
    assert parse_line("-1 1:1 2:0 9:-3", 1) == (-1.0, [0, 8], [1.0, -3.0])  # zeros dropped
    for bad in ("+1 4:x", "-1 5:1 3:2", "+1 0:1", "+1 7:nan", "+1 3", f"+1 {2**31 + 1}:1"):
        assert parse_line(bad, 1) is None, bad


def test_loom_load_reads_libsvm_on_both_engines(engine):
    path = readable_dir() / "small.svm"
    path.write_text(TEXT)
    path.chmod(0o644)
    summary = json.loads(engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'sv')"))
    assert summary["rows"] == 3 and summary["skipped"] == 4
    rows = engine.rows('SELECT label, indices, "values" FROM sv ORDER BY label, indices')
    assert [r[0] for r in rows] == [-1.0, -1.0, 1.0]
    assert list(rows[2][1]) == [0, 2, 9] and list(rows[2][2]) == [0.5, 2.0, 1.0]
    with pytest.raises(engine.errors, match="already exists"):
        engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'sv')")
    engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'sv', '{{\"replace\": true}}')")
    with pytest.raises(engine.errors, match="unknown loader 'csvv'"):
        engine.scalar(f"SELECT loom_load('csvv', '{path}', 'sv2')")


def test_a_file_that_cannot_be_read_is_refused_with_a_hint(engine):
    folder = readable_dir()
    cases = [  # (kind, path, what the error says, its hint)
        ("libsvm", "/nonexistent/x.svm", "there is no file /nonexistent/x.svm", "check the path"),
        ("libsvm", str(folder), f"{folder} is a folder, not a file", "give the file's path"),
        ("mnist-jpeg", str(folder), f"there is no file {folder}/", "check the path"),
    ]
    for kind, path, message, hint in cases:
        with pytest.raises(engine.errors) as e:
            engine.scalar(f"SELECT loom_load('{kind}', '{path}', 'unread')")
        said = str(e.value)
        assert f"{kind}: {message}" in said and hint in said and "[Errno" not in said
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'unread'"
    assert engine.scalar(tables) == 0  # nothing half-made


def test_the_cli_loads_a_file_read_here(pg_dsn, tmp_path):
    path = tmp_path / "cli.svm"
    path.write_text(TEXT)
    for where in (["--duckdb", str(tmp_path / "l.duckdb")], ["--dsn", pg_dsn]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loomdb.cli.main",
                "load",
                "libsvm",
                str(path),
                "cli_sv",
                *where,
                "--options",
                '{"replace": true}',
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["rows"] == 3


def test_a_table_that_exists_is_refused_with_a_hint(engine):
    engine.rows("DROP TABLE IF EXISTS taken")
    engine.scalar("SELECT loom_load('sample', 'iris', 'taken')")
    with pytest.raises(engine.errors) as e:
        engine.scalar("SELECT loom_load('sample', 'iris', 'taken')")
    assert "already exists" in str(e.value) and '{"replace": true}' in str(e.value)
    assert engine.scalar("SELECT count(*) FROM taken") == 150  # the first load's rows, kept
    engine.rows("DROP TABLE taken")


def test_the_cli_refuses_a_table_it_cannot_make_with_a_hint(pg_dsn, tmp_path):
    """A table that exists, a schema that does not: the database's message and what to do,
    no traceback (the PostgreSQL side's errors came through psycopg raw)."""
    path = tmp_path / "cli.svm"
    path.write_text(TEXT)
    load = [sys.executable, "-m", "loomdb.cli.main", "load", "libsvm", str(path)]
    for where in (["--duckdb", str(tmp_path / "l.duckdb")], ["--dsn", pg_dsn]):
        made = [*load, "cli_taken", *where, "--options", '{"replace": true}']
        assert subprocess.run(made, capture_output=True, timeout=120).returncode == 0
        for table, says in [("cli_taken", "already exists"), ("no_such.cli_taken", "no_such")]:
            done = subprocess.run(
                [*load, table, *where], capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
            assert says in done.stderr and '{"replace": true}' in done.stderr


@pytest.mark.parametrize("name", ["digits", "breast_cancer", "iris"])
def test_sample_datasets_equal_their_published_copies(engine, name):
    from sklearn import datasets

    from loomdb.loaders.sample import SAMPLES

    reference = getattr(datasets, f"load_{name}")()
    _, features, label, _ = SAMPLES[name]
    done = json.loads(engine.scalar(f"SELECT loom_load('sample', '{name}', 's_{name}')"))
    assert done["rows"] == len(reference.target) and done["skipped"] == 0
    cols = ", ".join(features)
    rows = engine.rows(f"SELECT {cols}, {label} FROM s_{name}")
    got = sorted(tuple(r) for r in rows)
    want = sorted((*x, t) for x, t in zip(reference.data.tolist(), reference.target.tolist()))
    assert got == want


def test_a_sample_needs_no_file_rights_and_unknown_ones_are_refused(engine):
    with pytest.raises(engine.errors, match="unknown sample dataset"):
        engine.scalar("SELECT loom_load('sample', '/etc/passwd', 'x')")


def test_a_label_column_name_is_quoted_and_never_collides(engine):
    """The label option names a column: any text is quoted (a double quote in it is doubled,
    never ends the identifier), and one naming another column of the table is refused up
    front with what to do, the same on both engines (DuckDB's names are case-insensitive)."""
    path = readable_dir() / "label.svm"
    path.write_text(TEXT)
    path.chmod(0o644)
    label = 'Ünï "Côde"'
    options = json.dumps({"label": label}).replace("'", "''")
    done = json.loads(engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'odd', '{options}')"))
    assert done["rows"] == 3
    column = '"' + label.replace('"', '""') + '"'
    assert sorted(r[0] for r in engine.rows(f"SELECT {column} FROM odd")) == [-1.0, -1.0, 1.0]
    engine.rows("DROP TABLE odd")
    for taken in ("indices", "Values"):
        with pytest.raises(engine.errors) as e:
            engine.scalar(
                f"SELECT loom_load('libsvm', '{path}', 'clash', '{{\"label\": \"{taken}\"}}')"
            )
        said = str(e.value)
        assert f"'{taken}'" in said and "a name of its own" in said, said
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'clash'"
    assert engine.scalar(tables) == 0


def test_a_null_path_or_kind_is_refused_with_a_hint(engine):
    for call, says in [
        ("loom_load('libsvm', NULL, 'nulled')", "the path is NULL"),
        ("loom_load(NULL, '/x.svm', 'nulled')", "the loader kind is NULL"),
        ("loom_load('sample', 'iris', NULL)", "the table name is NULL"),
    ]:
        with pytest.raises(engine.errors) as e:
            engine.scalar(f"SELECT {call}")
        assert says in str(e.value) and "TypeError" not in str(e.value), str(e.value)
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'nulled'"
    assert engine.scalar(tables) == 0


def test_a_load_never_writes_into_loomdb_s_own_schemas(engine):
    """loomdb's catalog (``loom``) and storage tables (``loom_data``) are no load's target:
    ``{"replace": true}`` on ``loom.models`` dropped the catalog's table of models on DuckDB.
    Named with the schema in any spelling, or by a current schema that is one of them, the
    load is refused and the catalog is left as it was, on both engines."""
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    engine.load("guarded", X, (X[:, 0] > X[:, 1]).astype(float), ["a", "b"])
    engine.scalar("""SELECT loom_train('kept', 'guarded', 'y', '{"epochs": 1}')""")
    replace = '{"replace": true}'
    targets = ["loom.models", 'LOOM."models"', '"loom".new_table', "loom_data.new_table"]
    for target in targets:
        with pytest.raises(engine.errors) as e:
            engine.scalar(f"SELECT loom_load('sample', 'iris', '{target}', '{replace}')")
        said = str(e.value)
        assert "loomdb's own schema" in said and "another schema" in said, said
    current = (
        "SET schema = 'loom'"
        if engine.name == "duckdb"
        else "SET search_path = loom, loomtest, public"
    )
    back = (
        "SET schema = 'main'" if engine.name == "duckdb" else "SET search_path = loomtest, public"
    )
    engine.rows(current)
    try:
        with pytest.raises(engine.errors, match="loomdb's own schema"):
            engine.scalar(f"SELECT loom_load('sample', 'iris', 'models', '{replace}')")
    finally:
        engine.rows(back)
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'kept'") == 1
    assert "coef" in engine.scalar("SELECT loom_model_info('kept')")
    made = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'new_table'"
    assert engine.scalar(made) == 0


def test_replacing_what_is_not_a_table_is_refused_with_a_hint(engine):
    """{"replace": true} replaces a table: a view of that name is the engine's error with
    what to do (DuckDB's came with no hint), and the view is left as it was."""
    engine.rows("CREATE VIEW seen AS SELECT 1 AS x")
    try:
        with pytest.raises(engine.errors) as e:
            engine.scalar("""SELECT loom_load('sample', 'iris', 'seen', '{"replace": true}')""")
        said = str(e.value)
        assert "seen" in said and "HINT" in said.upper() and "another name" in said, said
        assert engine.rows("SELECT x FROM seen") == [(1,)]
    finally:
        engine.rows("DROP VIEW seen")


def test_a_failed_cli_load_leaves_no_new_database_file(tmp_path, capsys):
    """The DuckDB file a load would have made is not left behind, empty, when the load fails;
    one that was there is kept with what it held."""
    from loomdb.cli.main import main

    fresh = tmp_path / "fresh.duckdb"
    missing = str(tmp_path / "nope.svm")
    assert main(["load", "libsvm", missing, "t", "--duckdb", str(fresh)]) == 1
    assert "there is no file" in capsys.readouterr().err
    assert not fresh.exists() and not (tmp_path / "fresh.duckdb.wal").exists()
    assert main(["load", "sample", "iris", "iris", "--duckdb", str(fresh)]) == 0
    assert main(["load", "libsvm", missing, "t", "--duckdb", str(fresh)]) == 1
    assert main(["sql", "--duckdb", str(fresh), "-q", "-c", "SELECT count(*) FROM iris"]) == 0
    assert "150" in capsys.readouterr().out


def test_a_libsvm_file_saved_with_a_byte_order_mark_keeps_its_first_line(engine):
    """A BOM before the first label made that line unreadable: skipped and counted."""
    path = readable_dir() / "bom.svm"
    path.write_bytes("\ufeff+1 1:0.5 3:2\r\n-1 2:1.5\r\n".encode())
    path.chmod(0o644)
    done = json.loads(engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'bom')"))
    assert done["rows"] == 2 and done["skipped"] == 0, done
    assert [r[0] for r in engine.rows("SELECT label FROM bom ORDER BY label")] == [-1.0, 1.0]
    engine.rows("DROP TABLE bom")


def _idx(array) -> bytes:
    head = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return head + array.astype(np.uint8).tobytes()


def test_broken_mnist_files_are_refused_with_a_hint(engine):
    """A truncated download, an images file that holds labels, files of different lengths:
    a LoomFormatError naming the file and what to do (a truncated gzip was a bare EOFError,
    a 1-D images file a numpy ValueError), and no table."""
    import gzip

    images, labels = np.zeros((5, 28, 28)), np.arange(5)
    whole = gzip.compress(_idx(images))
    cases = [  # (images file, labels file, what the error says)
        (whole[: len(whole) // 2], _idx(labels), "is cut short"),
        (gzip.compress(_idx(labels)), _idx(labels), "not 28 × 28 images"),
        (whole, _idx(np.arange(4)), "5 images but 4 labels"),
    ]
    for image_bytes, label_bytes, says in cases:
        folder = readable_dir()
        (folder / "t10k-images-idx3-ubyte.gz").write_bytes(image_bytes)
        (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(label_bytes))
        for f in folder.iterdir():
            f.chmod(0o644)
        with pytest.raises(engine.errors) as e:
            engine.scalar(f"SELECT loom_load('mnist-jpeg', '{folder}', 'broken_mnist')")
        said = str(e.value)
        assert says in said and "MNIST" in said and "EOFError" not in said, said
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'broken_mnist'"
    assert engine.scalar(tables) == 0


def test_an_image_file_that_is_no_regular_file_is_skipped_and_counted(engine):
    """A broken link (a photo moved away) was passed over without a word: it is skipped,
    counted and named like every other file that cannot be read."""
    from PIL import Image

    folder = readable_dir()
    (folder / "ants").mkdir()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(folder / "ants" / "red.jpg", "JPEG")
    (folder / "ants" / "moved.jpg").symlink_to(folder / "nowhere.jpg")
    for path in [folder / "ants", *folder.glob("ants/*")]:
        if path.exists():
            path.chmod(0o755 if path.is_dir() else 0o644)
    done = json.loads(engine.scalar(f"SELECT loom_load('images', '{folder}', 'linked')"))
    assert done["rows"] == 1 and done["skipped"] == 1, done
    assert "not a regular file" in done["skipped_files"]["ants/moved.jpg"], done
    engine.rows("DROP TABLE linked")


@pytest.mark.parametrize(
    ("kind", "pack"),
    [("gzip", "gzip"), ("bzip2", "bz2"), ("xz", "lzma")],
)
def test_a_compressed_libsvm_file_is_refused_with_a_hint(engine, kind, pack):
    """LIBSVM sets ship compressed (news20.binary.bz2): read as text, every line was garbage,
    skipped and counted, and the load made an empty table. It is refused up front, naming
    the compression, and no table is made."""
    import importlib

    path = readable_dir() / "packed.svm"
    path.write_bytes(importlib.import_module(pack).compress(TEXT.encode()))
    path.chmod(0o644)
    with pytest.raises(engine.errors) as e:
        engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'packed')")
    said = str(e.value)
    assert f"{kind}-compressed" in said and "decompress it" in said, said
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'packed'"
    assert engine.scalar(tables) == 0


def test_a_ranking_file_with_query_ids_is_refused(engine):
    """SVMlight ranking lines (``2 qid:1 1:0.5``) were each skipped as unreadable: the load
    made an empty table, counting every row as skipped."""
    path = readable_dir() / "rank.svm"
    path.write_text("# queries\n2 qid:1 1:0.5 3:1\n1 qid:1 2:1.5\n0 qid:2 1:1 # last\n")
    path.chmod(0o644)
    with pytest.raises(engine.errors) as e:
        engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'ranked')")
    said = str(e.value)
    assert f"line 2 of {path} holds a query id (qid:1)" in said and "remove the qid" in said
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'ranked'"
    assert engine.scalar(tables) == 0


def _feed(fifo, stop) -> None:
    """Write a LIBSVM line into ``fifo`` whenever a reader has it open, until ``stop`` is set
    (or a minute has passed): a load that waits on it ends instead of hanging the test."""
    import contextlib
    import errno
    import os
    import time

    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader now
                raise
            time.sleep(0.05)
            continue
        with contextlib.suppress(BrokenPipeError):  # the reader went away meanwhile
            os.write(fd, b"1 1:1\n")
        os.close(fd)
        time.sleep(0.05)


def test_a_device_or_a_fifo_is_refused_rather_than_read_for_ever(engine):
    """``loom_load('libsvm', '/dev/zero', …)`` read for ever (memory growing: no line ends),
    and a FIFO blocked the load until some process wrote to it."""
    import os
    import threading

    fifo = readable_dir() / "lines.fifo"
    os.mkfifo(fifo, 0o644)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(fifo, stop), daemon=True)
    feeder.start()
    try:
        for path in (fifo, "/dev/zero"):
            with pytest.raises(engine.errors) as e:
                engine.scalar(f"SELECT loom_load('libsvm', '{path}', 'endless')")
            said = str(e.value)
            assert f"libsvm: {path} is not a regular file" in said and "copy the data" in said
    finally:
        stop.set()
        feeder.join()
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'endless'"
    assert engine.scalar(tables) == 0
