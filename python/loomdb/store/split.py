"""Hold rows of a source out of a train: a seeded split by row, or one named by a column.

No paper section.  ``test_fraction`` holds out the rows whose seeded hash of their row number
in the source (its stored order, the order Bismarck's one-time shuffle starts from) falls
below the fraction; ``split_column`` names a column saying each row's part: text
``'train'``/``'test'`` or a boolean (true: test).  Either way the split is a filter on the
source, applied before profiling, so the statistics, the classes, every format's layout and
the validation batches see the training rows only.

The hash is whole-number arithmetic modulo the prime 2^31 − 1 (two squarings, so neither a
shift of the rows nor a change of seed maps one split onto another): exact in BIGINT on both
engines, it gives the same split of the same rows in DuckDB and PostgreSQL.  The filter is
rebuilt from the options the catalog recorded, each one checked again (a number, a column name
quoted here): catalog text is never run as SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomDataError, LoomOptionError, LoomStateError
from loomdb.options import Interval, Text
from loomdb.store.db import Database
from loomdb.store.names import builtin, literal, quote_ident
from loomdb.store.source import resolve

PARTS = ("train", "test")
MODULUS = 2147483647  # 2^31 − 1: every product below stays under 2^62
ROW = "loom_split_rn"
FRACTION = Interval(False, 0, 0.9, low_open=True)
SEED = Interval(True, 0, 2**31 - 1)


@dataclass(frozen=True)
class Split:
    """How a source's rows are split: by ``fraction`` (and ``seed``) or by ``column``."""

    fraction: float | None = None
    seed: int = 0
    column: str | None = None

    @classmethod
    def of(cls, opts: dict[str, Any]) -> Split | None:
        """The split a train's options ask for (None: every row trains)."""
        fraction, column = opts.get("test_fraction") or None, opts.get("split_column")
        if fraction and column:
            raise LoomOptionError(
                "give 'test_fraction' or 'split_column', not both",
                hint="split_column names each row's part itself; leave test_fraction out",
            )
        if column:
            return cls(column=column)
        return cls(fraction=float(fraction), seed=int(opts["seed"])) if fraction else None

    @classmethod
    def recorded(cls, model: str, used: dict[str, Any]) -> Split:
        """The split model ``model`` was trained with, from its catalog options (checked)."""
        split = used.get("split")
        if not isinstance(split, dict):
            raise LoomStateError(
                f"model '{model}' was trained without a test split",
                hint='train it with {"test_fraction": 0.2} or {"split_column": "..."}',
            )
        column, fraction, seed = split.get("column"), split.get("test_fraction"), split.get("seed")
        if column is not None and Text().check(column):
            return cls(column=column)
        if FRACTION.check(fraction) and SEED.check(seed):
            return cls(fraction=float(fraction or 0), seed=int(seed or 0))
        raise LoomStateError(f"model '{model}' records a split loomdb cannot read: {split!r}")

    def describe(self) -> dict[str, Any]:
        """The split as the catalog records it (with the rows per part added by the train)."""
        if self.column is not None:
            return {"column": self.column}
        return {"test_fraction": self.fraction, "seed": self.seed}

    def _test(self, db: Database, kinds: dict[str, str], source: str) -> str:
        """The condition of a test row (over the source's columns and ``ROW``)."""
        if self.column is None:
            assert self.fraction is not None

            # every constant a bigint, as the row number is: bigint % integer has no operator
            # in pg_catalog (it casts to bigint % bigint), so a role's %(bigint, integer) on
            # the search_path would be an exact match and chosen
            def big(k: int) -> str:
                return f"CAST({int(k)} AS BIGINT)"

            m = big(MODULUS)
            x = f"(({ROW} + {big((self.seed * 7919 + 1) % MODULUS)}) % {m})"
            x = f"(({x} * {x} + {big((self.seed * 104729 + 12345) % MODULUS)}) % {m})"
            x = f"(({x} * {big(48271)}) % {m})"
            x = f"(({x} * {x} + {big(6789)}) % {m})"
            return f"{x} < {big(round(self.fraction * MODULUS))}"
        column = resolve(self.column, kinds, "split_column", source)
        if kinds[column] == "boolean":
            return quote_ident(column)
        if kinds[column] not in ("text", "other"):  # other: char(n), enums… checked by value
            raise LoomDataError(
                f"split_column '{column}' is {kinds[column]}: it must be text or boolean",
                hint="hold 'train' or 'test' in a text column, or true for test in a boolean",
            )
        return f"CAST({quote_ident(column)} AS {db.type('text')}) = {literal('test')}"

    def others(
        self, available: dict[str, str], source: str, label: str, features: list[str] | None
    ) -> dict[str, str]:
        """The columns that may be features or the label: all but a split column."""
        if self.column is None:
            return available
        column = resolve(self.column, available, "split_column", source)
        named = [label, *(features or [])]
        if any(str(n).lower() == column.lower() for n in named):
            raise LoomOptionError(
                f"'{column}' is the split_column; it cannot also be the label or a feature",
                hint="name another column as split_column",
            )
        return {c: k for c, k in available.items() if c != column}

    def _numbered(self, rel: str, dialect: str) -> str:
        number = builtin("row_number", dialect)
        return f"(SELECT *, {number}() OVER () AS {ROW} FROM {rel}) AS loom_split_rows"

    def restrict(
        self, db: Database, rel: str, kinds: dict[str, str], source: str, part: str
    ) -> str:
        """``rel`` (a FROM item with columns ``kinds``) narrowed to the rows of ``part``."""
        test = self._test(db, kinds, source)
        keep = test if part == "test" else f"NOT ({test})"
        return f"(SELECT * FROM {self._numbered(rel, db.dialect)} WHERE {keep}) AS loom_split"

    def narrow(
        self, db: Database, rel: str, kinds: dict[str, str], source: str
    ) -> tuple[str, dict[str, Any]]:
        """``rel`` narrowed to its training rows, and the split as the catalog records it with
        the source's rows and its test rows (checked: see :meth:`count`)."""
        counts = self.count(db, rel, kinds, source)
        recorded = {**self.describe(), "rows": {"source": sum(counts.values()), **counts}}
        return self.restrict(db, rel, kinds, source, "train"), recorded

    def count(self, db: Database, rel: str, kinds: dict[str, str], source: str) -> dict[str, int]:
        """Rows of ``source`` in each part; a clear error for a split column holding NULLs or
        other values, or a split that leaves a part empty."""
        test = self._test(db, kinds, source)
        total, tests, nulls = db.query(
            f"SELECT count(*) AS n, count(*) FILTER (WHERE {test}) AS n_test, count(*) FILTER "
            f"(WHERE ({test}) IS NULL) AS n_null FROM {self._numbered(rel, db.dialect)}"
        )[0]
        if self.column is not None:
            self._check_values(db, rel, kinds, source, int(nulls))
        counts = {"train": int(total - tests), "test": int(tests)}
        empty = [p for p in PARTS if counts[p] == 0]
        if empty:
            if self.column is None:
                asked, hint = f"test_fraction {self.fraction:g}", "use a larger test_fraction"
            else:
                asked = f"split_column '{self.column}'"
                hint = f"mark some rows '{empty[0]}' in {self.column}"
            raise LoomDataError(
                f"{asked} leaves no {empty[0]} row among the {int(total)} rows of {source}",
                hint=hint + ", or leave the split out to train on every row",
            )
        return counts

    def _check_values(
        self, db: Database, rel: str, kinds: dict[str, str], source: str, nulls: int
    ) -> None:
        column = resolve(self.column or "", kinds, "split_column", source)
        if nulls:
            raise LoomDataError(
                f"{nulls} rows of {source} have a NULL split_column '{column}'",
                hint="give every row a part ('train' or 'test'), or filter them out in a "
                "SELECT source",
            )
        if kinds[column] == "boolean":
            return
        text = f"CAST({quote_ident(column)} AS {db.type('text')})"
        allowed = ", ".join(literal(p) for p in PARTS)
        bad = db.query(
            f"SELECT DISTINCT {text} AS v FROM {rel} WHERE {text} NOT IN ({allowed}) "
            "ORDER BY 1 LIMIT 3"
        )
        if bad:
            shown = ", ".join(repr(r[0]) for r in bad)
            raise LoomDataError(
                f"split_column '{column}' of {source} holds {shown}: each row must be "
                "'train' or 'test'",
                hint="map the values in a SELECT source, e.g. CASE WHEN … THEN 'test' ELSE "
                "'train' END AS part",
            )
