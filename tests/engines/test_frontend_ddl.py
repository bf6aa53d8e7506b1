"""loomdb's SQL front-end end to end: index DDL it must honour or refuse, never drop, on both
engines (DuckDB: ``loomdb.connect``'s ``execute``; PostgreSQL: the front-end over a psycopg
connection, as ``loomdb sql --dsn`` runs it)."""

from __future__ import annotations

import json

import pytest

from loomdb.errors import LoomError, LoomNotFoundError, LoomSyntaxError

pytestmark = pytest.mark.postgres

ROWS = 40
POINTS = f"""
CREATE TABLE pts AS
SELECT CAST(i AS DOUBLE PRECISION) AS a, CAST(i % 7 AS DOUBLE PRECISION) AS b,
       CAST(i % 2 AS INTEGER) AS y
FROM generate_series(1, {ROWS}) AS g(i)
"""


def front(engine, sql: str) -> list[tuple]:
    """Every statement of ``sql`` through loomdb's front-end; the last one's rows."""
    if engine.name == "duckdb":
        cur = engine.con.execute(sql)
        return cur.fetchall() if cur.description else []
    from loomdb.engines.postgres.client import PsycopgDatabase
    from loomdb.frontend import pieces, rewritten
    from loomdb.frontend.steps import Script
    from loomdb.store.sql_catalog import DbCatalog

    catalog = DbCatalog(PsycopgDatabase(engine.conn))
    script = Script(
        pieces(sql, "postgres"), lambda p: rewritten(p, "postgres", catalog), "postgres"
    )
    rows: list[tuple] = []
    with script.noting():
        for statement in script:
            rows = engine.rows(statement)
    return rows


def indexes(engine) -> list[str]:
    return sorted(r[0] for r in engine.rows("SELECT name FROM loom.indexes"))


@pytest.fixture
def pts(engine):
    engine.rows(POINTS)
    front(engine, "CREATE INDEX pts_w ON pts USING mlweaving (a, b) WITH (label = y)")
    return engine


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        ("CREATE OR REPLACE INDEX pts_w ON pts USING mlweaving (a) WITH (label = y)", "OR REPLACE"),
        ("CREATE OR REPLACE INDEX pts_n ON pts USING toc (a) WITH (label = y)", "OR REPLACE"),
        ("CREATE TEMP INDEX pts_n ON pts USING toc (a, b) WITH (label = y)", "TEMPORARY"),
        ("CREATE TEMPORARY INDEX pts_n ON create_mlweaving('pts', 'y')", "arguments only"),
    ],
)
def test_create_modifiers_a_loomdb_index_cannot_honour_are_refused(pts, statement, refused):
    """OR REPLACE reached the engine as written (DuckDB: "Create index option must be a
    constant value"), TEMP was dropped: a lasting index was built."""
    uid = pts.rows("SELECT uid FROM loom.indexes WHERE name = 'pts_w'")
    with pytest.raises(LoomSyntaxError, match=refused) as caught:
        front(pts, statement)
    assert caught.value.hint
    assert indexes(pts) == ["pts_w"]
    assert pts.rows("SELECT uid FROM loom.indexes WHERE name = 'pts_w'") == uid


@pytest.mark.parametrize("if_exists", ["", "IF EXISTS "])
@pytest.mark.parametrize("order", [("pts_w", "pts_b"), ("pts_b", "pts_w")])
def test_a_drop_of_several_indexes_one_of_them_loomdb_is_refused(pts, if_exists, order):
    """sqlglot cannot parse several names: the statement reached the engine, and PostgreSQL's
    DROP INDEX IF EXISTS dropped the other index and skipped the loomdb one without a word."""
    pts.rows("CREATE INDEX pts_b ON pts (b)")
    with pytest.raises(LoomSyntaxError, match="pts_w is a loomdb index") as caught:
        front(pts, f"DROP INDEX {if_exists}{', '.join(order)}")
    assert "DROP INDEX pts_w" in (caught.value.hint or "")
    assert indexes(pts) == ["pts_w"]
    front(pts, "DROP INDEX pts_b")  # the engine's own index is still there to drop
    front(pts, "DROP INDEX pts_w")
    assert indexes(pts) == []


@pytest.mark.parametrize(
    ("with_clause", "message"),
    [
        ('label = ""', "cannot read"),  # was sqlglot's ValueError, not a LoomError
        ("label = pts.y", "'label = pts.y' as a WITH option: a qualified name"),  # was label y
        ("label = y, toast.batch_size = 8", "'toast.batch_size = 8'"),  # was an option ''
    ],
)
def test_with_options_sqlglot_misreads_are_refused(pts, with_clause, message):
    statement = f"CREATE INDEX pts_n ON pts USING toc (a, b) WITH ({with_clause})"
    with pytest.raises(LoomSyntaxError, match=message) as caught:
        front(pts, statement)
    assert caught.value.hint
    assert indexes(pts) == ["pts_w"]


def test_duckdb_drop_and_reindex_names_ignore_case_as_duckdb_does():
    """DuckDB's identifiers ignore case, and loomdb refuses an index whose name differs from
    another's in case only; yet DROP INDEX PTS_W reached DuckDB ("Index with name PTS_W does
    not exist") and REINDEX INDEX Pts_W its parser."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS)
        front(duck, 'CREATE INDEX "Pts_W" ON pts USING toc (a, b) WITH (label = y)')
        uid = duck.rows("SELECT uid FROM loom.indexes")
        (rebuilt,) = front(duck, "REINDEX INDEX pts_w")
        assert json.loads(rebuilt[0])["name"] == "Pts_W"
        assert duck.rows("SELECT uid FROM loom.indexes") != uid
        front(duck, 'DROP INDEX "PTS_W"')
        assert indexes(duck) == []
    finally:
        duck.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # the column aliases went with the flattened subquery: "x1" not found
        (
            "SELECT count(x1), count(pred) FROM "
            "(SELECT * FROM infer_mlweaving(m, 'pts') AS p(x1, x2, lab, pred)) AS q",
            (ROWS, ROWS),
        ),
        # the sample went with it: every row came back
        (
            "SELECT count(*), count(prediction) FROM "
            "(SELECT * FROM infer_mlweaving(m, 'pts') TABLESAMPLE SYSTEM (0)) AS q",
            (0, 0),
        ),
    ],
)
def test_infer_mlweaving_keeps_what_its_table_is_written_with(engine, query, expected):
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    assert front(engine, query) == [expected]


def test_infer_mlweaving_leaves_the_rest_of_its_statement_as_written(engine):
    """The front-end ran sqlglot's regenerated statement: on PostgreSQL the prefix operator
    ``@`` (absolute value, on both engines) became ``$(a - 100)`` and the statement failed."""
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    query = (
        "SELECT max(@ (a - 100)) AS far, count(prediction) FROM infer_mlweaving(m, 'pts') AS p "
        "WHERE @ (a - {rows}) < {rows} - 1"
    )
    ((far, predicted),) = front(engine, query.format(rows=ROWS))
    assert (far, predicted) == (98, ROWS - 1)  # a = 1 is 39 from 40: left out


def test_infer_mlweaving_inside_explain_or_prepare_is_rewritten(engine):
    """sqlglot reads EXPLAIN and PREPARE as a word and a string: the query they wrap reached the
    engine as written ("Table Function with name infer_mlweaving does not exist")."""
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    prepared = (
        "PREPARE q AS SELECT count(prediction) FROM infer_mlweaving(m, 'pts') WHERE a > $1; "
        "EXECUTE q(10)"
    )
    assert front(engine, prepared) == [(ROWS - 10,)]
    explain = "EXPLAIN VERBOSE" if engine.name == "postgres" else "EXPLAIN"  # output columns
    plan = front(engine, f"{explain} SELECT * FROM infer_mlweaving(m, 'pts') WHERE a > 1")
    assert ("loom_predict" if engine.name == "postgres" else "prediction") in str(plan)


def test_infer_mlweaving_refuses_what_a_table_function_cannot_take(engine):
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    with pytest.raises(LoomSyntaxError, match="takes no ONLY") as caught:
        front(engine, "SELECT * FROM ONLY infer_mlweaving(m, 'pts')")
    assert caught.value.hint


def test_infer_mlweaving_of_a_missing_table_says_so_with_a_hint(engine):
    """The rewritten query reached the engine: DuckDB's "Table with name nosuch does not
    exist!" (PostgreSQL's "relation … does not exist"), without a hint."""
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    with pytest.raises(LoomNotFoundError, match="cannot read source nosuch") as caught:
        front(engine, "SELECT count(*) FROM infer_mlweaving(m, 'nosuch')")
    assert caught.value.hint


def test_infer_mlweaving_on_a_table_without_a_feature_of_the_model_says_so(engine):
    """A feature column dropped (or renamed) since the model was trained: the predicting
    query reached the engine, whose binder error named a column the statement never wrote
    ("Referenced column b not found", "column b does not exist"), without a hint."""
    engine.rows(POINTS)
    engine.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
    engine.rows("ALTER TABLE pts DROP COLUMN b")
    with pytest.raises(LoomNotFoundError) as caught:
        front(engine, "SELECT count(prediction) FROM infer_mlweaving(m, 'pts')")
    assert "model 'm''s feature(s) 'b' are not columns of pts" in caught.value.message
    assert "loom_train" in caught.value.hint


def test_create_mlweaving_of_a_missing_table_says_so_with_a_hint(engine):
    """The default label's look-up ran the engine's query bare: DuckDB's catalog error came
    back without a hint (a LoomDatabaseError), PostgreSQL's as psycopg's UndefinedTable."""
    with pytest.raises(LoomNotFoundError, match="cannot read source nosuch") as caught:
        front(engine, "CREATE INDEX w ON create_mlweaving('nosuch')")
    assert caught.value.hint
    assert indexes(engine) == []


@pytest.mark.parametrize("parameter", ["$1", "?"])
def test_a_with_option_given_as_a_parameter_is_refused_as_one(pts, parameter):
    """The refusal showed sqlglot's rendering of the parameter, not what was written:
    "got :1 instead" on DuckDB, "got @1 instead" on PostgreSQL, for $1."""
    statement = f"CREATE INDEX pts_n ON pts USING toc (a, b) WITH (label = y, seed = {parameter})"
    with pytest.raises(LoomSyntaxError, match=r"option 'seed' cannot be a query parameter"):
        front(pts, statement)
    assert indexes(pts) == ["pts_w"]


def test_with_string_values_are_read_as_psql_reads_them(pts):
    """psql's access methods read each WITH value's text as JSON; the front-end refused
    ``batch_size = '16'`` ("got \\"16\\"") and ``preprocess = '{…}'`` ("must be an object"),
    so the same statement failed through loomdb sql and preprocess could not be given in WITH."""
    front(
        pts,
        "CREATE INDEX pts_s ON pts USING mlweaving (a, b) WITH (label = y, batch_size = '16', "
        """preprocess = '{"a": {"impute": "mean"}}', nulls = 'skip')""",
    )
    (stored,) = pts.rows("SELECT options FROM loom.indexes WHERE name = 'pts_s'")
    options = stored[0] if isinstance(stored[0], dict) else json.loads(stored[0])
    assert options["batch_size"] == 16
    assert options["preprocess"] == {"a": {"impute": "mean"}}
    assert options["nulls"] == "skip"


def test_unquoted_names_fold_as_the_engine_folds_them(pts):
    """On PostgreSQL the front-end kept unquoted names as written: CREATE INDEX Mixed_F stored
    "Mixed_F", features (A, B) and label = Y named columns "A", "B", "Y" that do not exist,
    and DROP INDEX mixed_f reached PostgreSQL ("index mixed_f does not exist")."""
    front(pts, "CREATE INDEX Mixed_F ON PTS USING toc (A, B) WITH (label = Y)")
    (spelled,) = pts.rows("SELECT name FROM loom.indexes WHERE lower(name) = 'mixed_f'")
    if pts.name == "postgres":  # the name PostgreSQL gives a relation written so
        pts.rows("CREATE TABLE Mixed_F (x int)")
        assert (
            spelled
            == pts.rows("SELECT relname::text FROM pg_class WHERE oid = 'Mixed_F'::regclass")[0]
        )
    (rebuilt,) = front(pts, "REINDEX INDEX MIXED_F")
    assert json.loads(rebuilt[0])["features"] == ["a", "b"]
    front(pts, "DROP INDEX mixed_f")
    assert indexes(pts) == ["pts_w"]
    front(pts, 'CREATE INDEX "Quoted_F" ON pts USING toc (a, b) WITH (label = y)')
    front(pts, 'DROP INDEX "Quoted_F"')
    assert indexes(pts) == ["pts_w"]


def test_duckdb_a_temporary_table_as_a_source_says_so():
    """loomdb reads a source on a connection of its own, which does not see the caller's TEMP
    tables: CREATE INDEX … ON tt and loom_train('m', 'tt', …) failed "Table with name tt does
    not exist" with a hint that did not say why nor what to do."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS.replace("CREATE TABLE pts", "CREATE TEMP TABLE tt"))
        attempts = [
            "CREATE INDEX ti ON tt USING toc (a, b) WITH (label = y)",
            "SELECT loom_train('m', 'tt', 'y')",
            "SELECT loom_train('m', 'SELECT a, y FROM tt', 'y')",
        ]
        for statement in attempts:
            with pytest.raises(LoomError) as caught:
                front(duck, statement)
            assert "temporary table cannot be a source" in (caught.value.hint or "")
            assert "CREATE TABLE" in (caught.value.hint or "")
        assert indexes(duck) == []
        duck.rows("CREATE TABLE t2 AS SELECT * FROM tt")  # what the hint says to do
        front(duck, "CREATE INDEX ti ON t2 USING toc (a, b) WITH (label = y)")
        assert indexes(duck) == ["ti"]
    finally:
        duck.close()


def test_training_on_an_index_of_a_renamed_table_says_to_build_it_again(pts):
    """After ALTER TABLE pts RENAME TO pts2, training on index pts_w failed "cannot read
    source pts" with a hint about passing a table, not about the index (the source named as
    the index reads it: with its schema)."""
    pts.rows("ALTER TABLE pts RENAME TO pts2")
    with pytest.raises(pts.errors, match=r"cannot read source \S*\.\"?pts\b") as caught:
        pts.rows("""SELECT loom_train('m', NULL, 'y', '{"index": "pts_w", "epochs": 1}')""")
    diag = getattr(caught.value, "diag", None)  # PostgreSQL's HINT field, or the LoomError's
    hint = diag.message_hint if diag is not None else getattr(caught.value, "hint", None)
    assert "loom_drop_index('pts_w')" in (hint or "")
    front(pts, "DROP INDEX pts_w")
    front(pts, "CREATE INDEX pts_w ON pts2 USING mlweaving (a, b) WITH (label = y)")
    (trained,) = pts.rows(
        """SELECT loom_train('m', NULL, 'y', '{"index": "pts_w", "epochs": 1}')"""
    )
    assert json.loads(trained[0])["rows"] == ROWS


def test_a_source_named_in_another_case_finds_its_index_as_the_engine_reads_names(pts):
    """The index pts_w was found by its source's text as written: train_mlweaving('PTS', …)
    said "table PTS has no mlweaving index" and loom_train('m', 'PTS', …, {"index": "pts_w"})
    "was built on 'pts', not 'PTS'", though both engines read PTS as pts (PostgreSQL folds the
    unquoted name; DuckDB's names ignore case, quoted ones too); so did 'main.pts' (or
    'public.pts', as psql's CREATE INDEX … USING records its table) for an index on 'pts'."""
    (trained,) = front(pts, "CREATE INDEX m ON train_mlweaving('PTS', 1, 4)")
    assert json.loads(trained[0])["rows"] == ROWS
    ((schema,),) = pts.rows("SELECT current_schema()")  # and named with its schema
    (trained,) = front(pts, f"CREATE INDEX m1 ON train_mlweaving('{schema}.pts', 1, 4)")
    assert json.loads(trained[0])["rows"] == ROWS
    on_index = """SELECT loom_train('{model}', '{source}', 'y', '{{"index": "pts_w"}}')"""
    (trained,) = pts.rows(on_index.format(model="m2", source="Pts"))
    assert json.loads(trained[0])["rows"] == ROWS
    quoted = on_index.format(model="m3", source='"PTS"')
    if pts.name == "duckdb":
        assert json.loads(pts.rows(quoted)[0][0])["rows"] == ROWS
    else:  # a quoted name is kept as written: another table
        with pytest.raises(pts.errors, match=f"was built on '{schema}.pts', not '\"PTS\"'"):
            pts.rows(quoted)


def test_a_schema_qualified_name_of_a_loomdb_index_is_refused_not_passed_on(pts):
    """DROP INDEX main.pts_w (public.pts_w) reached the engine: "does not exist", and with IF
    EXISTS nothing dropped and no word said; an index of the engine's own of that qualified
    name is still the engine's to drop."""
    ((schema,),) = pts.rows("SELECT current_schema()")  # main, public or the test's own
    for verb in ("DROP INDEX", "DROP INDEX IF EXISTS", "REINDEX INDEX"):
        with pytest.raises(LoomSyntaxError, match="pts_w belongs to no schema") as caught:
            front(pts, f"{verb} {schema}.pts_w")
        assert caught.value.hint == f"write {verb.replace(' IF EXISTS', '')} pts_w"
    assert indexes(pts) == ["pts_w"]
    pts.rows("CREATE INDEX pts_w ON pts (b)")  # the engine's own index, named like loomdb's
    front(pts, f"DROP INDEX {schema}.pts_w")
    assert indexes(pts) == ["pts_w"]
    assert not pts.rows(
        "SELECT 1 FROM duckdb_indexes() WHERE index_name = 'pts_w'"
        if pts.name == "duckdb"
        else "SELECT 1 FROM pg_class WHERE relname = 'pts_w' AND relkind = 'i'"  # not storage
    )


def test_duckdb_reindex_table_rebuilds_the_tables_loomdb_index():
    """REINDEX TABLE pts was DuckDB's parser error: PostgreSQL's rebuilds the table's indexes;
    here its one loomdb index is rebuilt, and a table with several is refused naming each."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS)
        front(duck, "CREATE INDEX pts_w ON pts USING toc (a, b) WITH (label = y)")
        uid = duck.rows("SELECT uid FROM loom.indexes")
        (rebuilt,) = front(duck, "REINDEX TABLE PTS")
        assert json.loads(rebuilt[0])["name"] == "pts_w"
        assert duck.rows("SELECT uid FROM loom.indexes") != uid
        with pytest.raises(LoomSyntaxError, match="DuckDB has no REINDEX"):
            front(duck, "REINDEX SYSTEM main")
    finally:
        duck.close()


def test_duckdb_reindex_of_several_indexes_returns_every_rebuilds_summary():
    """DuckDB's REINDEX TABLE of a table with several loomdb indexes (and REINDEX SCHEMA,
    REINDEX DATABASE) rebuilt each, but ``con.execute`` and ``con.sql`` returned the last
    rebuild's summary alone: one row per rebuilt index, in one text column, as one rebuild."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS)
        for name, method in (("pts_w", "toc"), ("pts_d", "dense")):
            front(duck, f"CREATE INDEX {name} ON pts USING {method} (a, b) WITH (label = y)")
        single = duck.con.execute("REINDEX INDEX pts_w")
        assert [d[:2] for d in single.description] == [("loom_reindex('pts_w')", "VARCHAR")]
        for sql in ("REINDEX TABLE pts", "REINDEX SCHEMA main", "REINDEX DATABASE"):
            before = uids(duck)
            cur = duck.con.execute(sql)
            described = [d[:2] for d in cur.description]
            said = [json.loads(text)["name"] for (text,) in cur.fetchall()]
            changed = {n for n, u in uids(duck).items() if before[n] != u}
            assert sorted(said) == sorted(changed) == ["pts_d", "pts_w"], sql
            assert described == [("loom_reindex", "VARCHAR")]
            rel = duck.con.sql(sql)  # loomdb's DDL runs at once; its relation gives every row
            assert rel.columns == ["loom_reindex"]
            assert sorted(json.loads(text)["name"] for (text,) in rel.fetchall()) == sorted(said)
    finally:
        duck.close()


def uids(engine) -> dict[str, str]:
    return {str(n): str(u) for n, u in engine.rows("SELECT name, uid FROM loom.indexes")}


def rebuilt(engine, sql: str) -> set[str]:
    """The loomdb indexes ``sql`` (through the front-end) rebuilt: a rebuild gives a new uid."""
    before = uids(engine)
    front(engine, sql)
    return {n for n, u in uids(engine).items() if before.get(n) != u}


def test_reindex_table_schema_and_database_rebuild_every_loomdb_index_in_them(engine):
    """DuckDB refused REINDEX TABLE t of a table with several loomdb indexes ("rebuild them one
    per statement") where PostgreSQL rebuilt all of them, and refused REINDEX SCHEMA and
    DATABASE, which on PostgreSQL left the indexes loom_create_index made as they were,
    without a word.  One rule on both: every loomdb index on the table, on a table of the
    schema, or in the database is rebuilt with the engine's own."""
    schema = str(engine.rows("SELECT current_schema()")[0][0])
    engine.rows("DROP SCHEMA IF EXISTS loomtest_other CASCADE")
    engine.rows(POINTS)
    engine.rows("CREATE SCHEMA loomtest_other")
    engine.rows("CREATE TABLE loomtest_other.q AS SELECT * FROM pts")
    try:
        for name, method in (("pts_w", "mlweaving"), ("pts_d", "dense")):
            front(engine, f"CREATE INDEX {name} ON pts USING {method} (a, b) WITH (label = y)")
        front(engine, "CREATE INDEX q_d ON loomtest_other.q USING dense (a) WITH (label = y)")
        assert rebuilt(engine, "REINDEX TABLE pts") == {"pts_w", "pts_d"}
        assert rebuilt(engine, f"REINDEX SCHEMA {schema}") == {"pts_w", "pts_d"}
        assert rebuilt(engine, "REINDEX SCHEMA LOOMTEST_OTHER") == {"q_d"}
        named = f" {engine.rows('SELECT current_database()')[0][0]}" * (engine.name != "duckdb")
        assert rebuilt(engine, f"REINDEX DATABASE{named}") == {"pts_w", "pts_d", "q_d"}
        concurrently = f"REINDEX SCHEMA CONCURRENTLY {schema}"
        if engine.name == "duckdb":  # read past, as in REINDEX INDEX: DuckDB has no such thing
            assert rebuilt(engine, concurrently) == {"pts_w", "pts_d"}
        else:  # PostgreSQL's own would run concurrently, loomdb's could not
            with pytest.raises(LoomSyntaxError, match="loomdb's indexes in schema") as caught:
                front(engine, concurrently)
            assert "REINDEX INDEX pts_d" in (caught.value.hint or "")
    finally:
        front(engine, "DROP INDEX q_d")
        engine.rows("DROP SCHEMA loomtest_other CASCADE")


def test_reindex_with_an_option_list_rebuilds_on_both_engines(engine):
    """PostgreSQL's option list, REINDEX (VERBOSE) INDEX w, was read past on PostgreSQL, but
    DuckDB refused it as naming no loomdb index, though it named one (and read past
    REINDEX INDEX CONCURRENTLY w)."""
    engine.rows(POINTS)
    front(engine, "CREATE INDEX pts_w ON pts USING mlweaving (a, b) WITH (label = y)")
    try:
        assert rebuilt(engine, "REINDEX (VERBOSE) INDEX pts_w") == {"pts_w"}
        assert rebuilt(engine, "REINDEX (VERBOSE) TABLE pts") == {"pts_w"}
    finally:
        front(engine, "DROP INDEX pts_w")


def test_reindex_table_where_one_rebuild_fails_says_what_was_rebuilt(engine):
    """DuckDB rebuilds one index per statement, each committed on its own (loom_reindex
    commits on a connection of its own): a failed one's error says which were rebuilt and
    which not.  PostgreSQL rebuilds them in one DO block: none is."""
    engine.rows(POINTS)
    front(engine, "CREATE INDEX pts_a ON pts USING dense (a) WITH (label = y)")
    front(engine, "CREATE INDEX pts_b ON pts USING dense (b) WITH (label = y)")  # rebuilt first
    engine.rows("ALTER TABLE pts RENAME COLUMN a TO a2")
    before = uids(engine)
    with pytest.raises((LoomError, *engine.errors), match="'a'") as caught:
        front(engine, "REINDEX TABLE pts")
    changed = {n for n, u in uids(engine).items() if before[n] != u}
    schema = str(engine.rows("SELECT current_schema()")[0][0])
    if engine.name == "postgres":
        assert changed == set()
        with pytest.raises((LoomError, *engine.errors), match="'a'") as caught:
            front(engine, f"REINDEX SCHEMA {schema}")  # its own, then loomdb's: none rebuilt
        assert uids(engine) == before
        assert caught.value.__notes__[0].startswith(
            f"REINDEX SCHEMA {schema} runs as 2 statements: REINDEX SCHEMA {schema} ran and "
            "committed; DO $loomdb$"
        )
        return
    assert changed == {"pts_b"}
    assert caught.value.__notes__ == [
        "REINDEX TABLE pts runs as 2 statements: SELECT loom_reindex('pts_b') ran and "
        "committed; SELECT loom_reindex('pts_a') failed"
    ]
    with pytest.raises(LoomError, match="'a'") as caught:
        front(engine, f"REINDEX SCHEMA {schema}")  # by name: pts_a first
    assert caught.value.__notes__ == [
        f"REINDEX SCHEMA {schema} runs as 2 statements: SELECT loom_reindex('pts_a') failed; "
        "SELECT loom_reindex('pts_b') did not run"
    ]


def test_a_script_whose_last_statement_fails_as_its_rows_are_read_says_what_ran(engine):
    """DuckDB streams a result: a last statement failing past its first rows failed in the
    fetch, after ``con.execute`` had returned, and its error said nothing of what the script
    had run (PostgreSQL's failed in the statement, with the note)."""
    engine.rows("CREATE TABLE ran (x INTEGER)")
    late = (
        "SELECT CAST(CASE WHEN i < 500000 THEN '1' ELSE 'x' END AS INTEGER) "
        "FROM generate_series(1, 1000000) AS g(i)"
    )
    with pytest.raises((LoomError, *engine.errors)) as caught:
        front(engine, f"INSERT INTO ran VALUES (1); {late}")
    assert caught.value.__notes__ == [
        "statement 2 of 2 (SELECT CAST(CASE WHEN i < 500000 THEN '1' ELSE…) failed; statement "
        "1 before it ran and was committed"
    ]
    assert engine.rows("SELECT count(*) FROM ran") == [(1,)]


def test_duckdb_a_script_rewrites_each_statement_once_the_one_before_ran():
    """``con.execute`` rewrote a script's next statement before running the one before it (to
    know which was last): DROP INDEX of the index the script had just created reached DuckDB
    ("Index with name w does not exist"), and train_mlweaving found no index."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS)
        script = "CREATE INDEX w ON pts USING toc (a, b) WITH (label = y); DROP INDEX w; "
        assert front(duck, script + "SELECT count(*) FROM loom.indexes") == [(0,)]
        (trained,) = front(
            duck,
            "CREATE INDEX w ON create_mlweaving('pts', 'y'); "
            "CREATE INDEX m ON train_mlweaving('pts', 1)",
        )
        assert json.loads(trained[0])["rows"] == ROWS
    finally:
        duck.close()


def test_duckdb_sql_runs_loomdbs_ddl_now_as_duckdb_runs_its_own():
    """``con.sql`` returns a relation that runs when read: ``con.sql("CREATE INDEX … USING
    toc …")`` (rewritten into a call) built nothing until read, and the next statement's
    ``DROP INDEX`` reached DuckDB ("Index with name w does not exist"); ``con.query``, DuckDB's
    other name of ``sql``, skipped the front-end, and neither took ``params``."""
    from support.engines import DuckEngine

    duck = DuckEngine()
    try:
        duck.rows(POINTS)
        built = duck.con.sql("CREATE INDEX w ON pts USING toc (a, b) WITH (label = y)")
        assert indexes(duck) == ["w"]
        assert json.loads(built.fetchall()[0][0])["name"] == "w"  # what it returned, not rerun
        duck.con.query("REINDEX INDEX w")
        assert json.loads(duck.con.sql("DROP INDEX w").fetchall()[0][0]) == {"dropped": "w"}
        assert indexes(duck) == []
        duck.rows("""SELECT loom_train('m', 'pts', 'y', '{"epochs": 1}')""")
        duck.con.sql("CREATE VIEW v AS SELECT * FROM infer_mlweaving(m, 'pts')")  # DuckDB's DDL
        assert duck.rows("SELECT count(prediction) FROM v") == [(ROWS,)]
        query = "SELECT count(*) FROM infer_mlweaving(m, 'pts') WHERE a > ?"
        predicted = duck.con.query(query, params=[10])  # DuckDB's other name, its parameters
        assert predicted.fetchall() == [(ROWS - 10,)]
    finally:
        duck.close()


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        ("ALTER INDEX pts_w RENAME TO pts_v", "cannot be renamed"),
        ("ALTER INDEX IF EXISTS pts_w RENAME TO pts_v", "cannot be renamed"),
        ("ALTER INDEX pts_w SET (batch_size = 8)", "cannot be altered"),
        ("COMMENT ON INDEX pts_w IS 'clicks'", "takes no COMMENT"),
    ],
)
def test_alter_or_comment_on_a_loomdb_index_is_refused_with_what_to_do(pts, statement, refused):
    """ALTER INDEX pts_w RENAME TO pts_v was DuckDB's parser error (PostgreSQL: "relation
    pts_w does not exist"), COMMENT ON INDEX pts_w "Index with name pts_w does not exist": a
    loomdb index's layout is stored under its name, and models name it, so a rename is a build
    under the new name; the hint's query shows how it was built."""
    uid = pts.rows("SELECT uid FROM loom.indexes WHERE name = 'pts_w'")
    with pytest.raises(LoomSyntaxError, match=f"loomdb index pts_w {refused}") as caught:
        front(pts, statement)
    hint = caught.value.hint or ""
    assert pts.rows(hint[hint.index("SELECT") : hint.index(" shows")])[0][0] == "pts"
    assert pts.rows("SELECT uid FROM loom.indexes WHERE name = 'pts_w'") == uid
    pts.rows("CREATE INDEX pts_b ON pts (b)")  # the engine's own index is still its own
    front(pts, "COMMENT ON INDEX pts_b IS 'b'")


def test_postgres_reindex_table_rebuilds_every_loomdb_index_on_it(pg_dsn):
    """REINDEX TABLE pts passed to PostgreSQL, which rebuilt its own indexes (CREATE INDEX …
    USING ones among them) and left those loom_create_index made on pts as they were, without a
    word; now all are rebuilt, in one transaction (a ROLLBACK undoes every rebuild)."""
    from support.engines import PgEngine

    pg = PgEngine(pg_dsn)
    try:
        pg.rows(POINTS)
        for name, method in (("pts_w", "mlweaving"), ("pts_d", "dense")):
            front(pg, f"CREATE INDEX {name} ON pts USING {method} (a, b) WITH (label = y)")
        pg.rows("CREATE INDEX pts_b ON pts (b)")
        am = pg.rows("SELECT 1 FROM pg_am WHERE amname = 'toc'")
        if am:  # psql's form, where loomdb's access methods are installed
            pg.rows("CREATE INDEX pts_t ON pts USING toc (a, b) WITH (label = y)")
        state = (
            "SELECT (SELECT array_agg(uid ORDER BY name) FROM loom.indexes), "
            "pg_relation_filenode('pts_b')"
        )
        built = pg.rows(state)
        pg.rows("BEGIN")
        front(pg, "REINDEX TABLE pts")
        rebuilt = pg.rows(state)
        pg.rows("ROLLBACK")
        assert pg.rows(state) == built
        assert len(rebuilt[0][0]) == 2 + len(am)
        assert all(new != old for new, old in zip(rebuilt[0][0], built[0][0]))
        assert rebuilt[0][1] != built[0][1]  # PostgreSQL's own index too
        front(pg, "REINDEX (VERBOSE) TABLE loomtest.pts")
        assert all(new != old for new, old in zip(pg.rows(state)[0][0], built[0][0]))
        with pytest.raises(LoomSyntaxError, match="REINDEX TABLE CONCURRENTLY") as caught:
            front(pg, "REINDEX TABLE CONCURRENTLY pts")
        assert all(f"REINDEX INDEX {n}" in (caught.value.hint or "") for n in ("pts_d", "pts_w"))
    finally:
        pg.rows("ROLLBACK")  # where a failure left the transaction open
        pg.rows("DROP TABLE IF EXISTS pts")  # pts_t goes with its relation
        pg.close()


def test_unquoted_names_beyond_ascii_are_read_as_the_engine_reads_them(pts):
    """Both engines take unquoted names with letters beyond ASCII, but loomdb did not:
    CREATE INDEX ix ON DONNÉES … said "source must be a table name or exactly one SELECT
    statement", REINDEX TABLE DONNÉES "has no loomdb index"; PostgreSQL folds only ASCII
    letters (DONNÉES is donnÉes), where loomdb folded every letter (données: no such table)."""
    pts.rows("CREATE TABLE DONNÉES AS SELECT a AS É, b AS ß, y AS ÉTIQUETTE FROM pts")
    front(pts, "CREATE INDEX ix ON DONNÉES USING mlweaving (É, ß) WITH (label = ÉTIQUETTE)")
    uid = pts.rows("SELECT uid FROM loom.indexes WHERE name = 'ix'")
    front(pts, "REINDEX TABLE DONNÉES")
    assert pts.rows("SELECT uid FROM loom.indexes WHERE name = 'ix'") != uid
    (trained,) = front(pts, "CREATE INDEX m ON train_mlweaving('DONNÉES', 1)")
    assert json.loads(trained[0])["rows"] == ROWS
    assert front(pts, "SELECT count(prediction) FROM infer_mlweaving(m, 'DONNÉES')") == [(ROWS,)]


def test_a_failed_script_says_which_statement_failed_and_what_ran_before_it(engine):
    """``con.execute`` of a script (and ``loomdb sql``) that failed mid-way raised the failing
    statement's error alone: which one it was, and what had run, was not said.  What the note
    says is what the engine did: committed, aborted, or (a statement loomdb refused before it
    reached the engine) still open."""
    errors = (LoomError, *engine.errors)
    engine.rows("CREATE TABLE ran (x INTEGER)")
    with pytest.raises(errors) as caught:
        front(engine, "INSERT INTO ran VALUES (1); SELECT x FROM nosuch_ran; SELECT 1")
    assert caught.value.__notes__ == [
        "statement 2 of 3 (SELECT x FROM nosuch_ran) failed; statement 1 before it ran and was "
        "committed; statement 3 did not run"
    ]
    assert engine.rows("SELECT count(*) FROM ran") == [(1,)]
    refused = "CREATE OR REPLACE INDEX ran_w ON ran USING dense (x) WITH (label = x)"
    with pytest.raises(LoomSyntaxError, match="OR REPLACE") as caught:
        front(engine, f"BEGIN; INSERT INTO ran VALUES (2); {refused}")
    assert caught.value.__notes__[0].endswith(
        "statements 1–2 ran in the transaction statement 1 began, not committed: it is still open"
    )
    front(engine, "COMMIT")
    assert engine.rows("SELECT count(*) FROM ran") == [(2,)]
    with pytest.raises(errors) as caught:
        front(engine, "BEGIN; INSERT INTO ran VALUES (3); SELECT x FROM nosuch_ran")
    assert caught.value.__notes__[0].endswith(
        "not committed: the error aborted it (ROLLBACK ends it)"
    )
    with pytest.raises(errors):  # aborted, as said
        front(engine, "SELECT 1")
    front(engine, "ROLLBACK")
    assert engine.rows("SELECT count(*) FROM ran") == [(2,)]
