"""A dbt-duckdb plugin: loomdb's functions in every DuckDB database dbt opens.  No paper section.

In a dbt profile (``pip install 'loomdb[dbt]'``)::

    type: duckdb
    path: shop.duckdb
    plugins:
      - module: loomdb.dbt

dbt-duckdb calls ``configure_connection`` on each connection it opens to the database, before
any model runs on it; ``loomdb.register`` creates the catalog and registers every ``loom_*``
function, which dbt's cursors of that connection then call.  Those cursors are not loomdb's tracked
connections: loomdb's writing functions (``loom_train``, ``loom_drop_model``…) commit on a
connection of their own whether or not dbt holds a transaction open, so they see what was last
committed and a dbt ROLLBACK does not undo them.  The dbt package in ``dbt/loomdb`` therefore
trains only outside a model's transaction on DuckDB (README, "dbt").  Progress lines go to
stderr (one a second at most); ``{"progress": false}`` in a call's options silences them.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

import loomdb


class Plugin(BasePlugin):
    """Registers loomdb on the connection dbt-duckdb opens."""

    def configure_connection(self, conn: Any) -> None:
        loomdb.register(conn)
