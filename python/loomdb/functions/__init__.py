"""The SQL functions' bodies, engine-neutral and short: each takes a ``Database`` first.

No paper section.  ``udfs/catalogue.toml`` declares each function once and points at a
callable here; ``engines/`` binds them to DuckDB and PostgreSQL.
"""
