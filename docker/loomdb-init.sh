#!/bin/sh
# Runs once, when the image initialises an empty data directory (docker-entrypoint-initdb.d):
# points the extension's bootstrap at the image's virtual environment, server-wide, and creates
# the loomdb extension in $POSTGRES_DB.  Same settings as `loomdb pg install`.
set -eu

python_path="$(cat /opt/loomdb/python_path)"

# set_config first: before PostgreSQL 17, ALTER SYSTEM only accepts a custom setting that the
# session already has.  It also lets CREATE EXTENSION below see the values at once.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v python_path="$python_path" -v numba_cache_dir="$LOOMDB_NUMBA_CACHE_DIR" <<'SQL'
SELECT set_config('loomdb.python_path', :'python_path', false);
SELECT set_config('loomdb.numba_cache_dir', :'numba_cache_dir', false);
ALTER SYSTEM SET loomdb.python_path = :'python_path';
ALTER SYSTEM SET loomdb.numba_cache_dir = :'numba_cache_dir';
SELECT pg_reload_conf();
CREATE EXTENSION IF NOT EXISTS plpython3u;
CREATE EXTENSION IF NOT EXISTS loomdb;
SELECT loom_version();
SQL
