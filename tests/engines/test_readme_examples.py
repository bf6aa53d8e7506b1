"""The README's examples, read out of README.md and run as written, on both engines.

Each case names a README section and which of its ```sql blocks it runs, the tables the block
reads (made by engine-neutral SQL before it) and the statements that must come first (a block
that continues one before it, as Versions continues a trained model).  Every statement of the
block must succeed: an example that stops working, or one edited into something that does not
run, fails here.  On PostgreSQL a block runs as psql runs it (no front-end: ``CREATE INDEX …
USING toc`` reaches loomdb's index access methods), but for a block of DoppioDB's forms, which
only loomdb's front-end reads: that one runs through it, as ``loomdb sql --dsn`` runs it.  The
few substitutions (a file's path, a smaller generated table) are listed in ``SUBSTITUTIONS``;
each must apply, so an edit of the example is noticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import need
from loomdb.frontend import statements
from loomdb.frontend.script import split
from support.engines import Engine, readable_dir

pytestmark = pytest.mark.postgres

README = Path(__file__).resolve().parents[2] / "README.md"

CUSTOMERS = """
CREATE TABLE {name} AS
SELECT i AS id, (i * 7) % 71 + 1 AS tenure, 20 + ((i * 13) % 97) * 1.5 AS spend, i % 7 AS calls,
       CASE WHEN ((i * 7) % 71 + 1) * 0.05 < (i % 7) * 0.4 + ((i * 31) % 10) / 10.0
            THEN 1 ELSE 0 END AS churned,
       CASE i % 3 WHEN 0 THEN 'basic' WHEN 1 THEN 'pro' ELSE 'plus' END AS plan,
       CASE WHEN i % 11 = 0 THEN NULL ELSE 'city' || CAST(i % 30 AS VARCHAR) END AS city,
       CAST(10000 + i % 500 AS VARCHAR) AS zip
FROM generate_series({first}, {last}) AS g(i)
"""
SHOP = [
    CUSTOMERS.format(name="customers", first=1, last=1500),
    CUSTOMERS.format(name="customers_holdout", first=1501, last=1800),
    CUSTOMERS.format(name="new_customers", first=1801, last=1810),
    CUSTOMERS.format(name="holdout", first=1811, last=2100),
]
CLICKS = """
CREATE TABLE clicks AS
SELECT ((i * 7) % 97) / 97.0 AS f1, ((i * 13) % 89) / 89.0 AS f2, ((i * 29) % 83) / 83.0 AS f3,
       CASE WHEN ((i * 7) % 97) / 97.0 + ((i * 13) % 89) / 89.0 > 1.0 THEN 1 ELSE 0 END AS clicked
FROM generate_series(1, 2000) AS g(i)
"""
ADULT = """
CREATE TABLE adult AS
SELECT (i * 7) % 60 + 18 AS age, (i * 11) % 60 + 10 AS hours, i % 16 AS edu,
       CASE WHEN (i * 7) % 60 + (i % 16) * 3 > 50 THEN 1 ELSE 0 END AS income
FROM generate_series(1, 2000) AS g(i)
"""
MAIL = """
CREATE TABLE mail AS
SELECT i AS id, ((i * 37) % 101) / 10.0 AS links, ((i * 53) % 89) / 10.0 AS caps,
       CASE WHEN ((i * 37) % 101) / 10.0 + ((i * 53) % 89) / 20.0 > 7
            THEN 'spam' ELSE 'ham' END AS verdict
FROM generate_series(1, 600) AS g(i)
"""
SPARSE_ADULT = "SELECT loom_load('libsvm', '{files}/a9a.t', 'adult')"
PHOTOS = "SELECT loom_load('images', '{files}/photos', 'photos')"
CHURN = """SELECT loom_train('churn', 'customers', 'churned',
                  '{{"features": ["tenure", "spend", "calls"]}}')"""


@dataclass(frozen=True)
class Example:
    section: str  # the heading's text
    block: int  # which ```sql block of the section, from 0
    before: list[str] = field(default_factory=list)  # tables, models: '{files}' is the folder
    frontend: bool = False  # on PostgreSQL, through loomdb sql's front-end
    index_methods: bool = False  # on PostgreSQL, CREATE INDEX … USING loomdb's methods


EXAMPLES = {
    "intro": Example("loomdb", 0, SHOP),
    "quick-start-postgres": Example("Quick start: PostgreSQL (psql)", 0, SHOP),
    "versions": Example("Versions", 0, [*SHOP, CHURN]),
    "preprocessing": Example("Preprocessing", 0, SHOP),
    "text-labels": Example("Text labels", 0, [MAIL]),
    "tuning": Example("Tuning (hyperparameter search)", 0, SHOP),
    "test-splits": Example("Test splits", 0, SHOP),
    "explaining": Example("Explaining a model", 0, [*SHOP, CHURN]),
    "indexes": Example("Layouts, indexes and backends", 0, [ADULT, CLICKS], frontend=True),
    "indexes-psql": Example(
        "Layouts, indexes and backends", 1, [CLICKS, SPARSE_ADULT, PHOTOS], index_methods=True
    ),
    "slimml": Example("SlimML: skip the rows that do not matter", 0, [CLICKS], index_methods=True),
    "sparse": Example("Sparse sources", 0),
}

SUBSTITUTIONS = {  # example: [(the README's text, what runs instead)]
    "sparse": [
        ("'/data/a9a.t'", "'{files}/a9a.t'"),  # a9a.t's shape, where the server can read it
        ('"rows": 1000000', '"rows": 2000'),
    ],
}


def sql_blocks(section: str) -> list[str]:
    """The ```sql blocks under the README's heading ``section``, up to the next heading."""
    text = README.read_text()
    heading = re.search(rf"^#+ {re.escape(section)}\n", text, re.MULTILINE)
    assert heading, f"the README has no section {section!r}"
    rest = text[heading.end() :]
    following = re.search(r"^#+ ", rest, re.MULTILINE)
    body = rest[: following.start()] if following else rest
    return re.findall(r"^```sql\n(.*?)^```", body, re.MULTILINE | re.DOTALL)


def example_sql(name: str, files: Path) -> str:
    example = EXAMPLES[name]
    blocks = sql_blocks(example.section)
    assert len(blocks) > example.block, f"{example.section}: no sql block {example.block}"
    sql = blocks[example.block]
    for old, new in SUBSTITUTIONS.get(name, []):
        assert old in sql, f"{example.section}'s example no longer holds {old}"
        sql = sql.replace(old, new.format(files=files))
    return sql


def files_folder() -> Path:
    """What the examples read from files, where the database's process can read them: 2,000
    rows of LIBSVM in a9a.t's shape (binary features up to column 123) and two classes of
    small JPEGs."""
    folder = readable_dir()
    rows = [
        ("+1" if i % 3 else "-1")
        + "".join(f" {j}:1" for j in sorted({1 + i % 7, 10 + i % 5, 50 + i % 70, 123}))
        for i in range(2000)
    ]
    (folder / "a9a.t").write_text("\n".join(rows) + "\n")
    (folder / "a9a.t").chmod(0o644)
    (folder / "photos").mkdir(mode=0o755)
    for c, name in enumerate(("ants", "bees")):
        (folder / "photos" / name).mkdir(mode=0o755)
        for i in range(4):
            path = folder / "photos" / name / f"{i}.jpg"
            pixels = np.full((16, 16, 3), 40 * (2 * c + i % 2) + i, dtype=np.uint8)
            Image.fromarray(pixels).save(path, "JPEG")
            path.chmod(0o644)
    return folder


def runner(engine: Engine, example: Example):
    """How a statement of the example runs: DuckDB's loomdb connection has the front-end;
    PostgreSQL runs it as written, or through the front-end as ``loomdb sql --dsn`` does."""
    if engine.name == "postgres" and example.frontend:
        from loomdb.engines.postgres.client import PsycopgDatabase
        from loomdb.store.sql_catalog import DbCatalog

        catalog = DbCatalog(PsycopgDatabase(engine.conn))  # type: ignore[attr-defined]
        return lambda sql: [engine.rows(s) for s in statements(sql, "postgres", catalog)]
    return engine.rows


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_readme_example_runs_as_written(engine, name):
    example = EXAMPLES[name]
    if engine.name == "postgres" and example.index_methods:
        methods = engine.rows("SELECT amname FROM pg_am WHERE amname IN ('toc', 'pcr', 'dense')")
        if len(methods) != 3:
            need("loomdb's index access methods (apt-get install postgresql-server-dev-15)")
    files = files_folder()
    for sql in example.before:
        engine.rows(sql.format(files=files))
    run = runner(engine, example)
    try:
        for statement in split(example_sql(name, files), engine.name):
            try:
                run(statement)
            except engine.errors as e:
                pytest.fail(f"README, {example.section}: {statement}\nfailed: {e}")
    finally:
        if engine.name == "postgres" and example.index_methods:  # DROP INDEX, not loom_drop_index
            engine.rows("DROP SCHEMA IF EXISTS loomtest CASCADE")


def test_duckdb_quick_start_runs_as_written(tmp_path, monkeypatch, capsys):
    """Quick start: DuckDB's Python, in a folder holding the customers.csv it reads."""
    text = README.read_text()
    section = text[text.index("## Quick start: DuckDB\n") :]
    code = re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert code, "Quick start: DuckDB has no python block"
    rng = np.random.default_rng(3)
    tenure, spend, calls = rng.integers(1, 72, 400), rng.normal(70, 20, 400), rng.poisson(3, 400)
    churned = (0.4 * calls - 0.05 * tenure + rng.normal(0, 0.5, 400) > 0).astype(int)
    lines = ["tenure,spend,calls,churned"]
    lines += [f"{t},{s:.2f},{c},{y}" for t, s, c, y in zip(tenure, spend, calls, churned)]
    (tmp_path / "customers.csv").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    try:
        assert '"model": "churn"' in capsys.readouterr().out  # the train's summary, printed
    finally:
        namespace["con"].close()
