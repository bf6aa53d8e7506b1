-- loomdb 0.2.0: generated from loomdb/udfs/catalogue.toml by loomdb.engines.postgres.extension; do not edit by hand.
\echo Use "CREATE EXTENSION loomdb" to load this file. \quit

CREATE SCHEMA IF NOT EXISTS loom;
CREATE SCHEMA IF NOT EXISTS loom_data;
CREATE TABLE IF NOT EXISTS loom.models (name text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, uid text, kind text, coefficients text, intercept text, feature_names text, classes text, standardization text, options text, history text, rows_processed bigint, rows_skipped bigint, timings text, storage_format text, backend text, source text, label text, report text, created_at timestamptz, PRIMARY KEY (name));
CREATE TABLE IF NOT EXISTS loom.indexes (name text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, uid text, source text, label text, columns text, format text, format_version integer, options text, stats text, label_counts text, rows bigint, skipped bigint, batches bigint, bytes bigint, source_signature text, built_at timestamptz, PRIMARY KEY (name));
CREATE TABLE IF NOT EXISTS loom.grants (model text NOT NULL CHECK (model ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, grantee text, granted_at timestamptz, PRIMARY KEY (model, grantee));
CREATE TABLE IF NOT EXISTS loom.settings (key text, value text, PRIMARY KEY (key));
INSERT INTO loom.settings (key, value) VALUES ('extra_path', ''), ('numba_cache_dir', '/var/lib/loomdb/venv/numba-cache'), ('venv', '/var/lib/loomdb/venv');
SELECT pg_catalog.pg_extension_config_dump('loom.models', '');
SELECT pg_catalog.pg_extension_config_dump('loom.indexes', '');
SELECT pg_catalog.pg_extension_config_dump('loom.grants', '');

-- Several users (loomdb's multi-user model).  Part of the generated install script.
--
-- loomdb_user may train, predict, evaluate and build indexes on what its members may read.
-- Every catalog row has an owner (the role that wrote it); row-level security hides other
-- roles' rows and keeps them from being changed, unless the owner granted a model
-- (loom.grants, through loom_grant).  Superusers see everything.  Storage tables live in
-- loom_data, owned by their creator, with no PUBLIC access.  loom.settings (where the server
-- imports loomdb from) is written only by the superuser who installed loomdb.
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'loomdb_user') THEN
        CREATE ROLE loomdb_user NOLOGIN;
    END IF;
END
$do$;
REVOKE ALL ON SCHEMA loom, loom_data FROM PUBLIC;
GRANT USAGE ON SCHEMA loom TO loomdb_user;
GRANT USAGE, CREATE ON SCHEMA loom_data TO loomdb_user;
REVOKE ALL ON loom.models, loom.indexes, loom.grants, loom.settings FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON loom.models, loom.indexes, loom.grants TO loomdb_user;
GRANT SELECT ON loom.settings TO loomdb_user;

ALTER TABLE loom.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.indexes ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY models_own ON loom.models
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY models_granted ON loom.models FOR SELECT USING (EXISTS (
    SELECT 1 FROM loom.grants g
    WHERE g.model = models.name AND g.owner = models.owner
      AND (g.grantee = 'public' OR EXISTS (
          SELECT 1 FROM pg_catalog.pg_roles r
          WHERE r.rolname = g.grantee AND pg_catalog.pg_has_role(r.oid, 'USAGE')))));
CREATE POLICY indexes_own ON loom.indexes
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY grants_own ON loom.grants
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY grants_received ON loom.grants FOR SELECT USING (
    grantee = 'public' OR EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE r.rolname = grantee AND pg_catalog.pg_has_role(r.oid, 'USAGE')));

CREATE FUNCTION loom._bootstrap() RETURNS void
LANGUAGE plpython3u VOLATILE AS $fn$
import os, sys
conf = {r['key']: r['value'] for r in plpy.execute(
    "SELECT key, value FROM loom.settings WHERE key IN ('venv', 'numba_cache_dir', 'extra_path')")}
if not conf.get('venv') or not conf.get('numba_cache_dir'):
    plpy.error('loomdb is not configured in this database',
               hint='a superuser runs: loomdb pg install --dsn "dbname=..."')
site = os.path.join(conf['venv'], 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
for path in reversed([p for p in (conf.get('extra_path') or '').split(':') if p] + [site]):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ['NUMBA_CACHE_DIR'] = conf['numba_cache_dir']
try:
    from loomdb.engines.postgres import server
except ImportError as e:
    plpy.error('loomdb cannot be imported by the server\'s Python: %s' % e,
               hint='a superuser runs "loomdb pg install --dsn ..." on the server machine')
GD['loomdb'] = server
$fn$;
REVOKE ALL ON FUNCTION loom._bootstrap() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._bootstrap() TO loomdb_user;
COMMENT ON FUNCTION loom._bootstrap() IS 'load loomdb into this session''s Python (called by every loomdb function once)';

CREATE FUNCTION loom_train(model text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_train', model, source, label, options)
$fn$;
REVOKE ALL ON FUNCTION loom_train(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_train(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_train(text, text, text, text) IS 'train a generalized linear model (linear, logistic, svm) on a table, view or SELECT; options are JSON; returns a JSON summary';

CREATE FUNCTION loom_predict(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom_predict(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict(text, double precision[]) IS 'predict with a trained model: the class label for classifiers, the value for linear models';

CREATE FUNCTION loom_predict_proba(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_proba(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_proba(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_proba(text, double precision[]) IS 'probability of the positive class (binary logistic) or of the predicted class (one-vs-rest)';

CREATE FUNCTION loom_predict_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_sql', model)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_sql(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_sql(text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_sql(text) IS 'the model compiled to a native SQL expression over its feature columns (what loom_predict computes)';

CREATE FUNCTION loom_predict_proba_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba_sql', model)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_proba_sql(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_proba_sql(text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_proba_sql(text) IS 'the model''s probability compiled to a native SQL expression (what loom_predict_proba computes)';

CREATE FUNCTION loom_evaluate(model text, source text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate', model, source, options)
$fn$;
REVOKE ALL ON FUNCTION loom_evaluate(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_evaluate(text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_evaluate(text, text, text) IS 'evaluate a model on a table, view or SELECT holding its features (or images) and label; options: {"scans": k} reads images at k scan groups; returns JSON metrics';

CREATE FUNCTION loom_predict_image(model text, image bytea, scans bigint DEFAULT NULL) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_image', model, image, scans)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_image(text, bytea, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_image(text, bytea, bigint) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_image(text, bytea, bigint) IS 'predict with a model trained on a pcr index from a JPEG image read at k scan groups (NULL: all); NULL for a NULL or unreadable image';

CREATE FUNCTION loom_evaluate_index(model text, index text, backend text DEFAULT 'cpu') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate_index', model, index, backend)
$fn$;
REVOKE ALL ON FUNCTION loom_evaluate_index(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_evaluate_index(text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_evaluate_index(text, text, text) IS 'evaluate a model on an index''s stored batches, computed on the stored form by a backend (A·w on TOC blobs); returns JSON metrics';

CREATE FUNCTION loom_model_info(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_model_info', model)
$fn$;
REVOKE ALL ON FUNCTION loom_model_info(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_model_info(text) TO loomdb_user;
COMMENT ON FUNCTION loom_model_info(text) IS 'everything the catalog knows of a model, as JSON';

CREATE FUNCTION loom_drop_model(model text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_model', model)
$fn$;
REVOKE ALL ON FUNCTION loom_drop_model(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_drop_model(text) TO loomdb_user;
COMMENT ON FUNCTION loom_drop_model(text) IS 'remove a model (and its grants) from the catalog';

CREATE FUNCTION loom_create_index(name text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_create_index', name, source, label, options)
$fn$;
REVOKE ALL ON FUNCTION loom_create_index(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_create_index(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_create_index(text, text, text, text) IS 'lay a table out for learning in a storage format (dense, toc, mlweaving); what CREATE INDEX ... USING runs';

CREATE FUNCTION loom_drop_index(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_index', name)
$fn$;
REVOKE ALL ON FUNCTION loom_drop_index(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_drop_index(text) TO loomdb_user;
COMMENT ON FUNCTION loom_drop_index(text) IS 'drop a loomdb index and its storage';

CREATE FUNCTION loom_reindex(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_reindex', name)
$fn$;
REVOKE ALL ON FUNCTION loom_reindex(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_reindex(text) TO loomdb_user;
COMMENT ON FUNCTION loom_reindex(text) IS 'rebuild a loomdb index from its source with the same options';

CREATE FUNCTION loom_simulate(index text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_simulate', index, options)
$fn$;
REVOKE ALL ON FUNCTION loom_simulate(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_simulate(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_simulate(text, text) IS 'the MLWeaving engine''s simulated cycles, bytes, seconds and throughput for a job on an index, without training (JSON)';

CREATE FUNCTION loom_backends() RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_backends')
$fn$;
REVOKE ALL ON FUNCTION loom_backends() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_backends() TO loomdb_user;
COMMENT ON FUNCTION loom_backends() IS 'the accelerator backends, each with whether it is usable here and, if not, why (JSON)';

CREATE FUNCTION loom_version() RETURNS text
LANGUAGE plpython3u IMMUTABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_version')
$fn$;
REVOKE ALL ON FUNCTION loom_version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_version() TO loomdb_user;
COMMENT ON FUNCTION loom_version() IS 'the loomdb version the server runs';

CREATE FUNCTION loom_grant(model text, role text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_grant', model, role)
$fn$;
REVOKE ALL ON FUNCTION loom_grant(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_grant(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_grant(text, text) IS 'let a role (or public) see and predict with a model you own (PostgreSQL; DuckDB has no roles)';

CREATE FUNCTION loom_revoke(model text, role text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_revoke', model, role)
$fn$;
REVOKE ALL ON FUNCTION loom_revoke(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_revoke(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_revoke(text, text) IS 'take back what loom_grant gave a role';

CREATE FUNCTION loom_load(kind text, path text, target text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_load', kind, path, target, options)
$fn$;
REVOKE ALL ON FUNCTION loom_load(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_load(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_load(text, text, text, text) IS 'load a file or folder read by the database''s process into a new table (kinds: see loomdb.loaders; PostgreSQL: needs pg_read_server_files)';
