"""The SQL front-end: table-driven rewrites for both dialects, and pass-through."""

from __future__ import annotations

import json

import pytest

from loomdb.errors import LoomNotFoundError, LoomSyntaxError
from loomdb.frontend import process


class FakeCatalog:
    def is_index(self, name):
        return name == "wi"

    def index_for(self, table, fmt):
        return "wi" if table == "t1" else None

    def default_label(self, table):
        return "last_col"

    def model_features(self, model):
        if model != "m":
            raise LoomNotFoundError(f"model '{model}' does not exist")
        return ["a", 'b"c']


CAT = FakeCatalog()
BOTH = ["duckdb", "postgres"]


def one(sql, dialect, catalog=CAT):
    out = process(sql, dialect, catalog)
    assert len(out) == 1
    return out[0]


def call_args(sql):
    """The arguments of a rewritten ``SELECT loom_x('a', …)``, parsed back."""
    import sqlglot

    fn = sqlglot.parse_one(sql).expressions[0]
    return [None if a.sql() == "NULL" else a.this for a in fn.expressions]


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    ("sql", "name", "args", "options"),
    [
        (
            "CREATE INDEX wi ON s.t USING mlweaving (a, b) WITH (label = y, batch_size = 64)",
            "loom_create_index",
            ["wi", "s.t", "y"],
            {"format": "mlweaving", "features": ["a", "b"], "batch_size": 64},
        ),
        (
            "create index if not exists i on t using toc (a) with (label = lab, entropy = 'zstd')",
            "loom_create_index",
            ["i", "t", "lab"],
            {"format": "toc", "features": ["a"], "entropy": "zstd", "if_not_exists": True},
        ),
        (
            "CREATE INDEX d ON t USING dense (x) WITH (label = y, seed = 7, nulls = skip)",
            "loom_create_index",
            ["d", "t", "y"],
            {"format": "dense", "features": ["x"], "seed": 7, "nulls": "skip"},
        ),
        (
            "CREATE INDEX i ON create_mlweaving('t1')",
            "loom_create_index",
            ["i", "t1", "last_col"],
            {"format": "mlweaving"},
        ),
        (
            "CREATE INDEX i ON create_mlweaving('t1', 'label')",
            "loom_create_index",
            ["i", "t1", "label"],
            {"format": "mlweaving"},
        ),
        (
            "CREATE INDEX m ON train_mlweaving('t1', 10, 4, 0.5)",
            "loom_train",
            ["m", "t1", None],
            {"index": "wi", "model": "linear", "epochs": 10, "precision": 4, "lr": 0.5},
        ),
    ],
)
def test_rewrites(dialect, sql, name, args, options):
    out = one(sql, dialect)
    assert out.startswith(f"SELECT {name}(")
    values = call_args(out)
    assert values[:3] == args
    assert json.loads(values[3]) == options


@pytest.mark.parametrize("dialect", BOTH)
def test_drop_and_reindex_only_loom_indexes(dialect):
    assert one("DROP INDEX wi", dialect) == "SELECT loom_drop_index('wi')"
    assert one("DROP INDEX IF EXISTS wi", dialect) == "SELECT loom_drop_index('wi')"
    assert one("DROP INDEX other", dialect) == "DROP INDEX other"
    assert one("REINDEX INDEX wi", dialect) == "SELECT loom_reindex('wi')"
    assert one("REINDEX INDEX other", dialect) == "REINDEX INDEX other"


@pytest.mark.parametrize(("dialect", "array"), [("duckdb", "["), ("postgres", "array[")])
def test_infer_mlweaving(dialect, array):
    out = one("SELECT * FROM infer_mlweaving(m, 't1', 3)", dialect)
    inner = f'SELECT *, loom_predict(\'m\', {array}"a", "b""c"]) AS prediction FROM t1'
    assert out == f"SELECT * FROM ({inner}) AS infer_mlweaving"
    out = one("SELECT count(*) FROM (SELECT * FROM infer_mlweaving(m, 't1', 3)) AS q", dialect)
    assert out == f"SELECT count(*) FROM (SELECT * FROM ({inner}) AS infer_mlweaving) AS q"
    with pytest.raises(LoomNotFoundError):
        one("SELECT * FROM infer_mlweaving(nosuch, 't1', 3)", dialect)


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "SELECT 'CREATE INDEX x ON t USING mlweaving' AS s",
        "CREATE TABLE t (a INTEGER, b DOUBLE PRECISION)",
        "INSERT INTO t VALUES (1, 2.5)",
        "CREATE INDEX bt ON t (a)",
        "CREATE INDEX gin_i ON t USING gin (a)",
        "SELECT loom_train('m', 't', 'y', '{\"epochs\": 1}')",
    ],
)
def test_other_statements_pass_through_unchanged(dialect, sql):
    assert one(sql, dialect) == sql


def test_engine_specific_syntax_passes_through_unchanged():
    fn = "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql"
    assert process(f"{fn}; SELECT 2", "postgres") == [fn, "SELECT 2"]
    assert one("CREATE TABLE t AS FROM 'x.csv'", "duckdb") == "CREATE TABLE t AS FROM 'x.csv'"
    assert one("PRAGMA version", "duckdb") == "PRAGMA version"
    assert one("COPY t FROM STDIN", "postgres") == "COPY t FROM STDIN"


def test_script_splitting_keeps_quotes_and_drops_meta_commands():
    script = "\\echo hello\nSELECT 'a;b';\n-- a comment; still a comment\nSELECT 2;;"
    assert process(script, "postgres") == ["SELECT 'a;b'", "SELECT 2"]


@pytest.mark.parametrize("dialect", BOTH)
def test_injection_in_names_is_escaped(dialect):
    out = one('CREATE INDEX "x\'); DROP TABLE t; --" ON t USING toc (a) WITH (label = y)', dialect)
    assert call_args(out)[0] == "x'); DROP TABLE t; --"
    assert out.count("SELECT") == 1 and "DROP TABLE t; --'" in out


@pytest.mark.parametrize("dialect", BOTH)
def test_malformed_loom_statements_raise(dialect):
    with pytest.raises(LoomSyntaxError, match="label"):
        one("CREATE INDEX i ON t USING mlweaving (a, b)", dialect)
    with pytest.raises(LoomSyntaxError):
        one("CREATE INDEX i ON t USING mlweaving (a, b WITH (label = y)", dialect)
    with pytest.raises(LoomNotFoundError, match="no mlweaving index"):
        one("CREATE INDEX m ON train_mlweaving('t2', 5)", dialect)
