"""Engines: the only code that knows DuckDB or PostgreSQL.

Each implements ``loomdb.store.db.Database`` and binds the UDF catalogue (``loomdb.udfs``).
"""
