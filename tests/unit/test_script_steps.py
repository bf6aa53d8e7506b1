"""What a failed script had run (``frontend.steps.Script``): the note its error gets."""

from __future__ import annotations

import pytest

from loomdb.errors import LoomSyntaxError
from loomdb.frontend import split
from loomdb.frontend.steps import Script


def run(sql: str, fails: str, rewrite=lambda s: s, open_before=False) -> list[str]:
    """Run ``sql``'s statements, the one starting with ``fails`` raising; its error's notes."""
    script = Script(split(sql, "duckdb"), rewrite, "duckdb", open_before)
    with pytest.raises(LoomSyntaxError) as caught, script.noting():
        for statement in script:
            if statement.startswith(fails):
                raise LoomSyntaxError(f"{statement} failed")
    return getattr(caught.value, "__notes__", [])


def test_one_statement_gets_no_note():
    assert run("SELECT 1", "SELECT 1") == []


def test_the_failing_statement_is_named_with_what_ran_before_and_after():
    notes = run("CREATE TABLE u (x INT); INSERT INTO u VALUES (1); SELECT x FROM nosuch; SELECT 2",
                "SELECT x")  # fmt: skip
    assert notes == [
        "statement 3 of 4 (SELECT x FROM nosuch) failed; statements 1–2 before it ran and were "
        "committed; statement 4 did not run"
    ]
    assert run("SELECT x FROM nosuch; SELECT 2", "SELECT x") == [
        "statement 1 of 2 (SELECT x FROM nosuch) failed; no statement ran before it; "
        "statement 2 did not run"
    ]


def test_a_long_statement_is_named_by_its_first_words():
    long = "SELECT a, b, c, d, e, f, g, h, i, j, k, l, m, n FROM nosuch"
    (note,) = run(f"SELECT 1; {long}", "SELECT a")
    assert "(SELECT a, b, c, d, e, f, g, h, i, j, k, l, m, n…)" in note


def test_statements_in_an_open_transaction_are_said_not_to_be_committed():
    (note,) = run("INSERT INTO u VALUES (1); BEGIN; INSERT INTO u VALUES (2); SELECT x", "SELECT x")
    assert "statement 1 ran and committed, then statements 2–3 ran in the transaction " in note
    assert "statement 2 began, not committed: the error aborted it (ROLLBACK ends it)" in note
    (note,) = run("BEGIN; SELECT 1; COMMIT; SELECT x", "SELECT x")  # committed since
    assert "statements 1–3 before it ran and were committed" in note
    (note,) = run("SELECT 1; SELECT x", "SELECT x", open_before=True)
    assert "ran in the transaction open before the script, not committed" in note
    (note,) = run("BEGIN; SAVEPOINT s; ROLLBACK TO SAVEPOINT s; SELECT x", "SELECT x")
    assert "statements 1–3 ran in the transaction statement 1 began, not committed" in note
    (note,) = run("BEGIN; SELECT 1; COMMIT AND CHAIN; SELECT 2; SELECT x", "SELECT x")
    assert "statements 1–2 ran and committed, then statements 3–4 ran in the transaction " in note


def test_a_statement_refused_before_it_reached_the_engine_leaves_the_transaction_open():
    def refuse(statement):
        if statement.startswith("DROP"):
            raise LoomSyntaxError("refused")
        return statement

    script = Script(split("BEGIN; SELECT 1; DROP INDEX w", "duckdb"), refuse, "duckdb")
    with pytest.raises(LoomSyntaxError) as caught, script.noting():
        list(script)
    assert caught.value.__notes__[0].endswith("not committed: it is still open")


def test_a_statement_rewritten_into_several_says_which_of_them_ran():
    def rewrite(statement):
        if statement == "REINDEX TABLE t":
            return "SELECT loom_reindex('a');\nSELECT loom_reindex('b');\nSELECT loom_reindex('c')"
        return statement

    assert run("REINDEX TABLE t", "SELECT loom_reindex('b')", rewrite) == [
        "REINDEX TABLE t runs as 3 statements: SELECT loom_reindex('a') ran and committed; "
        "SELECT loom_reindex('b') failed; SELECT loom_reindex('c') did not run"
    ]
    (note,) = run("SELECT 1; REINDEX TABLE t", "SELECT loom_reindex('a')", rewrite)
    assert note.startswith("statement 2 of 2 (REINDEX TABLE t) failed; statement 1 before it ")
    assert note.endswith("SELECT loom_reindex('a') failed; SELECT loom_reindex('b') did not run; "
                         "SELECT loom_reindex('c') did not run")  # fmt: skip
