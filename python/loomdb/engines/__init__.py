"""Engines: the only code that knows DuckDB or PostgreSQL.  No paper section.

Each implements ``loomdb.store.db.Database`` and binds the UDF catalogue (``loomdb.udfs``).
"""
