"""Run a script statement by statement and say, when one fails, what had run.  No paper section.

A :class:`Script` hands out the statements to run, each rewritten just before it runs (a
script may create the index its next statement drops); a rewrite may be several statements,
run one after another (DuckDB's ``REINDEX TABLE t`` of a table with several loomdb indexes:
one ``loom_reindex`` each, each committed on its own; PostgreSQL's ``REINDEX SCHEMA``, which
cannot run in a transaction block, then loomdb's rebuilds).  When one fails, the error gets a
note (PEP 678: shown under its traceback, and by ``loomdb sql`` as a ``CONTEXT:`` line) that
names it — its number and first words — and says what ran before it and what did not run.

What ran before it was committed unless a transaction was open: both engines commit each
statement on its own outside one (DuckDB by default, ``loomdb sql``'s PostgreSQL connection in
autocommit).  Statements since the ``BEGIN`` that opened it (or, on a loomdb DuckDB connection
in a transaction when the script began, every statement) are not committed: an error the
engine raised aborted that transaction on both engines (only ``ROLLBACK`` ends it), while one
loomdb's front-end raised before the statement reached the engine left it open.  The
transaction is followed by what each statement does to it (:func:`transaction`), the rule the
DuckDB connection follows too, once DuckDB has run the statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from loomdb.frontend.script import split

OPEN = frozenset({"BEGIN", "START"})
CLOSE = frozenset({"COMMIT", "END", "ROLLBACK", "ABORT"})


def first_word(statement: str) -> str:
    """The statement's first word, upper case ("" for none)."""
    words = statement.split(None, 1)
    return words[0].upper() if words else ""


def transaction(statement: str) -> str | None:
    """What ``statement`` does to the transaction: "begin" (``BEGIN``, ``START TRANSACTION``)
    opens one, "end" (``COMMIT``, ``END``, ``ROLLBACK``, ``ABORT``) ends it, "chain" (``COMMIT
    AND CHAIN``) ends it and opens the next; None for any other, ``ROLLBACK TO SAVEPOINT``
    (which ends none) among them."""
    said = statement.upper().split()[:6]
    if first_word(statement) in OPEN:
        return "begin"
    if first_word(statement) not in CLOSE or "TO" in said:
        return None
    return "chain" if "CHAIN" in said and "NO" not in said else "end"


def words(statement: str, most: int = 48) -> str:
    """The statement's first words, on one line, at most ``most`` characters (then "…")."""
    text = " ".join(statement.split())
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"


def _span(first: int, last: int) -> str:
    """ "statement 2" or "statements 2–4"."""
    return f"statement {first}" if first == last else f"statements {first}–{last}"


class Script:
    """The statements of ``pieces`` (as written), each rewritten by ``rewrite`` when its turn
    comes; ``open_before``: a transaction was open when the script began."""

    def __init__(
        self,
        pieces: list[str],
        rewrite: Callable[[str], str],
        dialect: str,
        open_before: bool = False,
    ):
        self.pieces, self.rewrite, self.dialect = pieces, rewrite, dialect
        self.number = 0  # the statement running (1-based)
        self.steps: list[str] = []  # what it was rewritten into (empty: not yet, or refused)
        self.step = 0  # the step running (1-based)
        self.opened: int | None = 0 if open_before else None  # the BEGIN's number (0: before)
        self.before: int | None = self.opened  # self.opened when the statement running began

    def __iter__(self) -> Iterator[str]:
        for number, piece in enumerate(self.pieces, 1):
            self.number, self.steps, self.step, self.before = number, [], 0, self.opened
            statement = self.rewrite(piece)
            several = statement != piece and ";" in statement
            steps = split(statement, self.dialect) if several else [statement]
            self.steps = steps or [statement]
            for step, text in enumerate(self.steps, 1):
                self.step = step
                self._follow(text, number)
                yield text

    def _follow(self, statement: str, number: int) -> None:
        """Note where the open transaction began (``statement``, the ``number``-th, may open
        or end one; ``ROLLBACK TO SAVEPOINT`` ends none, ``COMMIT AND CHAIN`` opens the next)."""
        change = transaction(statement)
        if change == "begin":
            self.opened = number if self.opened is None else self.opened
        elif change is not None:
            self.opened = number if change == "chain" else None

    def last(self) -> bool:
        """Whether the statement handed out last is the script's last."""
        return self.number == len(self.pieces) and self.step == len(self.steps)

    def note(self) -> str | None:
        """What ran when the statement running failed; None for a script of one statement
        that was one statement to run."""
        parts: list[str] = []
        count, number = len(self.pieces), self.number
        if count > 1:
            parts.append(f"statement {number} of {count} ({words(self.pieces[number - 1])}) failed")
            parts.append(self._before())
            if number < count:
                parts.append(f"{_span(number + 1, count)} did not run")
        if len(self.steps) > 1:
            parts.append(self._steps())
        return "; ".join(parts) or None

    def _before(self) -> str:
        """What the statements before the failing one did."""
        number, opened = self.number, self.before
        if number == 1:
            return "no statement ran before it"
        ended = "the error aborted it (ROLLBACK ends it)" if self.steps else "it is still open"
        if opened is None:
            were = "was" if number == 2 else "were"
            return f"{_span(1, number - 1)} before it ran and {were} committed"
        if opened == 0:
            return (
                f"{_span(1, number - 1)} before it ran in the transaction open before the script, "
                f"not committed: {ended}"
            )
        committed = f"{_span(1, opened - 1)} ran and committed, then " if opened > 1 else ""
        return (
            f"{committed}{_span(opened, number - 1)} ran in the transaction statement {opened} "
            f"began, not committed: {ended}"
        )

    def _steps(self) -> str:
        """What the steps of the failing statement's rewrite did."""
        piece, step = self.pieces[self.number - 1], self.step
        kept = "ran" if self.opened is not None else "ran and committed"
        done = [f"{words(s)} {kept}" for s in self.steps[: step - 1]]
        rest = [f"{words(s)} did not run" for s in self.steps[step:]]
        return f"{words(piece)} runs as {len(self.steps)} statements: " + "; ".join(
            [*done, f"{words(self.steps[step - 1])} failed", *rest]
        )

    def annotate(self, error: BaseException) -> None:
        """Add :meth:`note` to ``error`` (once)."""
        note = self.note()
        if note is not None and note not in getattr(error, "__notes__", ()):
            error.add_note(note)

    @contextmanager
    def noting(self) -> Iterator[None]:
        """Annotate an error raised in the body (:meth:`annotate`)."""
        try:
            yield
        except Exception as e:
            self.annotate(e)
            raise
