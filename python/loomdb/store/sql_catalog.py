"""What loomdb's SQL front-end needs to know of a database, answered from the catalog.

No paper section.  The front-end (``loomdb.frontend``) never queries a database itself.
"""

from __future__ import annotations

from loomdb.errors import LoomOptionError
from loomdb.store import catalog
from loomdb.store.db import Queryable
from loomdb.store.names import NAME
from loomdb.store.source import columns_of


class DbCatalog:
    """The front-end's ``Catalog`` over any engine's database."""

    def __init__(self, db: Queryable):
        self.db = db

    def functions_schema(self) -> str | None:
        """None: DuckDB's loomdb functions are registered on the connection and called by
        name.  PostgreSQL's client front-end uses ``engines.postgres.client.PgCatalog``."""
        return None

    def index_name(self, name: str) -> str | None:
        """A loomdb index the front-end rewrites DROP/REINDEX of: not one PostgreSQL holds
        as an index relation (``CREATE INDEX … USING`` in psql), whose statements pass.  On
        DuckDB, whose identifiers ignore case, ``WI`` names index ``wi``."""
        if not NAME.match(name):
            return None
        found = catalog.index_spelled(self.db, name)
        return found if found and catalog.index_relation(self.db, found) is None else None

    def engine_index(self, schema: str, name: str) -> bool:
        return catalog.engine_index(self.db, schema, name)

    def indexes_on(self, table: str) -> list[str]:
        found = catalog.indexes_on(self.db, table)
        return [n for n in found if catalog.index_relation(self.db, n) is None]

    def indexes_in(self, schema: str | None) -> list[str]:
        found = catalog.indexes_in(self.db, schema)
        return [n for n in found if catalog.index_relation(self.db, n) is None]

    def index_for(self, table: str, format: str) -> str | None:
        return catalog.index_for(self.db, table, format)

    def columns(self, table: str) -> list[str]:
        """The table's columns; a table that cannot be read is a LoomNotFoundError with a
        hint, as for any source (it was the engine's error, without one)."""
        return list(columns_of(self.db, table)[1])

    def default_label(self, table: str) -> str:
        """The table's last column (:meth:`columns`)."""
        return self.columns(table)[-1]

    def model_features(self, model: str) -> list[str]:
        record = catalog.get_model(self.db, model)
        if isinstance(record.coefficients, dict):  # a sparse source's model
            raise LoomOptionError(
                f"model '{model}' was trained on a sparse source: it reads indices and values "
                "arrays, not feature columns",
                hint=f"predict with loom_predict_sparse('{model}', indices, values)",
            )
        return list(record.feature_names)
