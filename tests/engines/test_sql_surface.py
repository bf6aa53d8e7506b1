"""The SQL surface end to end, the same statements on DuckDB and PostgreSQL."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

pytestmark = pytest.mark.postgres


def hint_of(engine, sql: str) -> tuple[str, str]:
    """The message and hint of the error ``sql`` raises (PostgreSQL's HINT field)."""
    with pytest.raises(engine.errors) as info:
        engine.rows(sql)
    diag = getattr(info.value, "diag", None)
    hint = diag.message_hint if diag is not None else getattr(info.value, "hint", None)
    return str(info.value), hint or ""


@pytest.fixture
def cancer(engine):
    d = load_breast_cancer()
    cols = engine.load("cancer", d.data, d.target.astype(float))
    return engine, cols, d


def test_train_predict_evaluate(cancer):
    engine, cols, d = cancer
    summary = json.loads(
        engine.scalar("SELECT loom_train('bc', 'cancer', 'y', '{\"epochs\": 15, \"seed\": 3}')")
    )
    assert summary["rows"] == 569 and summary["format"] == "dense"
    assert summary["classes"] == [0.0, 1.0]
    metrics = json.loads(engine.scalar("SELECT loom_evaluate('bc', 'cancer')"))
    assert metrics["accuracy"] > 0.95 and metrics["roc_auc"] > 0.98
    arr = engine.array(cols)
    acc = engine.scalar(
        f"SELECT avg(CASE WHEN loom_predict('bc', {arr}) = y THEN 1.0 ELSE 0.0 END) FROM cancer"
    )
    assert abs(float(acc) - metrics["accuracy"]) < 1e-12
    # usable in WHERE
    n_pos = engine.scalar(f"SELECT count(*) FROM cancer WHERE loom_predict('bc', {arr}) = 1")
    assert 300 < n_pos < 420
    # the catalog row
    row = engine.rows(
        "SELECT kind, storage_format, backend, rows_processed, rows_skipped FROM loom.models"
    )
    assert row == [("logistic", "dense", "cpu", 569, 0)]
    info = json.loads(engine.scalar("SELECT loom_model_info('bc')"))
    assert len(info["history"]) == 15 and info["feature_names"] == cols
    assert info["history"][-1]["loss"] < info["history"][0]["loss"]
    # the scratch layout is gone
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0


def test_compiled_expression_matches_udf(cancer):
    engine, cols, _ = cancer
    engine.scalar("SELECT loom_train('bc', 'cancer', 'y', '{\"epochs\": 5}')")
    arr = engine.array(cols)
    for udf, compiled in (
        ("loom_predict", "loom_predict_sql"),
        ("loom_predict_proba", "loom_predict_proba_sql"),
    ):
        expr = engine.scalar(f"SELECT {compiled}('bc')")
        diff = engine.scalar(f"SELECT max(abs({expr} - {udf}('bc', {arr}))) FROM cancer")
        assert float(diff) <= 1e-9


def test_multiclass_one_vs_rest_compiles(engine):
    from sklearn.datasets import load_iris

    d = load_iris()
    cols = engine.load("iris", d.data, d.target.astype(float))
    engine.scalar(
        "SELECT loom_train('ir', 'iris', 'y', '{\"epochs\": 100, \"batch_size\": 8, "
        '"lr": 0.5, "lr_schedule": "constant"}\')'
    )
    arr = engine.array(cols)
    acc = float(
        engine.scalar(
            f"SELECT avg(CASE WHEN loom_predict('ir', {arr}) = y THEN 1.0 ELSE 0.0 END) FROM iris"
        )
    )
    assert acc > 0.9
    expr = engine.scalar("SELECT loom_predict_sql('ir')")
    same = engine.scalar(f"SELECT count(*) FROM iris WHERE {expr} = loom_predict('ir', {arr})")
    assert same == 150


def test_linear_regression_and_select_source(engine):
    d = load_diabetes()
    engine.load("diab", d.data, d.target)
    engine.scalar(
        "SELECT loom_train('dia', 'SELECT * FROM diab WHERE y > 0', 'y', '{\"model\": \"linear\"}')"
    )
    m = json.loads(engine.scalar("SELECT loom_evaluate('dia', 'diab')"))
    assert set(m) >= {"mse", "mae", "r2"} and m["r2"] > 0.45


def test_drop_model(cancer):
    engine, _, _ = cancer
    engine.scalar("SELECT loom_train('bc', 'cancer', 'y', '{\"epochs\": 1}')")
    engine.scalar("SELECT loom_drop_model('bc')")
    assert engine.scalar("SELECT count(*) FROM loom.models") == 0


def test_explicit_dense_index(cancer):
    engine, cols, _ = cancer
    info = json.loads(
        engine.scalar("SELECT loom_create_index('bc_idx', 'cancer', 'y', '{\"batch_size\": 50}')")
    )
    assert info["batches"] == 12 and info["rows"] == 569
    engine.scalar("SELECT loom_train('bc', NULL, 'y', '{\"index\": \"bc_idx\", \"epochs\": 3}')")
    assert engine.scalar("SELECT storage_format FROM loom.models") == "dense"
    engine.scalar("SELECT loom_drop_index('bc_idx')")
    assert engine.scalar("SELECT count(*) FROM loom.indexes") == 0


def test_postgres_reports_progress_notices(pg_dsn):
    from conftest import PgEngine

    engine = PgEngine(pg_dsn)
    engine.load("tiny", np.arange(20.0).reshape(10, 2), np.arange(10.0) % 2)
    engine.scalar(
        "SELECT loom_train('t', 'tiny', 'y', '{\"epochs\": 3, \"batch_size\": 4, \"tol\": 0}')"
    )
    epochs = [n for n in engine.notices if "epoch" in n]
    assert len(epochs) == 3 and "rows/s" in epochs[0] and "loss" in epochs[0]
    engine.close()


def test_postgres_says_when_a_trains_rows_exceed_the_cache(pg_dsn):
    from conftest import PgEngine

    engine = PgEngine(pg_dsn)
    engine.load("tiny", np.arange(20.0).reshape(10, 2), np.arange(10.0) % 2)
    engine.scalar("SELECT loom_train('t', 'tiny', 'y', '{\"epochs\": 1, \"cache_mb\": 0}')")
    said = [n for n in engine.notices if "cache_mb" in n]
    assert said == [
        "loom_train t: the rows take 0.00024 MB, more than cache_mb (0): they go to a temporary "
        'table that every epoch reads back; "cache_mb": 1 or more keeps them in memory'
    ]
    engine.scalar("SELECT loom_train('d', 'tiny', 'y', '{\"epochs\": 1}')")
    used = json.loads(engine.scalar("SELECT options::text FROM loom.models WHERE name = 'd'"))
    assert used["cache_mb"] == 256  # a backend's default, whatever the machine's memory
    engine.close()


def test_wide_table_profiles_in_several_queries(engine):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 450))
    y = (X[:, 0] > 0).astype(float)
    engine.load("wide", X, y)
    summary = json.loads(engine.scalar("SELECT loom_train('w', 'wide', 'y', '{\"epochs\": 2}')"))
    assert summary["features"] == 450
    stats = json.loads(engine.scalar("SELECT standardization FROM loom.models"))
    assert np.allclose(stats["shift"], X.mean(axis=0))


def test_column_statistics_are_settled_whatever_order_the_engine_summed_in(engine):
    """A constant column's mean is its value exactly (a sum of 3,000 copies of 0.1 is not);
    another column's mean lies on the grid store/settle.py rounds it to."""
    from loomdb.store.settle import BITS

    rng = np.random.default_rng(1)
    X = np.column_stack([np.full(3000, 0.1), rng.normal(5.0, 3.0, 3000)])
    engine.load("settle", X, (X[:, 1] > 5).astype(float))
    engine.scalar("SELECT loom_train('st', 'settle', 'y', '{\"epochs\": 1}')")
    shift = json.loads(engine.scalar("SELECT standardization FROM loom.models"))["shift"]
    assert shift[0] == 0.1
    grid = 2.0 ** (np.frexp(X[:, 1].std())[1] - BITS - 1)
    assert (shift[1] / grid).is_integer() and abs(shift[1] - X[:, 1].mean()) < 1e-6


def test_a_layout_read_back_from_its_temporary_table_trains_the_same_model(cancer):
    """``cache_mb`` 0 puts the train's layout in a temporary table (its rows unchecked: only
    this call writes them) that every epoch reads back; the model is the one a layout kept in
    memory gives, to the last bit."""
    engine, _, _ = cancer
    coefficients = {}
    for name, cache in (("kept", 256), ("table", 0)):
        options = json.dumps({"epochs": 3, "tol": 0, "cache_mb": cache})
        engine.scalar(f"SELECT loom_train('{name}', 'cancer', 'y', '{options}')")
        stored = engine.scalar(
            f"SELECT CAST(coefficients AS TEXT) FROM loom.models WHERE name = '{name}'"
        )
        coefficients[name] = json.loads(stored)
    assert coefficients["kept"] == coefficients["table"]


def test_stale_index_is_refused_until_reindexed(cancer):
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('ix', 'cancer', 'y', '{}')")
    train = "SELECT loom_train('{}', NULL, 'y', '{{\"index\": \"ix\", \"epochs\": 1{}}}')"
    engine.scalar(train.format("a", ""))
    engine.rows("UPDATE cancer SET x0 = x0 + 1 WHERE y = 0")
    with pytest.raises(engine.errors) as e:
        engine.scalar(train.format("b", ""))
    assert "older than the last change" in str(e.value) and "loom_reindex" in str(e.value)
    engine.scalar(train.format("b", ', "allow_stale": true'))
    engine.scalar("SELECT loom_reindex('ix')")
    engine.scalar(train.format("c", ""))
    assert engine.scalar("SELECT count(*) FROM loom.models") == 3


def test_an_index_whose_source_lost_a_column_is_stale(cancer):
    engine, _, _ = cancer
    engine.scalar(
        "SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"x0\", \"x1\"]}')"
    )
    engine.rows("ALTER TABLE cancer DROP COLUMN x1")
    train = "SELECT loom_train('{}', NULL, 'y', '{{\"index\": \"ix\", \"epochs\": 1{}}}')"
    with pytest.raises(engine.errors) as e:
        engine.scalar(train.format("a", ""))
    message = str(e.value)
    assert "index 'ix' is older than the last change" in message
    assert "'x1' are no longer there" in message and "allow_stale" in message
    assert "Binder" not in message and "does not exist" not in message
    engine.scalar(train.format("a", ', "allow_stale": true'))  # as it is: both columns
    info = json.loads(engine.scalar("SELECT loom_model_info('a')"))
    assert info["feature_names"] == ["x0", "x1"]


def test_a_column_renamed_to_another_case_is_renamed_where_the_engine_says_so(cancer):
    """DuckDB's column names ignore case, PostgreSQL's quoted ones do not: there a column
    renamed from "Mixed" to "mixed" is gone as surely as one renamed to "other", and a
    rebuild, which lays out the columns the index was built on, is refused, not laid out on
    the column of the other case."""
    engine, _, _ = cancer
    engine.rows('ALTER TABLE cancer ADD COLUMN "Mixed" DOUBLE PRECISION')
    engine.rows('UPDATE cancer SET "Mixed" = x0')
    engine.scalar(
        "SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"Mixed\", \"x1\"]}')"
    )
    engine.rows('ALTER TABLE cancer RENAME COLUMN "Mixed" TO "mixed"')
    train = "SELECT loom_train('m', NULL, 'y', '{\"index\": \"ix\", \"epochs\": 1}')"
    if engine.name == "duckdb":  # the same column by DuckDB's rules: fresh
        assert json.loads(engine.scalar(train))["rows"] == 569
        return
    with pytest.raises(engine.errors) as e:
        engine.scalar(train)
    message = str(e.value)
    assert "index 'ix' is older than the last change" in message
    assert "'Mixed' are no longer there" in message and "does not exist" not in message
    before = engine.rows("SELECT columns, uid FROM loom.indexes")
    with pytest.raises(engine.errors) as e:
        engine.scalar("SELECT loom_reindex('ix')")
    message = str(e.value)
    assert "'Mixed'" in message and "loom_create_index" in message
    assert engine.rows("SELECT columns, uid FROM loom.indexes") == before


def test_a_column_of_another_case_is_another_column_on_postgres(cancer):
    """PostgreSQL: "X" and "x" are two columns.  An index on "X" was refused as retyped
    when "x" was text, and once "X" was dropped a train failed on the engine's "column does
    not exist" and a rebuild laid the index out on "x"."""
    engine, _, _ = cancer
    if engine.name == "duckdb":
        pytest.skip("DuckDB's column names ignore case: a table cannot hold both")
    engine.rows('ALTER TABLE cancer ADD COLUMN "X" DOUBLE PRECISION, ADD COLUMN "x" TEXT')
    engine.rows("UPDATE cancer SET \"X\" = x0, \"x\" = CASE WHEN x1 > 18 THEN 'a' ELSE 'b' END")
    engine.scalar("SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"X\"]}')")
    train = "SELECT loom_train('m', NULL, 'y', '{\"index\": \"ix\", \"epochs\": 1}')"
    assert json.loads(engine.scalar(train))["features"] == 1  # fresh: "X" did not change
    engine.rows('ALTER TABLE cancer DROP COLUMN "X"')
    with pytest.raises(engine.errors, match=r"'X' are no longer there[\s\S]*allow_stale"):
        engine.scalar("SELECT loom_train('m2', NULL, 'y', '{\"index\": \"ix\"}')")
    with pytest.raises(engine.errors, match="'X'"):
        engine.scalar("SELECT loom_reindex('ix')")
    assert engine.scalar("SELECT columns FROM loom.indexes") == '["X"]'


def test_a_train_naming_another_label_than_its_index_is_refused_by_the_engines_rules(cancer):
    """The label a train names is compared with its index's as the source's columns are
    named: on PostgreSQL 'Y', where the table has a "Y" besides y, is "Y", and a train on an
    index of y trained on y without a word (the same call without the index learnt "Y").
    Where the table has no "Y", 'Y' is y on both engines, as for a source."""
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"x0\"]}')")
    train = "SELECT loom_train('m', NULL, 'Y', '{\"index\": \"ix\", \"epochs\": 1}')"
    assert json.loads(engine.scalar(train))["rows"] == 569  # 'Y' names y
    if engine.name == "duckdb":
        return  # a DuckDB table cannot hold both
    engine.rows('ALTER TABLE cancer ADD COLUMN "Y" DOUBLE PRECISION')
    engine.rows('UPDATE cancer SET "Y" = 1 - y')
    engine.scalar("SELECT loom_reindex('ix')")
    with pytest.raises(engine.errors, match="index 'ix' has label 'y', not 'Y'"):
        engine.scalar(train.replace("'m'", "'m2'"))
    assert engine.scalar("SELECT count(*) FROM loom.models WHERE name = 'm2'") == 0


def test_a_train_on_an_index_names_its_features_as_a_train_on_its_source_does(cancer):
    """'features' ["X0", "X1"] name x0 and x1 in a train on the table (DuckDB's names
    ignore case; PostgreSQL's resolve to the one column of another case), but a train on an
    index of x0 and x1 was refused as asking for other features, its hint saying to
    rebuild the index, which keeps its options."""
    engine, _, _ = cancer
    engine.scalar(
        "SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"x0\", \"x1\"]}')"
    )
    train = "SELECT loom_train('{}', {}, 'y', '{{\"epochs\": 1, \"features\": {}{}}}')"
    upper = json.dumps(["X0", "X1"])
    assert json.loads(engine.scalar(train.format("s", "'cancer'", upper, "")))["features"] == 2
    on_index = ', "index": "ix"'
    assert json.loads(engine.scalar(train.format("i", "NULL", upper, on_index)))["rows"] == 569
    message, hint = hint_of(engine, train.format("o", "NULL", json.dumps(["x1", "x0"]), on_index))
    assert "index 'ix' was built with features = ['x0', 'x1']" in message
    assert "loom_create_index" in hint and "rebuild the index" not in hint


def test_reindex_of_an_index_whose_table_was_renamed_says_so(cancer):
    """A rebuild reads the table its index was built on: once it was renamed, the error says
    so and how to build the index on its name now, as a train's does (it said to pass a table
    or view, and on DuckDB that a temporary table cannot be a source)."""
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('ix', 'cancer', 'y', '{}')")
    engine.rows("ALTER TABLE cancer RENAME TO cancer2")
    before = engine.rows("SELECT uid, stats FROM loom.indexes")
    with pytest.raises(engine.errors) as e:
        engine.scalar("SELECT loom_reindex('ix')")
    message = str(e.value)
    assert "was renamed, moved or dropped since index 'ix' was built" in message
    assert "loom_drop_index('ix')" in message and "temporary" not in message
    assert engine.rows("SELECT uid, stats FROM loom.indexes") == before


def test_evaluate_index_refuses_a_stale_index(cancer):
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('ix', 'cancer', 'y', '{}')")
    engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"ix\", \"epochs\": 3}')")
    before = json.loads(engine.scalar("SELECT loom_evaluate_index('m', 'ix')"))
    assert before["rows"] == 569
    engine.rows("UPDATE cancer SET y = 1 - y")
    with pytest.raises(engine.errors) as e:  # its metrics would be those of the old rows
        engine.scalar("SELECT loom_evaluate_index('m', 'ix')")
    message = str(e.value)
    assert "index 'ix' is older than the last change" in message
    assert "loom_reindex('ix')" in message and "allow_stale" not in message
    engine.scalar("SELECT loom_reindex('ix')")
    after = json.loads(engine.scalar("SELECT loom_evaluate_index('m', 'ix')"))
    now = json.loads(engine.scalar("SELECT loom_evaluate('m', 'cancer')"))
    assert after["accuracy"] == pytest.approx(now["accuracy"]) and now["accuracy"] < 0.5


def test_evaluate_index_refuses_an_index_of_another_label(cancer):
    engine, _, _ = cancer
    engine.rows("ALTER TABLE cancer ADD COLUMN other INTEGER")
    engine.rows("UPDATE cancer SET other = 2")
    engine.scalar("SELECT loom_create_index('by_y', 'cancer', 'y', '{}')")
    engine.scalar("SELECT loom_create_index('by_other', 'cancer', 'other', '{}')")
    engine.scalar("SELECT loom_train('m', NULL, 'y', '{\"index\": \"by_y\", \"epochs\": 1}')")
    with pytest.raises(engine.errors) as e:
        engine.scalar("SELECT loom_evaluate_index('m', 'by_other')")
    message = str(e.value)
    assert "index 'by_other' holds the label 'other', not model 'm''s label 'y'" in message
    assert "WITH (label = y)" in message
    assert json.loads(engine.scalar("SELECT loom_evaluate_index('m', 'by_y')"))["rows"] == 569


def test_an_index_whose_column_changed_type_is_stale(cancer):
    """A column of numbers turned to text reads back as the same doubles, so the fingerprint
    alone saw no change: the index trained as if its source were what it was built on."""
    engine, _, _ = cancer
    engine.scalar(
        "SELECT loom_create_index('ix', 'cancer', 'y', '{\"features\": [\"x0\", \"x1\"]}')"
    )
    engine.scalar("SELECT loom_train('before', NULL, 'y', '{\"index\": \"ix\", \"epochs\": 1}')")
    engine.rows("ALTER TABLE cancer ALTER COLUMN x1 TYPE VARCHAR")
    train = "SELECT loom_train('{}', NULL, 'y', '{{\"index\": \"ix\", \"epochs\": 1{}}}')"
    changed = r"index 'ix' is older than the last change[\s\S]*'x1' \(numeric → text\) changed type"
    with pytest.raises(engine.errors, match=changed + r"[\s\S]*allow_stale"):
        engine.scalar(train.format("a", ""))
    with pytest.raises(engine.errors, match=changed):
        engine.scalar("SELECT loom_evaluate_index('before', 'ix')")
    engine.scalar(train.format("a", ', "allow_stale": true'))  # as it is
    engine.scalar("SELECT loom_reindex('ix')")  # rebuilt on the columns as they are now
    engine.scalar(train.format("b", ""))


def test_later_epochs_reuse_decoded_batches_within_the_cache_budget(cancer):
    engine, _, _ = cancer
    for name, budget in (("cached", 256), ("uncached", 0)):
        opts = json.dumps({"epochs": 3, "cache_mb": budget, "seed": 1})
        engine.scalar(f"SELECT loom_train('{name}', 'cancer', 'y', '{opts}')")
    history = {n: json.loads(h) for n, h in engine.rows("SELECT name, history FROM loom.models")}
    read = [h["bytes_read"] for h in history["cached"]]
    assert read[0] > 0 and read[1:] == [0, 0]
    assert [h["bytes_read"] for h in history["uncached"]] == [read[0]] * 3
    coef = {n: c for n, c in engine.rows("SELECT name, coefficients FROM loom.models")}
    assert coef["cached"] == coef["uncached"]  # the same batches, the same model


def test_index_names_that_differ_in_case_only(cancer):
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('Foo', 'cancer', 'y', '{}')")
    create = "SELECT loom_create_index('foo', 'cancer', 'y', '{\"format\": \"toc\"}')"
    if engine.name == "duckdb":  # its table names ignore case: one storage table for both
        with pytest.raises(engine.errors) as e:
            engine.scalar(create)
        message = str(e.value)
        assert "index 'Foo' already exists, and 'foo' differs from it only in case" in message
        assert "loom_drop_index('Foo')" in message and "Catalog Error" not in message
        assert engine.scalar("SELECT count(*) FROM loom.indexes") == 1
        assert engine.scalar("SELECT format FROM loom.indexes WHERE name = 'Foo'") == "dense"
    else:  # quoted: two indexes
        engine.scalar(create)
        assert engine.scalar("SELECT count(*) FROM loom.indexes") == 2


def test_a_train_never_touches_a_users_index_with_a_similar_name(cancer):
    engine, _, _ = cancer
    engine.scalar("SELECT loom_create_index('tmp_bc', 'cancer', 'y', '{}')")
    engine.scalar("SELECT loom_create_index('train_bc', 'cancer', 'y', '{}')")
    engine.scalar("SELECT loom_train('bc', 'cancer', 'y', '{\"epochs\": 1}')")
    names = [r[0] for r in engine.rows("SELECT name FROM loom.indexes ORDER BY name")]
    assert names == ["tmp_bc", "train_bc"]


def test_postgres_errors_name_loomdb_and_carry_the_sqlstate_and_hint(pg_dsn):
    """PL/Python writes an exception's class before its message: loomdb's errors read
    ``loomdb: …`` (not ``plpy.Error: …``), with the error class's SQLSTATE and the hint."""
    import psycopg

    from loomdb.errors import LoomNotFoundError, LoomOptionError

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as bad_option:
            conn.execute("SELECT loom_train('e', 'nosuch', 'y', '{\"epoch\": 1}')")
        with pytest.raises(psycopg.Error) as missing:
            conn.execute("SELECT loom_predict('no_such_model', ARRAY[1.0]::float8[])")
    diag = bad_option.value.diag
    assert diag.message_primary == "loomdb: unknown loom_train option 'epoch'"
    assert diag.sqlstate == LoomOptionError.sqlstate and "epochs" in diag.message_hint
    assert missing.value.diag.message_primary == "loomdb: model 'no_such_model' does not exist"
    assert missing.value.diag.sqlstate == LoomNotFoundError.sqlstate


def test_a_source_and_a_deployment_resolve_in_the_callers_schema(engine):
    """Two tables named t, in the default schema and in s1: after the caller makes s1 its
    schema, loomdb reads s1's t and deploys into s1, as the caller's own SELECT resolves t
    (DuckDB's loomdb reads on a connection of its own, which kept the default schema: it
    trained on the other t)."""
    engine.load("t", np.arange(20.0).reshape(10, 2), np.arange(10.0) % 2)
    engine.rows("CREATE SCHEMA s1")
    engine.rows("CREATE TABLE s1.t AS SELECT x0, x1, x0 + x1 AS x2, y FROM t WHERE x0 > 12")
    if engine.name == "duckdb":
        engine.rows("SET schema = 's1'")
    else:
        engine.rows("SET search_path = s1, public")
    assert engine.scalar("SELECT count(*) FROM t") == 3
    done = json.loads(engine.scalar("SELECT loom_train('m', 't', 'y', '{\"epochs\": 2}')"))
    assert done["rows"] == 3 and done["features"] == 3
    assert json.loads(engine.scalar("SELECT loom_evaluate('m', 't')"))["rows"] == 3
    deployed = json.loads(engine.scalar("SELECT loom_deploy('m')"))
    assert deployed["functions"] == ["s1.predict_m(x0, x1, x2)"]
    assert engine.scalar("SELECT count(s1.predict_m(x0, x1, x2)) FROM t") == 3


def _use_schema(engine, schema: str) -> None:
    if engine.name == "duckdb":
        engine.rows(f"SET schema = '{schema}'")
    else:
        engine.rows(f'SET search_path = "{schema}", public')


def test_an_index_reads_the_table_it_was_built_on_whatever_schema_is_current_later(engine):
    """An index built on t while schema s_ix was current keeps reading s_ix.t once another
    schema is current, one with a t of its own: a train on the index, its staleness check and
    loom_reindex read the table the build read (they read the default schema's t: a train was
    refused as stale, and loom_reindex rebuilt the index from the other table's rows)."""
    engine.load("t", np.arange(20.0).reshape(10, 2), np.arange(10.0) % 2)
    ((home,),) = engine.rows("SELECT current_schema()")
    engine.rows("DROP SCHEMA IF EXISTS s_ix CASCADE")
    engine.rows("CREATE SCHEMA s_ix")
    engine.rows(f'CREATE TABLE s_ix.t AS SELECT * FROM "{home}".t WHERE x0 > 12')
    try:
        _use_schema(engine, "s_ix")
        built = json.loads(engine.scalar("SELECT loom_create_index('ix', 't', 'y')"))
        assert built["rows"] == 3 and built["source"] == "t"  # shown as given
        _use_schema(engine, home)
        train = "SELECT loom_train('{}', {}, 'y', '{{\"epochs\": 2, \"index\": \"ix\"}}')"
        assert json.loads(engine.scalar(train.format("m", "NULL")))["rows"] == 3
        assert json.loads(engine.scalar(train.format("m2", "'s_ix.t'")))["rows"] == 3
        with pytest.raises(Exception, match="was built on") as refused:
            engine.scalar(train.format("m3", "'t'"))  # the default schema's t is another table
        assert "s_ix" in str(refused.value)
        rebuilt = json.loads(engine.scalar("SELECT loom_reindex('ix')"))
        assert rebuilt["rows"] == 3 and rebuilt["source"] == "t"
        assert json.loads(engine.scalar(train.format("m4", "NULL")))["rows"] == 3
        assert engine.scalar("SELECT source FROM loom.indexes WHERE name = 'ix'") == "t"
    finally:
        _use_schema(engine, home)
        engine.rows("SELECT loom_drop_index('ix')")
        engine.rows("DROP SCHEMA IF EXISTS s_ix CASCADE")


def test_an_index_recorded_without_its_table_reads_its_source_as_named(engine):
    """An index recorded before its table was (no ``relation`` in its stats) reads its source
    under the schema current at the call, as it did; a rebuild records the table."""
    engine.load("t", np.arange(20.0).reshape(10, 2), np.arange(10.0) % 2)
    engine.scalar("SELECT loom_create_index('ix', 't', 'y')")
    stats = json.loads(engine.scalar("SELECT stats FROM loom.indexes WHERE name = 'ix'"))
    assert stats.pop("relation").split(".")[-1].strip('"') == "t"
    text = json.dumps(stats).replace("'", "''")
    engine.rows(f"UPDATE loom.indexes SET stats = '{text}' WHERE name = 'ix'")
    train = "SELECT loom_train('{}', {}, 'y', '{{\"epochs\": 2, \"index\": \"ix\"}}')"
    assert json.loads(engine.scalar(train.format("m", "NULL")))["rows"] == 10
    assert json.loads(engine.scalar(train.format("m2", "'t'")))["rows"] == 10
    assert json.loads(engine.scalar("SELECT loom_reindex('ix')"))["rows"] == 10
    stats = json.loads(engine.scalar("SELECT stats FROM loom.indexes WHERE name = 'ix'"))
    assert stats["relation"].split(".")[-1].strip('"') == "t"


def test_create_index_progress_false_silences_its_lines(engine, caplog):
    """loom_create_index refused ``{"progress": false}`` (unknown option), which loom_train
    takes and the README gives as silencing one call's progress."""
    caplog.set_level(logging.INFO, logger="loomdb.progress")
    if engine.name == "duckdb":
        engine.con.state.progress = True  # the suite's connection is made silent

    def said() -> list[str]:
        out = engine.notices if engine.name == "postgres" else [r.message for r in caplog.records]
        return [m for m in out if "quiet_ix" in m or "loud_ix" in m]

    engine.load("pts", np.arange(40.0).reshape(20, 2), np.arange(20.0) % 2)
    engine.scalar("SELECT loom_create_index('loud_ix', 'pts', 'y')")
    assert any("laying out 20 rows" in m for m in said())  # what is silenced is said by default
    before = len(said())
    summary = engine.scalar(
        "SELECT loom_create_index('quiet_ix', 'pts', 'y', '{\"progress\": false}')"
    )
    assert json.loads(summary)["rows"] == 20 and len(said()) == before
    options = engine.scalar("SELECT options FROM loom.indexes WHERE name = 'quiet_ix'")
    assert "progress" not in str(options)  # a call's option, not the index's
