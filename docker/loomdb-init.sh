#!/bin/sh
# Runs once, when the image initialises an empty data directory (docker-entrypoint-initdb.d):
# creates the loomdb extension in $POSTGRES_DB.  Where the server imports loomdb from was fixed
# by `loomdb pg prepare` in the extension's install script (loom.settings), not by a setting.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE EXTENSION IF NOT EXISTS plpython3u;
CREATE EXTENSION IF NOT EXISTS loomdb;
SELECT loom_version();
SQL
