"""What the SQL front-end asks the database while it rewrites a statement.  No paper section.

Each engine answers from loomdb's catalog (``loomdb.store.sql_catalog.DbCatalog``); tests use a
fake.  The front-end never queries the database itself.
"""

from __future__ import annotations

from typing import Protocol


class Catalog(Protocol):
    """The questions the rewrites need answered."""

    def functions_schema(self) -> str | None:
        """The schema a rewritten statement names loomdb's functions with (as the catalog
        spells it; the front-end quotes it), or None where they are called by name alone.
        PostgreSQL: the loomdb extension's schema, read when asked (a script may create the
        extension before its loomdb statements); DuckDB: None."""
        ...

    def index_name(self, name: str) -> str | None:
        """The loomdb index ``name`` (as the engine reads it in the statement) names, spelled as the
        catalog records it, or None when it names none."""
        ...

    def engine_index(self, schema: str, name: str) -> bool:
        """Whether the engine itself has an index ``schema.name`` (as the engine reads both)."""
        ...

    def indexes_on(self, table: str) -> list[str]:
        """The loomdb indexes built on ``table`` (SQL text, as written in the statement) that
        the front-end rebuilds: not those PostgreSQL holds as index relations."""
        ...

    def indexes_in(self, schema: str | None) -> list[str]:
        """The loomdb indexes built on a table or view of ``schema`` (as the engine reads the
        name in the statement), or all of them where it is None, that the front-end rebuilds:
        not those PostgreSQL holds as index relations."""
        ...

    def index_for(self, table: str, format: str) -> str | None:
        """The loomdb index of ``format`` built on ``table`` (the newest), or None."""
        ...

    def columns(self, table: str) -> list[str]:
        """The columns of ``table``; raises LoomNotFoundError, with a hint, if it cannot be
        read."""
        ...

    def default_label(self, table: str) -> str:
        """The label column DoppioDB's ``create_mlweaving('t')`` uses when none is given."""
        ...

    def model_features(self, model: str) -> list[str]:
        """The feature columns of ``model``, in order; raises LoomNotFoundError if unknown."""
        ...
