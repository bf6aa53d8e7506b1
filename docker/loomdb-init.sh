#!/bin/sh
# Runs once, when the image initialises an empty data directory (docker-entrypoint-initdb.d):
# creates the loomdb extension in $POSTGRES_DB, then runs the demo (sql/demo.sql) in a database
# of its own, loomdb_demo, so its output is in the container's log and its tables and models
# are there to explore (LOOMDB_DEMO=0 skips it).  Where the server imports loomdb from was
# fixed by `loomdb pg prepare` in the extension's install script (loom.settings), not by a
# setting.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE EXTENSION IF NOT EXISTS plpython3u;
CREATE EXTENSION IF NOT EXISTS loomdb;
SELECT loom_version();
SQL
if [ "${LOOMDB_DEMO:-1}" != "0" ]; then
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
        -c "CREATE DATABASE \"${LOOMDB_DEMO_DB:-loomdb_demo}\""
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "${LOOMDB_DEMO_DB:-loomdb_demo}" \
        -c "CREATE EXTENSION plpython3u" -c "CREATE EXTENSION loomdb"
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "${LOOMDB_DEMO_DB:-loomdb_demo}" \
        -c "SET client_min_messages = warning" -f "${LOOMDB_DEMO_SQL:-/opt/loomdb/demo.sql}"
fi
