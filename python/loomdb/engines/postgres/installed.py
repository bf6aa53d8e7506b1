"""What a database holds of the loomdb extension, as the catalog says: its version and its
schema.  No paper section.

Plain text, importable in the server (``server``) and outside it (``server_setup``, the SQL
front-end's catalog, ``client``).  Every name is pg_catalog's and every operator named: a
database's owner may set its search_path (``ALTER DATABASE … SET``) to put a schema of theirs
before pg_catalog, and the SQL runs under it.
"""

#: The loomdb version this database holds (no row: the extension is not created here)
EXTENSION_VERSION = (
    "SELECT extversion FROM pg_catalog.pg_extension "
    "WHERE extname OPERATOR(pg_catalog.=) 'loomdb'::pg_catalog.name"
)

#: The schema the loomdb extension's functions are in (no row: not created here)
EXTENSION_SCHEMA = (
    "SELECT n.nspname FROM pg_catalog.pg_extension AS e JOIN pg_catalog.pg_namespace AS n "
    "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
    "WHERE e.extname OPERATOR(pg_catalog.=) 'loomdb'::pg_catalog.name"
)
