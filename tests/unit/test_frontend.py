"""The SQL front-end: table-driven rewrites for both dialects, pass-through, splitting, errors."""

from __future__ import annotations

import json

import pytest
import sqlglot
from sqlglot import exp

from loomdb.errors import LoomNotFoundError, LoomOptionError, LoomStateError, LoomSyntaxError
from loomdb.frontend import process, rewrite, split, statements


class FakeCatalog:
    """Index ``wi`` (mlweaving, on t1); model ``m`` with features a and b"c."""

    def __init__(self, indexes=("wi",)):
        self.indexes = set(indexes)
        self.asked: list[str] = []

    def functions_schema(self):
        return None

    def index_name(self, name):
        self.asked.append(name)
        return name if name in self.indexes else None

    def engine_index(self, schema, name):
        return False

    def indexes_on(self, table):
        return ["wi"] if table == "t1" else []

    def indexes_in(self, schema):
        return ["wi"] if schema in (None, "main") else []

    def index_for(self, table, fmt):
        return "wi" if (table, fmt) == ("t1", "mlweaving") else None

    def columns(self, table):
        if table == "nosuch":
            raise LoomNotFoundError(f"cannot read source {table}", hint="create it")
        return ["a", 'b"c']

    def default_label(self, table):
        return "last_col"

    def model_features(self, model):
        if model != "m":
            raise LoomNotFoundError(f"model '{model}' does not exist")
        return ["a", 'b"c']


BOTH = ["duckdb", "postgres"]


def one(sql, dialect, catalog=None):
    out = process(sql, dialect, FakeCatalog() if catalog is None else catalog)
    assert len(out) == 1
    return out[0]


def call_args(sql, dialect):
    """The arguments of a generated ``SELECT loom_x('a', …)``, read back by sqlglot."""
    trees = sqlglot.parse(sql, read=dialect)
    assert len(trees) == 1, "a rewrite is exactly one statement"
    fn = trees[0].expressions[0]
    assert isinstance(fn, exp.Anonymous)
    return [None if isinstance(a, exp.Null) else a.this for a in fn.expressions]


# ---------------------------------------------------------------- rewrites (same in both dialects)

CI = "SELECT loom_create_index"
REWRITES = [
    (
        "CREATE INDEX wi ON s.t USING mlweaving (a, b) WITH (label = y, batch_size = 64)",
        f"""{CI}('wi', 's.t', 'y', '{{"format": "mlweaving", "features": ["a", "b"], """
        """"batch_size": 64}')""",
    ),
    (
        "create index if not exists i on t using TOC (a) with (label = lab, entropy = 'zstd')",
        f"""{CI}('i', 't', 'lab', '{{"format": "toc", "features": ["a"], "entropy": "zstd", """
        """"if_not_exists": true}')""",
    ),
    (
        "CREATE INDEX d ON t USING dense (x) WITH (label = y, seed = 7, nulls = skip)",
        f"""{CI}('d', 't', 'y', '{{"format": "dense", "features": ["x"], "seed": 7, """
        """"nulls": "skip"}')""",
    ),
    (
        'CREATE INDEX d ON "My T" USING dense ("Col A") WITH (label = y)',
        f"""{CI}('d', '"My T"', 'y', '{{"format": "dense", "features": ["Col A"]}}')""",
    ),
    (
        "CREATE INDEX d ON t USING dense WITH (label = y)",
        f"""{CI}('d', 't', 'y', '{{"format": "dense"}}')""",
    ),
    (
        "CREATE INDEX i ON create_mlweaving('t1')",
        f"""{CI}('i', 't1', 'last_col', '{{"format": "mlweaving"}}')""",
    ),
    (
        "CREATE INDEX IF NOT EXISTS i ON create_mlweaving('t1', 'label')",
        f"""{CI}('i', 't1', 'label', '{{"format": "mlweaving", "if_not_exists": true}}')""",
    ),
    (
        "CREATE INDEX m ON train_mlweaving('t1', 10, 4, 0.5)",
        """SELECT loom_train('m', 't1', NULL, '{"index": "wi", "model": "linear", """
        """"epochs": 10, "precision": 4, "lr": 0.5}')""",
    ),
    (
        "CREATE INDEX m ON train_mlweaving('t1', 3, 'adaptive')",
        """SELECT loom_train('m', 't1', NULL, '{"index": "wi", "model": "linear", """
        """"epochs": 3, "precision": "adaptive"}')""",
    ),
    ("DROP INDEX wi", "SELECT loom_drop_index('wi')"),
    ("DROP INDEX IF EXISTS wi", "SELECT loom_drop_index('wi')"),
    ('drop index "wi"', "SELECT loom_drop_index('wi')"),
    ("DROP INDEX CONCURRENTLY wi", "SELECT loom_drop_index('wi')"),
    ("REINDEX INDEX wi", "SELECT loom_reindex('wi')"),
    ('reindex index "wi"', "SELECT loom_reindex('wi')"),
    ("REINDEX INDEX CONCURRENTLY wi", "SELECT loom_reindex('wi')"),
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("sql", "expected"), REWRITES)
def test_loomdb_statements_are_rewritten(sql, dialect, expected):
    assert one(sql, dialect) == expected


@pytest.mark.parametrize("dialect", BOTH)
def test_every_index_method_the_hint_offers_makes_a_format_loom_create_index_takes(dialect):
    from loomdb.frontend.create_index import formats
    from loomdb.store import layout

    with pytest.raises(LoomSyntaxError) as offered:  # a typo: the hint lists the methods
        one("CREATE INDEX i ON t USING weaving (a) WITH (label = y)", dialect)
    methods = (offered.value.hint or "").split(" are ", 1)[1].split(", ")
    assert set(methods) == set(formats()) and "weave" in methods
    for method in methods:
        sql = one(f"CREATE INDEX i ON t USING {method} (a) WITH (label = y)", dialect)
        options = json.loads(call_args(sql, dialect)[3])
        layout.OPTIONS.parse(options)  # the format option accepts it
    weave = one("CREATE INDEX i ON t USING weave (a) WITH (label = y)", dialect)
    assert json.loads(call_args(weave, dialect)[3])["format"] == "mlweaving"


@pytest.mark.parametrize("dialect", BOTH)
def test_with_values_keep_their_json_types(dialect):
    sql = (
        "CREATE INDEX i ON t USING mlweaving (a) WITH (label = y, n = 7, lr = 0.5, e = 1e-3, "
        "neg = -2, on_ = true, off = FALSE, nulls = skip, s = 'it''s', d = NULL)"
    )
    options = json.loads(call_args(one(sql, dialect), dialect)[3])
    assert options == {
        "format": "mlweaving",
        "features": ["a"],
        "n": 7,
        "lr": 0.5,
        "e": 0.001,
        "neg": -2,
        "on_": True,
        "off": False,
        "nulls": "skip",
        "s": "it's",
        "d": None,
    }
    assert type(options["n"]) is int and type(options["lr"]) is float


@pytest.mark.parametrize("dialect", BOTH)
def test_unquoted_names_fold_as_the_engine_folds_them(dialect):
    """PostgreSQL folds unquoted names to lower case (psql's access methods see ``label = Y``
    as column ``y``); DuckDB keeps them as written and matches them whatever their case."""
    sql = (
        'CREATE INDEX Mixed_F ON S.T USING toc (A, "B") WITH (label = Y, nulls = SKIP, '
        "q = \"Q\", s = 'S')"
    )
    name, table, label, options = call_args(one(sql, dialect), dialect)
    folds = dialect == "postgres"
    assert (name, label) == (("mixed_f", "y") if folds else ("Mixed_F", "Y"))
    assert json.loads(options)["features"] == (["a", "B"] if folds else ["A", "B"])
    assert json.loads(options)["nulls"] == ("skip" if folds else "SKIP")
    assert (json.loads(options)["q"], json.loads(options)["s"]) == ("Q", "S")
    for statement in ("DROP INDEX Mixed_F", "REINDEX INDEX Mixed_F", "DROP INDEX Mixed_F, x"):
        catalog = FakeCatalog()
        try:
            process(statement, dialect, catalog)
        except LoomSyntaxError:  # DuckDB has no REINDEX of its own indexes
            assert (dialect, statement.split()[0]) == ("duckdb", "REINDEX")
        assert catalog.asked[0] == ("mixed_f" if folds else "Mixed_F")


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    ("sql", "options"),
    [
        ("CREATE INDEX m ON train_mlweaving('t1', 5)", {"epochs": 5}),
        (
            "CREATE INDEX m ON train_mlweaving('t1', 20, 2, 1e-2)",
            {"epochs": 20, "precision": 2, "lr": 0.01},
        ),
    ],
)
def test_train_options_round_trip_through_json(sql, dialect, options):
    name, source, label, text = call_args(one(sql, dialect), dialect)
    assert (name, source, label) == ("m", "t1", None)
    assert json.loads(text) == {"index": "wi", "model": "linear", **options}


#: the feature array infer_mlweaving passes loom_predict (PostgreSQL: as its exact type)
ROW = {"duckdb": '["a", "b""c"]', "postgres": 'CAST(ARRAY["a", "b""c"] AS DOUBLE PRECISION[])'}
INFER = [
    (
        "SELECT * FROM infer_mlweaving(m, 't1', 3)",
        "duckdb",
        """SELECT *, loom_predict('m', ["a", "b""c"]) AS prediction FROM t1""",
    ),
    (
        "SELECT * FROM infer_mlweaving(m, 't1', 3)",
        "postgres",
        f"""SELECT *, loom_predict('m', {ROW["postgres"]}) AS prediction FROM t1""",
    ),
    (
        "select * from infer_mlweaving('m', 's.t1')",
        "duckdb",
        """SELECT *, loom_predict('m', ["a", "b""c"]) AS prediction FROM s.t1""",
    ),
    (
        "SELECT count(*) FROM (SELECT * FROM infer_mlweaving(m, 't1', 2)) AS q",
        "postgres",
        f"""SELECT count(*) FROM (SELECT *, loom_predict('m', {ROW["postgres"]}) AS """
        """prediction FROM t1) AS q""",
    ),
    (
        "SELECT id, prediction FROM infer_mlweaving(m, 't1', 1) WHERE prediction > 0.5",
        "duckdb",
        """SELECT id, prediction FROM (SELECT *, loom_predict('m', ["a", "b""c"]) AS """
        """prediction FROM t1) AS infer_mlweaving WHERE prediction > 0.5""",
    ),
    (
        "CREATE TABLE p AS SELECT id, prediction FROM infer_mlweaving(m, 't1') AS x",
        "postgres",
        """CREATE TABLE p AS SELECT id, prediction FROM (SELECT *, loom_predict('m', """
        f"""{ROW["postgres"]}) AS prediction FROM t1) AS x""",
    ),
]


@pytest.mark.parametrize(("sql", "dialect", "expected"), INFER)
def test_infer_mlweaving_adds_a_prediction_column(sql, dialect, expected):
    assert one(sql, dialect) == expected


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    "wrapper",
    [
        "EXPLAIN ",
        "EXPLAIN ANALYZE VERBOSE ",
        "EXPLAIN (ANALYZE, COSTS off) ",
        "PREPARE q (int) AS ",
    ],
)
def test_infer_mlweaving_inside_explain_or_prepare_is_rewritten(wrapper, dialect):
    """sqlglot reads EXPLAIN and PREPARE as a word and a string: infer_mlweaving passed."""
    query = "SELECT * FROM infer_mlweaving(m, 't1') WHERE a > 1"
    assert one(wrapper + query, dialect) == wrapper + one(query, dialect)
    for other in ("EXPLAIN CREATE INDEX i ON t USING toc (a) WITH (label = y)", "EXPLAIN"):
        assert one(other, dialect) == other  # the engine's to judge


PREDICTING = """(SELECT *, loom_predict('m', {row}) AS prediction FROM t1{sample})"""


@pytest.mark.parametrize(
    ("sql", "dialect", "before", "clause", "after", "sample"),
    [
        # sqlglot's regenerated statement made PostgreSQL's prefix @ (absolute value) $a
        ("SELECT @ a, x::int", "postgres", "", " AS infer_mlweaving", " WHERE @ a > 1", ""),
        # and a DuckDB sample of 10 rows one of 10 percent's spelling (RESERVOIR (10 ROWS))
        ("SELECT p.x  ,  @a", "duckdb", "", " p", " -- note\nLIMIT 1", " TABLESAMPLE 10 ROWS"),
        (
            "SELECT /* keep */ count(*) FILTER (WHERE prediction > 0)",
            "postgres",
            "",
            " AS q(a, b, lab, pred)",
            "",
            " TABLESAMPLE BERNOULLI (50) REPEATABLE (7)",
        ),
        ("WITH c AS (SELECT 1) SELECT *", "duckdb", "c, ", " AS x", " USING (id)", ""),
    ],
)
def test_infer_mlweaving_keeps_the_rest_of_the_statement_as_written(
    sql, dialect, before, clause, after, sample
):
    """Only the infer_mlweaving(…) clause is replaced; every other token stays as written."""
    alias = clause.replace(" AS infer_mlweaving", "")
    join = " JOIN " if "USING" in after else ""
    call = f"infer_mlweaving(m, 't1'){alias}{sample}"
    statement = f"{sql} FROM {before}{join}{call}{after}".replace("c,  JOIN", "c JOIN")
    expected = statement.replace(call, PREDICTING.format(row=ROW[dialect], sample=sample) + clause)
    assert one(statement, dialect) == expected


# ---------------------------------------------------------------- pass-through

PASS_BOTH = [
    "SELECT 1",
    "select  a ,b from t where x = 'CREATE INDEX i ON t USING mlweaving (a)'",
    "SELECT 'infer_mlweaving(m, 1)' AS s",
    "CREATE TABLE t (a INTEGER, b DOUBLE PRECISION)",
    "CREATE TABLE dense (a INTEGER)",
    "INSERT INTO t VALUES (1, 2.5)",
    "CREATE INDEX bt ON t (a)",
    "CREATE UNIQUE INDEX bt ON t (a)",
    "CREATE INDEX art ON t USING art (a)",
    "CREATE INDEX i ON t USING btree (a) WHERE kind = 'toc'",
    "DROP INDEX other",
    "DROP INDEX IF EXISTS gone",
    "DROP TABLE wi",
    "SELECT loom_train('m', 't', 'y', '{\"epochs\": 1}')",
    "UPDATE t SET a = a + 1 WHERE b IS NOT NULL",
]
PASS_ONE = [
    ("COPY t FROM STDIN WITH (FORMAT csv)", "postgres"),
    ("COPY t TO 'out.parquet' (FORMAT parquet)", "duckdb"),
    ("CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql", "postgres"),
    ("DO $body$ BEGIN PERFORM 1; END $body$", "postgres"),
    ("CREATE TABLE t AS FROM 'x.csv'", "duckdb"),
    ("PRAGMA version", "duckdb"),
    ("SELECT * FROM read_parquet('x/*.parquet') USING SAMPLE 10%", "duckdb"),
    ("SELECT a::text, E'a\\nb' FROM t", "postgres"),
    ("VACUUM ANALYZE t", "postgres"),
    ("INSTALL httpfs", "duckdb"),
    ("REINDEX INDEX other", "postgres"),
    ("REINDEX TABLE t2", "postgres"),  # no loomdb index on it
    ("REINDEX (VERBOSE) SCHEMA s", "postgres"),
    ("ALTER INDEX other RENAME TO x", "postgres"),
    ("COMMENT ON INDEX other IS 'x'", "duckdb"),
]


@pytest.mark.parametrize(("sql", "dialect"), [(s, d) for s in PASS_BOTH for d in BOTH] + PASS_ONE)
def test_other_statements_pass_through_unchanged(sql, dialect):
    assert one(sql, dialect) == sql


@pytest.mark.parametrize("dialect", BOTH)
def test_catalog_is_only_asked_about_index_statements(dialect):
    catalog = FakeCatalog()
    process("SELECT 1; DROP TABLE wi; DROP INDEX x; REINDEX INDEX wi", dialect, catalog)
    assert catalog.asked == ["x", "wi"]


class EngineIndexCatalog(FakeCatalog):
    """The engine has an index ``s.wi`` of its own beside loomdb's ``wi``."""

    def engine_index(self, schema, name):
        return (schema, name) == ("s", "wi")


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    "sql",
    [
        "DROP INDEX main.wi",
        "DROP INDEX IF EXISTS main.wi",
        'DROP INDEX "main".wi, x',
        "REINDEX INDEX main.wi",
        "REINDEX INDEX CONCURRENTLY db.main.wi",
    ],
)
def test_a_schema_qualified_loomdb_index_is_refused_with_the_statement_to_write(sql, dialect):
    """DROP INDEX main.w reached the engine: "does not exist", or with IF EXISTS nothing done
    and no word said; a loomdb index belongs to no schema."""
    verb = " ".join(sql.split()[:2])
    with pytest.raises(LoomSyntaxError, match="loomdb index wi belongs to no schema") as caught:
        one(sql, dialect)
    assert caught.value.hint == f"write {verb} wi"
    for engines in ("DROP INDEX s.wi", "DROP INDEX IF EXISTS s.wi"):  # the engine's own index
        assert one(engines, dialect, EngineIndexCatalog()) == engines


class TwoCatalog(FakeCatalog):
    """Indexes a and b, both on t1, in schema main (whatever its case: DuckDB's catalog)."""

    def indexes_on(self, table):
        return ["a", "b"] if table == "t1" else []

    def indexes_in(self, schema):
        return ["a", "b"] if schema is None or schema.lower() == "main" else []


TWO = TwoCatalog(("a", "b"))
NONE = type("NoIndexes", (FakeCatalog,), {"indexes_in": lambda s, schema: []})(())


@pytest.mark.parametrize(
    ("sql", "catalog", "expected"),
    [
        ("REINDEX TABLE t1", FakeCatalog(), "SELECT loom_reindex('wi')"),
        ("REINDEX TABLE CONCURRENTLY t1", FakeCatalog(), "SELECT loom_reindex('wi')"),
        ("REINDEX TABLE t2", FakeCatalog(), "no loomdb index to rebuild"),
        ("REINDEX TABLE t1", TWO, "SELECT loom_reindex('a');\nSELECT loom_reindex('b')"),
        ("REINDEX INDEX other", FakeCatalog(), "names no loomdb index"),
        ("REINDEX SCHEMA main", FakeCatalog(), "SELECT loom_reindex('wi')"),
        ("REINDEX SCHEMA MAIN", TWO, "SELECT loom_reindex('a');\nSELECT loom_reindex('b')"),
        ("REINDEX SCHEMA CONCURRENTLY main", FakeCatalog(), "SELECT loom_reindex('wi')"),
        ("REINDEX SCHEMA s", FakeCatalog(), "no loomdb index to rebuild in schema s"),
        ("REINDEX DATABASE", TWO, "SELECT loom_reindex('a');\nSELECT loom_reindex('b')"),
        ("REINDEX DATABASE x", FakeCatalog(), "write REINDEX DATABASE"),
        ("REINDEX DATABASE", NONE, "no loomdb index to rebuild in this database"),
        ("REINDEX SYSTEM", FakeCatalog(), "names no loomdb index"),
        ("REINDEX (VERBOSE) TABLE t1", FakeCatalog(), "SELECT loom_reindex('wi')"),
        ("REINDEX (VERBOSE) INDEX other", FakeCatalog(), "names no loomdb index"),
    ],
)  # fmt: skip
def test_duckdb_reindex_rebuilds_the_loomdb_indexes_it_names_and_refuses_the_rest(
    sql, catalog, expected
):
    """DuckDB has no REINDEX: every form was its parser's error, REINDEX TABLE t too; a table
    with several loomdb indexes was refused (PostgreSQL's REINDEX TABLE rebuilt all of them),
    and REINDEX SCHEMA / DATABASE were.  Each rebuild is a statement of its own."""
    if expected.startswith("SELECT"):
        assert one(sql, "duckdb", catalog) == expected
        return
    with pytest.raises(LoomSyntaxError, match="DuckDB has no REINDEX") as caught:
        one(sql, "duckdb", catalog)
    assert expected in str(caught.value) + (caught.value.hint or "")
    assert caught.value.hint


@pytest.mark.parametrize(
    "sql", ["REINDEX TABLE t1", "REINDEX (VERBOSE) TABLE t1", "REINDEX TABLE /* $loomdb$ */ t1"]
)
def test_postgres_reindex_table_also_rebuilds_the_loomdb_indexes_on_it(sql):
    """REINDEX TABLE t1 passed to PostgreSQL, which rebuilds the indexes it holds but not
    loom_create_index's on t1: its statement and their loom_reindex in one DO block."""
    block = one(sql, "postgres", TWO)
    assert block.startswith("DO $loomdb")
    body = block[block.index("$", 3) :]
    tag = body[: body.index("$", 1) + 1]
    assert body.endswith(tag) and tag not in body[len(tag) : -len(tag)]
    assert [s.strip() for s in body[len(tag) : -len(tag)].split(";")] == [
        f"BEGIN\n{sql}",
        "PERFORM loom_reindex('a')",
        "PERFORM loom_reindex('b')",
        "END",
    ]


class SchemaCatalog(FakeCatalog):
    """FakeCatalog whose loomdb functions are in schema ``lo"om`` (PostgreSQL: the
    extension's), where every rewritten call must name them."""

    def functions_schema(self):
        return 'lo"om'


def _loom_functions(sql, dialect):
    """Each loomdb function a statement calls: ``(its schema identifier or None, name)``; a
    ``DO`` block's ``PERFORM`` lines read as the SELECTs they are."""
    if sql.startswith("DO "):
        lines = [ln for ln in sql.splitlines() if ln.startswith("PERFORM ")]
        return [c for ln in lines for c in _loom_functions("SELECT " + ln[8:-1], dialect)]
    tree = sqlglot.parse_one(sql, read=dialect)
    calls = [f for f in tree.find_all(exp.Anonymous) if f.name.startswith("loom_")]
    return [(f.parent.this if isinstance(f.parent, exp.Dot) else None, f.name) for f in calls]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    "sql, function",
    [
        ("CREATE INDEX i ON t1 USING toc (a) WITH (label = y)", "loom_create_index"),
        ("DROP INDEX wi", "loom_drop_index"),
        ("REINDEX INDEX wi", "loom_reindex"),
        ("REINDEX TABLE t1", "loom_reindex"),
        ("CREATE INDEX i ON create_mlweaving('t1')", "loom_create_index"),
        ("CREATE INDEX m2 ON train_mlweaving('t1', 3)", "loom_train"),
        ("SELECT * FROM infer_mlweaving(m, 't1')", "loom_predict"),
        ("SELECT p.a FROM infer_mlweaving(m, 't1') AS p JOIN u ON true", "loom_predict"),
    ],
)
def test_rewritten_calls_name_the_schema_of_loomdbs_functions(sql, function, dialect):
    """PostgreSQL: a rewritten statement called loom_drop_index(…), loom_reindex(…)… by name
    alone, so a function of that signature another role made in a schema earlier on the
    caller's search_path ran instead, as the caller: each call names the schema the catalog
    gives, quoted."""
    called = _loom_functions(one(sql, dialect, SchemaCatalog()), dialect)
    assert [name for _, name in called] == [function]
    schema = called[0][0]
    assert isinstance(schema, exp.Identifier) and schema.quoted
    assert schema.name == SchemaCatalog().functions_schema()
    # where the catalog names no schema (DuckDB), a call is the function's name alone
    assert _loom_functions(one(sql, dialect), dialect) == [(None, function)]


@pytest.mark.parametrize(
    "sql", ["REINDEX TABLE CONCURRENTLY t1", "REINDEX (CONCURRENTLY) TABLE t1"]
)
def test_postgres_reindex_table_concurrently_of_loomdb_indexes_is_refused(sql):
    with pytest.raises(LoomSyntaxError, match="cannot rebuild loomdb's indexes on it") as caught:
        one(sql, "postgres")
    assert "REINDEX TABLE t1 without CONCURRENTLY" in (caught.value.hint or "")
    assert "REINDEX INDEX wi" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("sql", "schema"),
    [
        ("REINDEX SCHEMA main", "main"),
        ("REINDEX SCHEMA MAIN", "main"),  # folded, as PostgreSQL reads it
        ("REINDEX (VERBOSE) SCHEMA main", "main"),
        ("REINDEX DATABASE loomtest", None),
        ("REINDEX DATABASE", None),
    ],
)
def test_postgres_reindex_schema_or_database_also_rebuilds_the_loomdb_indexes_in_it(sql, schema):
    """REINDEX SCHEMA/DATABASE passed to PostgreSQL, which rebuilds the indexes it holds but
    not loom_create_index's: its statement (it cannot run in a transaction block), then their
    loom_reindex in one DO block, each run on its own."""
    asked: list[str | None] = []

    class Asked(TwoCatalog):
        def indexes_in(self, wanted):
            asked.append(wanted)
            return super().indexes_in(wanted)

    statement, block = split(one(sql, "postgres", Asked(("a", "b"))), "postgres")
    assert statement == sql and asked == [schema]
    assert block.startswith("DO $loomdb$") and block.endswith("$loomdb$")
    assert [s.strip() for s in block.removeprefix("DO $loomdb$").split(";")] == [
        "BEGIN\nPERFORM loom_reindex('a')",
        "PERFORM loom_reindex('b')",
        "END\n$loomdb$",
    ]


@pytest.mark.parametrize(
    "sql", ["REINDEX SCHEMA s", "REINDEX SYSTEM", "REINDEX SYSTEM loomtest", "REINDEX DATABASE"]
)
def test_postgres_reindex_of_no_loomdb_index_passes(sql):
    """Schema s holds no loomdb index, no loomdb index is on a system catalog."""
    assert one(sql, "postgres", NONE if sql == "REINDEX DATABASE" else FakeCatalog()) == sql


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("REINDEX SCHEMA CONCURRENTLY main", "SCHEMA main"),
        ("REINDEX (CONCURRENTLY) DATABASE x", "DATABASE x"),
    ],
)
def test_postgres_reindex_schema_concurrently_of_loomdb_indexes_is_refused(sql, what):
    with pytest.raises(LoomSyntaxError, match="cannot rebuild loomdb's indexes in") as caught:
        one(sql, "postgres")
    assert f"REINDEX {what} without CONCURRENTLY" in (caught.value.hint or "")
    assert "REINDEX INDEX wi" in (caught.value.hint or "")


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    ("sql", "refused", "hinted"),
    [
        ("ALTER INDEX wi RENAME TO x", "cannot be renamed", "build it again as x"),
        ('ALTER INDEX IF EXISTS s.wi RENAME TO "X y"', "cannot be renamed", 'as "X y"'),
        ("ALTER INDEX wi SET (batch_size = 8)", "cannot be altered", "DROP INDEX wi and"),
        ("COMMENT ON INDEX wi IS 'x'", "takes no COMMENT", "its source table"),
    ],
)
def test_alter_or_comment_on_a_loomdb_index_is_refused(dialect, sql, refused, hinted):
    """They reached the engine: DuckDB's parser error, or "does not exist"."""
    with pytest.raises(LoomSyntaxError, match=f"loomdb index wi {refused}") as caught:
        one(sql, dialect)
    assert hinted in (caught.value.hint or "")
    assert one("ALTER INDEX s.wi RENAME TO x", dialect, EngineIndexCatalog()).startswith("ALTER")


def test_postgres_folds_only_the_ascii_letters_of_an_unquoted_name():
    """PostgreSQL folds A-Z alone (DONNÉES is table donnÉes); loomdb folded every letter, and
    took no unquoted name with a letter beyond ASCII for a table's (a query, refused)."""
    from loomdb.store.names import is_table_name, relation

    out = one("CREATE INDEX ix ON DONNÉES USING toc (a) WITH (label = ÉTIQUETTE)", "postgres")
    assert call_args(out, "postgres")[1:3] == ["donnÉes", "Étiquette"]
    assert is_table_name("DONNÉES.ÉTÉ")
    assert relation("DONNÉES.ÉTÉ", "postgres") == '"donnÉes"."ÉtÉ"'
    assert relation("DONNÉES", "duckdb") == '"DONNÉES"'


def test_an_unquoted_name_part_is_ascii_letters_digits_underscores_dollars_or_past_ascii():
    """Every character, alone and after a letter: the name classes are written as the ASCII
    characters they leave out (a range to U+10FFFF took 10 ms to compile at every import)."""
    from loomdb.store.names import is_table_name

    for point in range(0x110000):
        c = chr(point)
        first = point > 0x7F or c == "_" or ("a" <= c.lower() <= "z")
        later = first or c == "$" or "0" <= c <= "9"
        assert is_table_name(f"s.{c}t") is first, hex(point)  # (inside: no strip() takes it)
        assert is_table_name(f"s.t{c}u") is (later or c == "."), hex(point)  # s.t.u: 3 parts


@pytest.mark.parametrize("dialect", BOTH)
def test_without_a_catalog_drop_and_reindex_pass_through(dialect):
    assert process("DROP INDEX wi; REINDEX INDEX wi", dialect) == [
        "DROP INDEX wi",
        "REINDEX INDEX wi",
    ]
    assert process("CREATE INDEX i ON t USING toc (a) WITH (label = y)", dialect)[0].startswith(CI)


def test_statements_are_rewritten_one_at_a_time():
    catalog = FakeCatalog(indexes=())
    pending = statements("SELECT 1; DROP INDEX later", "duckdb", catalog)
    assert next(pending) == "SELECT 1"
    catalog.indexes.add("later")  # what running the first statement could have done
    assert next(pending) == "SELECT loom_drop_index('later')"


PLAIN = [  # one statement each, given back as split and rewrite would, whichever way it goes
    "SELECT 1",
    "  select 'a' ,\n b from t \n\n",
    "SELECT 'unterminated",
    "",
    " \n ",
    'SELECT "index" FROM t',  # names INDEX: tokenized, passes through all the same
    "SELECT 'ındex'",  # a dotless i: INDEX once case folded
    "SELECT * FROM infer_mlweaving(m, 't1', 3)",
    "SELECT $$ a $$, E'x' FROM t",
    "BEGIN",
    "CREATE INDEX wi ON t USING toc (a) WITH (label = y)",
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize("sql", PLAIN)
def test_a_plain_statement_comes_out_as_split_and_rewrite_give_it(sql, dialect):
    catalog = FakeCatalog()
    slow = [rewrite(s, dialect, FakeCatalog()) for s in split(sql, dialect)]
    assert list(statements(sql, dialect, catalog)) == slow


@pytest.mark.parametrize("dialect", BOTH)
def test_a_plain_statement_is_not_tokenized(dialect, monkeypatch):
    """sqlglot's tokenizer costs milliseconds on a long statement: one that cannot be
    loomdb's (no semicolon, comment, backslash, INDEX or infer_mlweaving) skips it."""
    import importlib

    rewrite_module = importlib.import_module("loomdb.frontend.rewrite")
    script = importlib.import_module("loomdb.frontend.script")

    def refuse(text, dialect):
        raise AssertionError(f"tokenized: {text!r}")

    monkeypatch.setattr(script, "tokenize", refuse)
    monkeypatch.setattr(rewrite_module, "tokenize", refuse)
    long = "SELECT " + " + ".join(f"{i}.5e-01 * CAST(x{i} AS FLOAT8)" for i in range(64))
    assert list(statements(long + " FROM t", dialect)) == [long + " FROM t"]
    for tokenized in ("SELECT 1;", "SELECT 1 -- c", "DROP INDEX wi", "SELECT E'\\n'"):
        with pytest.raises(AssertionError, match="tokenized"):
            list(statements(tokenized, dialect, FakeCatalog()))


# ---------------------------------------------------------------- splitting

SCRIPTS = [
    ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
    ("SELECT 'a;b';;\n ; SELECT \"x;y\" FROM t", ["SELECT 'a;b'", 'SELECT "x;y" FROM t']),
    ("-- lead; comment\nSELECT 1 -- trailing; comment\n;", ["SELECT 1"]),
    ("SELECT /* a; b */ 1; /* only a comment; */", ["SELECT /* a; b */ 1"]),
    (
        "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql; SELECT 2",
        ["CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql", "SELECT 2"],
    ),
    ("SELECT $t$ a; $$ b; $t$; SELECT 2", ["SELECT $t$ a; $$ b; $t$", "SELECT 2"]),
    ("\\echo hello; world\nSELECT 1;\n  \\timing on\nSELECT 2", ["SELECT 1", "SELECT 2"]),
    ("SELECT 1\n\\g\nSELECT 2", ["SELECT 1", "SELECT 2"]),
    (
        "SELECT 'a\n\\not a meta-command'; SELECT 2",
        ["SELECT 'a\n\\not a meta-command'", "SELECT 2"],
    ),
    ("SELECT $$\n\\also not;\n$$", ["SELECT $$\n\\also not;\n$$"]),
    ("SELECT 1; SELECT 'unterminated; x", ["SELECT 1; SELECT 'unterminated; x"]),
    ("  \n-- nothing\n", []),
    # a meta-command that only shows something, in a statement, leaves it whole (as in psql)
    ("DELETE FROM t\n\\echo deleting\nWHERE x = 1;", ["DELETE FROM t\n\nWHERE x = 1"]),
    ("SELECT 1;\n\\dt+ t*\n\\x auto\n\\pset format aligned\nSELECT 2", ["SELECT 1", "SELECT 2"]),
    ("\\set ON_ERROR_STOP on\n\\set ON_ERROR_STOP '1'\nSELECT 1", ["SELECT 1"]),
    ("\\echo a \\\\ SELECT 1; SELECT 2\nSELECT 3", ["SELECT 1", "SELECT 2\nSELECT 3"]),
    ("SELECT 1 \n\\gx\n", ["SELECT 1"]),
    # \q ends the script (an extension script's first line, as psql reads it)
    ('\\echo Use "CREATE EXTENSION x" to load this file. \\quit\nDROP TABLE t;', []),
    ("SELECT 1;\n\\q\nDROP TABLE t;", ["SELECT 1"]),
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("script", "expected"), SCRIPTS)
def test_split_keeps_quotes_and_comments_and_skips_display_meta_commands(script, dialect, expected):
    assert split(script, dialect) == expected


REFUSED_META = [  # (script, line, the command as the error names it, a word of the hint)
    ("SELECT 1;\n\\c otherdb\nSELECT 2;", 2, "\\c otherdb", "one script per database"),
    ("SELECT 1;\n  \\connect otherdb\n", 2, "\\connect otherdb", "one script per database"),
    ("\\copy t FROM 'a.csv' CSV\nSELECT count(*) FROM t;", 1, "\\copy t", "loom_load"),
    ("SELECT 1;\n\n\\i more.sql", 3, "\\i more.sql", "-f"),
    ("\\include more.sql", 1, "\\include more.sql", "-f"),
    ("\\set n 10\nSELECT :n;", 1, "\\set n", "psql variables"),
    ("\\set ON_ERROR_STOP off\nSELECT 1;", 1, "\\set ON_ERROR_STOP", "--keep-going"),
    ("SELECT 'SELECT 1'\n\\gexec", 2, "\\gexec", "statements"),
    ("SELECT 1\n\\g out.txt", 2, "\\g out.txt", "> file"),
    ("SELECT 1;\n\\g", 2, "\\g", "again"),
    ("SELECT 1\n\\q", 2, "\\q", "end the statement"),
    ("\\if :x\nDROP TABLE t;\n\\endif", 1, "\\if :x", "branch"),
    ("\\echo hi \\o out.txt\nSELECT 1;", 1, "\\o out.txt", "> file"),
    ("SELECT 1;\n\\! rm -rf data\n", 2, "\\! rm", "psql"),
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("script", "line", "command", "hint"), REFUSED_META)
def test_a_meta_command_that_acts_is_refused_naming_its_line(script, line, command, hint, dialect):
    """psql's meta-commands were all dropped: a script's \\c, \\copy, \\i or \\set was skipped
    and the rest ran on the wrong database, or on data never loaded."""
    with pytest.raises(LoomSyntaxError) as e:
        split(script, dialect)
    assert e.value.message.startswith(f"line {line}: psql's meta-command {command} ")
    assert hint in (e.value.hint or "")


def test_process_splits_then_rewrites():
    script = "\\echo go\nCREATE INDEX wi ON t USING toc (a) WITH (label = y);\nDROP INDEX wi;"
    assert process(script, "postgres", FakeCatalog()) == [
        f"""{CI}('wi', 't', 'y', '{{"format": "toc", "features": ["a"]}}')""",
        "SELECT loom_drop_index('wi')",
    ]


@pytest.mark.parametrize("dialect", BOTH)
def test_a_number_that_begins_with_its_point_is_no_qualified_name(dialect):
    sql = "CREATE INDEX i ON t USING toc (a) WITH (label = y, lr = .5, m = -.25)"
    options = json.loads(call_args(one(sql, dialect), dialect)[3])
    assert (options["lr"], options["m"]) == (0.5, -0.25)


# ---------------------------------------------------------------- hostile names

EVIL = "x'); DROP TABLE t; --"
EVIL_SQL = EVIL.replace("'", "''")  # as a SQL string literal's content
INJECTIONS = [
    (f'CREATE INDEX "{EVIL}" ON t USING toc (a) WITH (label = y)', 0),
    (f"CREATE INDEX i ON t USING toc (a) WITH (label = '{EVIL_SQL}')", 2),
    (f"CREATE INDEX i ON create_mlweaving('{EVIL_SQL}')", 1),
    (f"CREATE INDEX i ON create_mlweaving('t1', '{EVIL_SQL}')", 2),
    (f'DROP INDEX "{EVIL}"', 0),
    (f'REINDEX INDEX "{EVIL}"', 0),
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("sql", "position"), INJECTIONS)
def test_hostile_names_become_escaped_literals(sql, dialect, position):
    out = one(sql, dialect, FakeCatalog(indexes=(EVIL,)))
    assert call_args(out, dialect)[position] == EVIL  # one statement, the name intact


@pytest.mark.parametrize("dialect", BOTH)
def test_hostile_option_values_stay_inside_the_json_literal(dialect):
    sql = f"CREATE INDEX i ON t USING toc (a) WITH (label = y, note = '{EVIL_SQL}')"
    options = json.loads(call_args(one(sql, dialect), dialect)[3])
    assert options["note"] == EVIL


@pytest.mark.parametrize("dialect", BOTH)
def test_hostile_infer_arguments(dialect):
    out = one(f"SELECT * FROM infer_mlweaving(m, 't1', 1) AS \"{EVIL}\"", dialect)
    assert len(sqlglot.parse(out, read=dialect)) == 1
    with pytest.raises(LoomSyntaxError, match="table name"):
        one(f"SELECT * FROM infer_mlweaving(m, '{EVIL_SQL}')", dialect)


# ---------------------------------------------------------------- errors

ERRORS = [
    ("CREATE INDEX i ON t USING mlweaving (a, b)", LoomSyntaxError, "label"),
    ("CREATE INDEX i ON t USING mlweaving (a, b WITH (label = y)", LoomSyntaxError, "cannot read"),
    ("CREATE INDEX i ON t USING mlweaving a, b", LoomSyntaxError, "first word"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label)", LoomSyntaxError, "cannot read"),
    ("CREATE INDEX ON t USING toc (a) WITH (label = y)", LoomSyntaxError, "needs a name"),
    ("CREATE UNIQUE INDEX i ON t USING toc (a) WITH (label = y)", LoomSyntaxError, "UNIQUE"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = y) WHERE a > 0", LoomSyntaxError, "WHERE"),
    ("CREATE INDEX i ON t USING toc (a) INCLUDE (b) WITH (label = y)", LoomSyntaxError, "INCLUDE"),
    ("CREATE INDEX i ON t USING toc (a DESC) WITH (label = y)", LoomSyntaxError, "DESC"),
    ("CREATE INDEX i ON t USING toc ((a + 1)) WITH (label = y)", LoomSyntaxError, "expression"),
    ("CREATE INDEX i ON t USING toc (t.a) WITH (label = y)", LoomSyntaxError, "expression"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = y, k = 1, K = 2)", LoomSyntaxError, "twice"),
    (
        "CREATE INDEX i ON t USING toc (a) WITH (label = y, format = dense)",
        LoomSyntaxError,
        "format",
    ),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = 5)", LoomSyntaxError, "column name"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = y, k = a + 1)", LoomSyntaxError, "constants"),
    ("CREATE INDEX i ON create_mlweaving()", LoomSyntaxError, "1 to 2 arguments"),
    ("CREATE INDEX i ON create_mlweaving('t1', 'y', 3)", LoomSyntaxError, "1 to 2 arguments"),
    ("CREATE INDEX m ON train_mlweaving('t1', 1, 2, 0.1, 9)", LoomSyntaxError, "1 to 4"),
    ("CREATE INDEX IF NOT EXISTS m ON train_mlweaving('t1', 1)", LoomSyntaxError, "arguments only"),
    ("CREATE INDEX m ON train_mlweaving('t1', a + 1)", LoomSyntaxError, "epochs"),
    ("CREATE INDEX m ON train_mlweaving('t2', 5)", LoomNotFoundError, "no mlweaving index"),
    ("SELECT * FROM infer_mlweaving(nosuch, 't1', 3)", LoomNotFoundError, "nosuch"),
    ("SELECT * FROM infer_mlweaving(m, 'nosuch')", LoomNotFoundError, "source nosuch"),
    ("SELECT * FROM infer_mlweaving(m)", LoomSyntaxError, "2 or 3 arguments"),
    ("SELECT infer_mlweaving(m, 't1')", LoomSyntaxError, "table function"),
    ("SELECT * FROM infer_mlweaving(m, 't1' WHERE", LoomSyntaxError, "cannot read"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = y, checksum = on)", LoomSyntaxError, "read"),
    ("DROP INDEX wi CASCADE", LoomSyntaxError, "CASCADE"),
    ("DROP INDEX IF EXISTS other, wi", LoomSyntaxError, "several indexes and wi"),
    ("CREATE OR REPLACE INDEX i ON t USING toc (a) WITH (label = y)", LoomSyntaxError, "REPLACE"),
    ("CREATE TEMP INDEX i ON t USING toc (a) WITH (label = y)", LoomSyntaxError, "TEMPORARY"),
    ('CREATE INDEX i ON t USING toc (a) WITH (label = "")', LoomSyntaxError, "cannot read"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = t.y)", LoomSyntaxError, "qualified"),
    ("CREATE INDEX i ON t USING toc (a) WITH (label = y, a.b = 1)", LoomSyntaxError, "qualified"),
    ("CREATE INDEX i ON t USING weaving (a) WITH (label = y)", LoomSyntaxError, "mlweaving"),
    ("CREATE INDEX i ON t USING hnsw (a) WITH (label = y)", LoomSyntaxError, "dense, mlweaving"),
]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(("sql", "error", "match"), ERRORS)
def test_malformed_loomdb_statements_raise(sql, dialect, error, match):
    with pytest.raises(error, match=match) as caught:
        one(sql, dialect)
    assert caught.value.hint or error is LoomNotFoundError


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    "sql",
    [
        "CREATE INDEX i ON create_mlweaving('t1')",
        "CREATE INDEX m ON train_mlweaving('t1', 3)",
        "SELECT * FROM infer_mlweaving(m, 't1')",
    ],
)
def test_doppio_forms_that_look_things_up_need_a_catalog(sql, dialect):
    with pytest.raises(LoomStateError, match="catalog"):
        rewrite(sql, dialect)


def test_unknown_dialect_is_refused():
    with pytest.raises(LoomOptionError, match="dialect"):
        rewrite("SELECT 1", "mysql")
