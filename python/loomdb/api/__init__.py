"""The SQL functions' bodies, engine-neutral: each takes a ``Database`` and the SQL arguments.

``udfs/`` declares each function once and points at a callable here; ``engines/`` binds them.
"""
