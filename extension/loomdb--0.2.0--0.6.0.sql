-- loomdb 0.6.0: generated from loomdb/udfs/catalogue.toml by loomdb.engines.postgres.extension; do not edit by hand.
\echo Use "ALTER EXTENSION loomdb UPDATE" to load this file. \quit

-- loomdb 0.2.0 → 0.6.0: what the catalog gains; the generator appends the catalog's tables
-- (CREATE TABLE / ADD COLUMN IF NOT EXISTS), the multi-user rules (security.sql), the
-- bootstrap, every function (CREATE OR REPLACE) and the access methods (made only where absent).
--
-- Models, versions, trials, grants, deployments and indexes are kept as they are; indexes made
-- by CREATE INDEX … USING keep their access methods (never dropped here).
--
-- What the appended text creates without OR REPLACE is dropped first, to be made again: the
-- bootstrap and the access methods' drop trigger (the row-level policies drop themselves).
-- loom_trials and loom_weights return one more column (metric, class_name), which CREATE OR
-- REPLACE cannot change.  Trials scored before 0.3.0 were scored by their validation loss.
DROP FUNCTION IF EXISTS loom._bootstrap();
DROP EVENT TRIGGER IF EXISTS loom_index_am_drop;
DROP FUNCTION IF EXISTS loom_trials(text);
DROP FUNCTION IF EXISTS loom_weights(text);
ALTER TABLE loom.trials ADD COLUMN IF NOT EXISTS metric text;
UPDATE loom.trials SET metric = 'validation loss' WHERE metric IS NULL;

CREATE SCHEMA IF NOT EXISTS loom;
CREATE SCHEMA IF NOT EXISTS loom_data;
CREATE TABLE IF NOT EXISTS loom.models (name text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, uid text, kind text, coefficients text, intercept text, feature_names text, classes text, standardization text, options text, history text, rows_processed bigint, rows_skipped bigint, timings text, storage_format text, backend text, source text, label text, report text, created_at timestamptz, version integer, PRIMARY KEY (name));
ALTER TABLE loom.models ADD COLUMN IF NOT EXISTS version integer;
CREATE TABLE IF NOT EXISTS loom.model_versions (name text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, uid text, kind text, coefficients text, intercept text, feature_names text, classes text, standardization text, options text, history text, rows_processed bigint, rows_skipped bigint, timings text, storage_format text, backend text, source text, label text, report text, created_at timestamptz, version integer, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS loom.trials (model text NOT NULL CHECK (model ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, trial integer, status text, options text, score double precision, seconds double precision, error text, created_at timestamptz, metric text, version integer, PRIMARY KEY (owner, model, trial));
ALTER TABLE loom.trials ADD COLUMN IF NOT EXISTS metric text;
ALTER TABLE loom.trials ADD COLUMN IF NOT EXISTS version integer;
CREATE TABLE IF NOT EXISTS loom.grants (model text NOT NULL CHECK (model ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), owner name NOT NULL DEFAULT current_user, grantee text, granted_at timestamptz, PRIMARY KEY (owner, model, grantee));
CREATE TABLE IF NOT EXISTS loom.deployments (schema_name text, function text, owner name NOT NULL DEFAULT current_user, model text NOT NULL CHECK (model ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'), kind text, arity integer, deployed_at timestamptz, PRIMARY KEY (owner, schema_name, function));
CREATE TABLE IF NOT EXISTS loom.settings (key text, value text, PRIMARY KEY (key));
INSERT INTO loom.settings (key, value) VALUES ('extra_path', ''), ('numba_cache_dir', '/var/lib/loomdb/venv/numba-cache'), ('venv', '/var/lib/loomdb/venv') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
SELECT pg_catalog.pg_extension_config_dump('loom.model_versions', '');
SELECT pg_catalog.pg_extension_config_dump('loom.trials', '');
SELECT pg_catalog.pg_extension_config_dump('loom.grants', '');
SELECT pg_catalog.pg_extension_config_dump('loom.deployments', '');

-- Several users (loomdb's multi-user model).  Part of the generated install script.
--
-- loomdb_user may train, predict, evaluate and build indexes on what its members may read.
-- Every catalog row has an owner (the role that wrote it); row-level security hides other
-- roles' rows and keeps them from being changed, unless the owner granted a model
-- (loom.grants, through loom_grant).  Superusers see everything.  Storage tables live in
-- loom_data, owned by their creator, with no PUBLIC access.  loom.settings (where the server
-- imports loomdb from) is written only by the superuser who installed loomdb.
--
-- A row names its owner twice: ``owner`` (the name, as loomdb reads it) and ``owner_role`` (the
-- role itself: a regrole is the role's OID, dumped and restored as its name), and every policy
-- asks both.  A role dropped and created again under the same name is another role: it sees
-- none of the old role's rows, nor what was granted to the old one (``grantee_role``).  Rows of
-- a dropped role stay, seen by superusers only (their owner_role no longer names a role).
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
REVOKE ALL ON loom.models, loom.model_versions, loom.trials, loom.indexes, loom.grants,
    loom.deployments, loom.settings FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON loom.models, loom.model_versions, loom.trials,
    loom.indexes, loom.grants, loom.deployments TO loomdb_user;
GRANT SELECT ON loom.settings TO loomdb_user;

CREATE OR REPLACE FUNCTION loom._current_role() RETURNS regrole
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
SELECT r.oid::pg_catalog.regrole FROM pg_catalog.pg_roles AS r
WHERE r.rolname OPERATOR(pg_catalog.=) current_user
$fn$;
COMMENT ON FUNCTION loom._current_role() IS
    'the role loomdb acts as, by identity (the default of owner_role)';
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'model_versions', 'trials', 'indexes', 'grants',
                             'deployments'] LOOP
        EXECUTE format('ALTER TABLE loom.%I ADD COLUMN IF NOT EXISTS owner_role regrole', t);
        EXECUTE format('ALTER TABLE loom.%I ALTER COLUMN owner_role '
                       'SET DEFAULT loom._current_role()', t);
    END LOOP;
END
$do$;
ALTER TABLE loom.grants ADD COLUMN IF NOT EXISTS grantee_role regrole;  -- NULL: public

ALTER TABLE loom.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.model_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.trials ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.indexes ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.deployments ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS models_own ON loom.models;  -- an update makes it again
CREATE POLICY models_own ON loom.models
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS models_granted ON loom.models;
CREATE POLICY models_granted ON loom.models FOR SELECT USING (EXISTS (
    SELECT 1 FROM loom.grants g
    WHERE g.model = models.name AND g.owner = models.owner AND g.owner_role = models.owner_role
      AND (g.grantee = 'public' OR EXISTS (
          SELECT 1 FROM pg_catalog.pg_roles r
          WHERE r.oid = g.grantee_role AND r.rolname = g.grantee
            AND pg_catalog.pg_has_role(r.oid, 'USAGE')))));
-- a model's old versions and its trials are its owner's alone (a grant shares the current one)
DROP POLICY IF EXISTS model_versions_own ON loom.model_versions;
CREATE POLICY model_versions_own ON loom.model_versions
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
-- a model's trials are its owner's alone (a grant shares the model, not how it was searched)
DROP POLICY IF EXISTS trials_own ON loom.trials;
CREATE POLICY trials_own ON loom.trials
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS indexes_own ON loom.indexes;
CREATE POLICY indexes_own ON loom.indexes
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS deployments_own ON loom.deployments;
CREATE POLICY deployments_own ON loom.deployments
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS grants_own ON loom.grants;
CREATE POLICY grants_own ON loom.grants
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS grants_received ON loom.grants;
CREATE POLICY grants_received ON loom.grants FOR SELECT USING (
    grantee = 'public' OR EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE r.oid = grantee_role AND r.rolname = grantee
          AND pg_catalog.pg_has_role(r.oid, 'USAGE')));

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

CREATE OR REPLACE FUNCTION loom_train(model text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_train', model, source, label, options)
$fn$;
REVOKE ALL ON FUNCTION loom_train(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_train(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_train(text, text, text, text) IS 'train a generalized linear model (linear, logistic, svm) on a table, view or SELECT; options are JSON; returns a JSON summary';

CREATE OR REPLACE FUNCTION loom_tune(model text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_tune', model, source, label, options)
$fn$;
REVOKE ALL ON FUNCTION loom_tune(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_tune(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_tune(text, text, text, text) IS 'search loom_train''s options (lists of candidates; grid or random), score each trial on a validation split (by its loss, or the ''metric'' option: accuracy, auc, rmse, mae) and keep the best as the model; returns a JSON summary';

CREATE OR REPLACE FUNCTION loom_trials(model text) RETURNS TABLE ("trial" integer, "status" text, "score" double precision, "seconds" double precision, "options" text, "error" text, "metric" text)
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_trials', model)
$fn$;
REVOKE ALL ON FUNCTION loom_trials(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_trials(text) TO loomdb_user;
COMMENT ON FUNCTION loom_trials(text) IS 'the trials of the loom_tune that made a model: options, score (the validation loss unless the tune''s ''metric'' named another), seconds, failed trials with their error, and the metric that scored them';

CREATE OR REPLACE FUNCTION loom_predict(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom_predict(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict(text, double precision[]) IS 'predict with a trained model: the class label for classifiers, the value for linear models';

CREATE OR REPLACE FUNCTION loom_predict_row(model text, input text) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_row', model, input)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_row(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_row(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_row(text, text) IS 'loom_predict from a whole row (SELECT loom_predict(''m'', t) FROM t, or loom_predict_row): features bound by column name, other columns ignored; a missing or NULL feature column is an error';
CREATE OR REPLACE FUNCTION loom_predict_row(model text, input record) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
RETURN @extschema@.loom_predict_row(model, pg_catalog.to_jsonb(input)::pg_catalog.text);
END
$fn$;
REVOKE ALL ON FUNCTION loom_predict_row(text, record) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_row(text, record) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_row(text, record) IS 'loom_predict from a whole row (SELECT loom_predict(''m'', t) FROM t, or loom_predict_row): features bound by column name, other columns ignored; a missing or NULL feature column is an error';
CREATE OR REPLACE FUNCTION loom_predict(model text, input record) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
RETURN @extschema@.loom_predict_row(model, pg_catalog.to_jsonb(input)::pg_catalog.text);
END
$fn$;
REVOKE ALL ON FUNCTION loom_predict(text, record) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict(text, record) TO loomdb_user;
COMMENT ON FUNCTION loom_predict(text, record) IS 'loom_predict from a whole row (SELECT loom_predict(''m'', t) FROM t, or loom_predict_row): features bound by column name, other columns ignored; a missing or NULL feature column is an error';

CREATE OR REPLACE FUNCTION loom_predict_class(model text, features double precision[]) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_class', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_class(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_class(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_class(text, double precision[]) IS 'the predicted class as text: a text label''s class name, or a numeric class as loom_predict gives it (classifiers only)';

CREATE OR REPLACE FUNCTION loom_predict_class_row(model text, input text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_class_row', model, input)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_class_row(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_class_row(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_class_row(text, text) IS 'loom_predict_class from a whole row (SELECT loom_predict_class(''m'', t) FROM t): features bound by column name';
CREATE OR REPLACE FUNCTION loom_predict_class_row(model text, input record) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
RETURN @extschema@.loom_predict_class_row(model, pg_catalog.to_jsonb(input)::pg_catalog.text);
END
$fn$;
REVOKE ALL ON FUNCTION loom_predict_class_row(text, record) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_class_row(text, record) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_class_row(text, record) IS 'loom_predict_class from a whole row (SELECT loom_predict_class(''m'', t) FROM t): features bound by column name';
CREATE OR REPLACE FUNCTION loom_predict_class(model text, input record) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
RETURN @extschema@.loom_predict_class_row(model, pg_catalog.to_jsonb(input)::pg_catalog.text);
END
$fn$;
REVOKE ALL ON FUNCTION loom_predict_class(text, record) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_class(text, record) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_class(text, record) IS 'loom_predict_class from a whole row (SELECT loom_predict_class(''m'', t) FROM t): features bound by column name';

CREATE OR REPLACE FUNCTION loom_predict_proba(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_proba(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_proba(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_proba(text, double precision[]) IS 'probability of the positive class (binary logistic) or of the predicted class (one-vs-rest)';

CREATE OR REPLACE FUNCTION loom_predict_sparse(model text, feature_indices bigint[], feature_values double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_sparse', model, feature_indices, feature_values)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_sparse(text, bigint[], double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_sparse(text, bigint[], double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_sparse(text, bigint[], double precision[]) IS 'predict from a sparse row: values at 0-based column indices (a sparse source''s model, or a dense model''s feature positions)';

CREATE OR REPLACE FUNCTION loom_predict_proba_sparse(model text, feature_indices bigint[], feature_values double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba_sparse', model, feature_indices, feature_values)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_proba_sparse(text, bigint[], double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_proba_sparse(text, bigint[], double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_proba_sparse(text, bigint[], double precision[]) IS 'loom_predict_proba from a sparse row: values at 0-based column indices';

CREATE OR REPLACE FUNCTION loom_predict_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_sql', model)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_sql(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_sql(text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_sql(text) IS 'the model compiled to a native SQL expression over its feature columns (what loom_predict computes); in PostgreSQL with loomdb''s C module it calls loom.finite (create it before pasting the expression into another database: see the README)';

CREATE OR REPLACE FUNCTION loom_predict_proba_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba_sql', model)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_proba_sql(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_proba_sql(text) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_proba_sql(text) IS 'the model''s probability compiled to a native SQL expression (what loom_predict_proba computes)';

CREATE OR REPLACE FUNCTION loom_deploy(model text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_deploy', model, options)
$fn$;
REVOKE ALL ON FUNCTION loom_deploy(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_deploy(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_deploy(text, text) IS 'make the model a native SQL function of its feature columns (predict_<model>; a MACRO in DuckDB, an inlinable parallel-safe SQL function in PostgreSQL), redefined when the model is retrained; option version (a number, latest or best) makes that version the current model first';

CREATE OR REPLACE FUNCTION loom_evaluate(model text, source text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate', model, source, options)
$fn$;
REVOKE ALL ON FUNCTION loom_evaluate(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_evaluate(text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_evaluate(text, text, text) IS 'evaluate a model on a table, view or SELECT holding its features (or images) and label; options: {"scans": k} reads images at k scan groups, {"split": "test"} only the rows the model held out ("train": the others); returns JSON metrics';

CREATE OR REPLACE FUNCTION loom_predict_image(model text, image bytea, scans bigint DEFAULT NULL) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_image', model, image, scans)
$fn$;
REVOKE ALL ON FUNCTION loom_predict_image(text, bytea, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_predict_image(text, bytea, bigint) TO loomdb_user;
COMMENT ON FUNCTION loom_predict_image(text, bytea, bigint) IS 'predict with a model trained on a pcr index from a JPEG image read at k scan groups (NULL: all); NULL for a NULL or unreadable image';

CREATE OR REPLACE FUNCTION loom_roc_curve(model text, source text) RETURNS TABLE ("threshold" double precision, "tpr" double precision, "fpr" double precision)
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_roc_curve', model, source)
$fn$;
REVOKE ALL ON FUNCTION loom_roc_curve(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_roc_curve(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_roc_curve(text, text) IS 'the ROC curve of a binary logistic or svm model on a table, view or SELECT: one row per distinct score (threshold on the probability scale for logistic, the margin for svm), after a first row at threshold infinity';

CREATE OR REPLACE FUNCTION loom_evaluate_index(model text, index text, backend text DEFAULT 'cpu') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate_index', model, index, backend)
$fn$;
REVOKE ALL ON FUNCTION loom_evaluate_index(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_evaluate_index(text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_evaluate_index(text, text, text) IS 'evaluate a model on an index''s stored batches, computed on the stored form by a backend (A·w on TOC blobs); returns JSON metrics';

CREATE OR REPLACE FUNCTION loom_model_info(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_model_info', model)
$fn$;
REVOKE ALL ON FUNCTION loom_model_info(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_model_info(text) TO loomdb_user;
COMMENT ON FUNCTION loom_model_info(text) IS 'everything the catalog knows of a model, as JSON';

CREATE OR REPLACE FUNCTION loom_weights(model text) RETURNS TABLE ("feature" text, "class" double precision, "weight" double precision, "weight_standardized" double precision, "rank" integer, "odds_ratio" double precision, "class_name" text)
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_weights', model)
$fn$;
REVOKE ALL ON FUNCTION loom_weights(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_weights(text) TO loomdb_user;
COMMENT ON FUNCTION loom_weights(text) IS 'a model''s coefficients as rows: in the features'' own units and as trained (standardised), ranked by magnitude per class, with odds ratios for logistic models; the intercept is feature ''(intercept)''; class_name: the class as text (a text label''s name)';

CREATE OR REPLACE FUNCTION loom_training_info(model text) RETURNS TABLE ("epoch" integer, "loss" double precision, "validation_loss" double precision, "precision" integer, "rows" bigint, "bytes" bigint, "seconds" double precision, "lr" double precision)
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_training_info', model)
$fn$;
REVOKE ALL ON FUNCTION loom_training_info(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_training_info(text) TO loomdb_user;
COMMENT ON FUNCTION loom_training_info(text) IS 'a model''s training history, one row per epoch: loss, validation loss, bits read (mlweaving), rows, bytes read, seconds, step size';

CREATE OR REPLACE FUNCTION loom_drop_model(model text, version bigint DEFAULT -9223372036854775807) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_model', model, version)
$fn$;
REVOKE ALL ON FUNCTION loom_drop_model(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_drop_model(text, bigint) TO loomdb_user;
COMMENT ON FUNCTION loom_drop_model(text, bigint) IS 'remove a model (every version, its grants and trials) from the catalog, or with a version number only that old version (a NULL version is refused; the default, -9223372036854775807, stands for none given)';

CREATE OR REPLACE FUNCTION loom_model_versions(model text) RETURNS TABLE ("version" integer, "current" boolean, "created_at" timestamptz, "options" text, "loss" double precision, "validation_loss" double precision, "epochs" integer)
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_model_versions', model)
$fn$;
REVOKE ALL ON FUNCTION loom_model_versions(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_model_versions(text) TO loomdb_user;
COMMENT ON FUNCTION loom_model_versions(text) IS 'a model''s versions, oldest first: when each was trained, its options, its final loss and validation loss, and which one is current';

CREATE OR REPLACE FUNCTION loom_rollback(model text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_rollback', model)
$fn$;
REVOKE ALL ON FUNCTION loom_rollback(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_rollback(text) TO loomdb_user;
COMMENT ON FUNCTION loom_rollback(text) IS 'make the version before the current one the model again (its deployed functions redefined)';

CREATE OR REPLACE FUNCTION loom_create_index(name text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_create_index', name, source, label, options)
$fn$;
REVOKE ALL ON FUNCTION loom_create_index(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_create_index(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_create_index(text, text, text, text) IS 'lay a table out for learning in a storage format (dense, toc, mlweaving); what CREATE INDEX ... USING runs';

CREATE OR REPLACE FUNCTION loom_drop_index(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_index', name)
$fn$;
REVOKE ALL ON FUNCTION loom_drop_index(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_drop_index(text) TO loomdb_user;
COMMENT ON FUNCTION loom_drop_index(text) IS 'drop a loomdb index and its storage';

CREATE OR REPLACE FUNCTION loom_reindex(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_reindex', name)
$fn$;
REVOKE ALL ON FUNCTION loom_reindex(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_reindex(text) TO loomdb_user;
COMMENT ON FUNCTION loom_reindex(text) IS 'rebuild a loomdb index from its source with the same options';

CREATE OR REPLACE FUNCTION loom_simulate(index text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_simulate', index, options)
$fn$;
REVOKE ALL ON FUNCTION loom_simulate(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_simulate(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_simulate(text, text) IS 'the MLWeaving engine''s simulated cycles, bytes, seconds and throughput for a job on an index, without training (JSON)';

CREATE OR REPLACE FUNCTION loom_backends() RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_backends')
$fn$;
REVOKE ALL ON FUNCTION loom_backends() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_backends() TO loomdb_user;
COMMENT ON FUNCTION loom_backends() IS 'the accelerator backends, each with whether it is usable here and, if not, why (JSON)';

CREATE OR REPLACE FUNCTION loom_version() RETURNS text
LANGUAGE plpython3u IMMUTABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_version')
$fn$;
REVOKE ALL ON FUNCTION loom_version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_version() TO loomdb_user;
COMMENT ON FUNCTION loom_version() IS 'the loomdb version the server runs';

CREATE OR REPLACE FUNCTION loom_grant(model text, role text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_grant', model, role)
$fn$;
REVOKE ALL ON FUNCTION loom_grant(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_grant(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_grant(text, text) IS 'let a role (or public) see and predict with a model you own (PostgreSQL; DuckDB has no roles)';

CREATE OR REPLACE FUNCTION loom_revoke(model text, role text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_revoke', model, role)
$fn$;
REVOKE ALL ON FUNCTION loom_revoke(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_revoke(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_revoke(text, text) IS 'take back what loom_grant gave a role';

CREATE OR REPLACE FUNCTION loom_load(kind text, path text, target text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_load', kind, path, target, options)
$fn$;
REVOKE ALL ON FUNCTION loom_load(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom_load(text, text, text, text) TO loomdb_user;
COMMENT ON FUNCTION loom_load(text, text, text, text) IS 'load a file or folder read by the database''s process into a new table (kinds: see loomdb.loaders; PostgreSQL: needs pg_read_server_files)';

DROP AGGREGATE IF EXISTS loom._epoch_agg(integer, integer, integer[], integer[], smallint[], bytea[], bigint[], bytea);
DROP FUNCTION IF EXISTS loom._epoch_step(bytea, integer, integer, integer[], integer[], smallint[], bytea[], bigint[], bytea);
CREATE OR REPLACE FUNCTION loom._epoch_step(state bytea, shard integer, batches integer[], rows integer[], parts integer[], versions smallint[], payloads bytea[], checksums bigint[], job bytea) RETURNS bytea
LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE COST 100000 AS $fn$
if 'loomdb_epochs' not in GD:
    import os, sys
    site = os.path.join('/var/lib/loomdb/venv', 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
    for path in reversed([p for p in ''.split(':') if p] + [site]):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ['NUMBA_CACHE_DIR'] = '/var/lib/loomdb/venv/numba-cache'
    for blas in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        os.environ.setdefault(blas, '1')
    from loomdb.engines.postgres import epoch_aggregate
    GD['loomdb_epochs'] = epoch_aggregate
return GD['loomdb_epochs'].call(plpy, 'step', state, shard, batches, rows, parts, versions, payloads, checksums, job)
$fn$;
CREATE OR REPLACE FUNCTION loom._epoch_combine(a bytea, b bytea) RETURNS bytea
LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE STRICT AS $fn$
if 'loomdb_epochs' not in GD:
    import os, sys
    site = os.path.join('/var/lib/loomdb/venv', 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages')
    for path in reversed([p for p in ''.split(':') if p] + [site]):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ['NUMBA_CACHE_DIR'] = '/var/lib/loomdb/venv/numba-cache'
    for blas in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        os.environ.setdefault(blas, '1')
    from loomdb.engines.postgres import epoch_aggregate
    GD['loomdb_epochs'] = epoch_aggregate
return GD['loomdb_epochs'].call(plpy, 'combine', a, b)
$fn$;
CREATE OR REPLACE AGGREGATE loom._epoch_agg(integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) (
    SFUNC = loom._epoch_step, STYPE = bytea,
    COMBINEFUNC = loom._epoch_combine, PARALLEL = SAFE
);
REVOKE ALL ON FUNCTION loom._epoch_step(bytea, integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._epoch_step(bytea, integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) TO loomdb_user;
REVOKE ALL ON FUNCTION loom._epoch_combine(bytea, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._epoch_combine(bytea, bytea) TO loomdb_user;
REVOKE ALL ON FUNCTION loom._epoch_agg(integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._epoch_agg(integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) TO loomdb_user;
COMMENT ON FUNCTION loom._epoch_step(bytea, integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) IS 'a run of minibatches of a parallel epoch''s shard (the transition of loom._epoch_agg)';
COMMENT ON FUNCTION loom._epoch_combine(bytea, bytea) IS 'two partial states of a parallel epoch as one (the combine function of loom._epoch_agg)';
COMMENT ON AGGREGATE loom._epoch_agg(integer, integer[], integer[], integer[], smallint[], bytea[], bigint[], bytea) IS 'a parallel epoch: each shard''s SGD over its minibatches, run in parallel workers (Bismarck); loom_train averages the shards';

-- CREATE INDEX … USING mlweaving | toc | dense | pcr in psql (part of the generated install script).
--
-- loom.index_relations says which PostgreSQL index relation holds which loomdb index: its OID
-- is the identity (it survives ALTER INDEX … RENAME and REINDEX), its name the loomdb index's.
-- Rows are written by loom._index_am_build, which the access methods' build callback calls as
-- the table's owner.  The table is not dumped: OIDs mean nothing in another cluster; a
-- restored CREATE INDEX takes over the restored loomdb index of its name and table.
CREATE TABLE IF NOT EXISTS loom.index_relations (
    relation oid PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'),
    owner name NOT NULL DEFAULT current_user
);
-- the owner by identity too, as every catalog row (security.sql)
ALTER TABLE loom.index_relations ADD COLUMN IF NOT EXISTS owner_role regrole;
ALTER TABLE loom.index_relations ALTER COLUMN owner_role SET DEFAULT loom._current_role();
REVOKE ALL ON loom.index_relations FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON loom.index_relations TO loomdb_user;
ALTER TABLE loom.index_relations ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS index_relations_own ON loom.index_relations;  -- an update makes it again
CREATE POLICY index_relations_own ON loom.index_relations
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));

-- The Python half of the access methods (loomdb.engines.postgres.index_am).
CREATE OR REPLACE FUNCTION loom._index_am_build(index oid, OUT heap_tuples float8, OUT index_tuples float8)
LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'build', index)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_build(oid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_build(oid) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_build(oid) IS 'lay a table out for the loomdb index relation given (called by CREATE INDEX and REINDEX)';

CREATE OR REPLACE FUNCTION loom._index_am_check(method text, options text[])
RETURNS void LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'check', method, options)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_check(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_check(text, text[]) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_check(text, text[]) IS 'check the WITH options of a loomdb index (called by CREATE INDEX and ALTER INDEX … SET)';

-- DROP INDEX (or DROP TABLE, DROP SCHEMA … CASCADE) of a loomdb index relation removes the
-- loomdb index: its catalog row and its storage table.  SECURITY DEFINER because whoever may
-- drop the relation (any role with the table owner's privileges, a superuser) may not see
-- the rows, which row-level security keeps to the role that built it; the function can only
-- run as this event trigger, and acts only on index relations PostgreSQL reports dropped.
-- It removes only rows of the owner that registered the relation, and the storage table
-- (derived from the checked name, never read from the catalog as SQL) only with its row: a
-- DROP TABLE runs no code of the table's owner.
CREATE OR REPLACE FUNCTION loom._index_am_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    gone record;
BEGIN
    FOR gone IN
        SELECT DISTINCT r.name, r.owner, r.owner_role
        FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
        JOIN loom.index_relations AS r
          ON r.relation = d.objid
          -- an index relation PostgreSQL replaced without building it again (a column type
          -- change that keeps the operator class) has a new OID: match it by name
          OR (r.name = d.object_name
              AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c WHERE c.oid = r.relation))
        WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.object_type = 'index'
    LOOP
        DELETE FROM loom.index_relations WHERE name = gone.name;
        DELETE FROM loom.indexes
        WHERE name = gone.name AND owner = gone.owner AND owner_role = gone.owner_role;
        IF FOUND THEN
            EXECUTE format('DROP TABLE IF EXISTS loom_data.%I', gone.name);
        END IF;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_dropped() FROM PUBLIC;
COMMENT ON FUNCTION loom._index_am_dropped() IS 'remove the loomdb index of a dropped loomdb index relation';
CREATE EVENT TRIGGER loom_index_am_drop ON sql_drop EXECUTE FUNCTION loom._index_am_dropped();

-- ALTER INDEX of a loomdb index relation: what it left must be what a build can take, or the
-- next REINDEX, TRUNCATE or VACUUM FULL would fail.  PostgreSQL checks the options (through
-- loom._index_am_check) only while some remain, so RESET (label) goes unchecked, and nothing
-- checks that the label is a column of the table.  Not SECURITY DEFINER: the check runs as the
-- role that altered the index (its table's owner, who builds it), and only for relations of
-- loomdb's access methods (their handlers are loom's).
CREATE OR REPLACE FUNCTION loom._index_am_altered(index oid)
RETURNS void LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'altered', index)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_altered(oid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_altered(oid) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_altered(oid) IS 'refuse what ALTER INDEX left a loomdb index relation that its next build could not take';

CREATE OR REPLACE FUNCTION loom._index_am_alter() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    altered oid;
BEGIN
    FOR altered IN
        SELECT DISTINCT c.oid
        FROM pg_catalog.pg_event_trigger_ddl_commands() AS d
        JOIN pg_catalog.pg_class AS c ON c.oid = d.objid
        JOIN pg_catalog.pg_am AS a ON a.oid = c.relam
        JOIN pg_catalog.pg_proc AS p ON p.oid = a.amhandler
        JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
        WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.relkind = 'i'
          AND n.nspname = 'loom'
    LOOP
        PERFORM loom._index_am_altered(altered);
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_alter() FROM PUBLIC;
COMMENT ON FUNCTION loom._index_am_alter() IS 'refuse an ALTER INDEX that leaves a loomdb index relation unbuildable';
CREATE EVENT TRIGGER loom_index_am_alter ON ddl_command_end WHEN TAG IN ('ALTER INDEX')
    EXECUTE FUNCTION loom._index_am_alter();

-- The Python half of the C loom_predict (index_am/loomdb_predict.c).
CREATE OR REPLACE FUNCTION loom._predict_model(model text, OUT served boolean,
    OUT classifier boolean, OUT logistic boolean, OUT width integer, OUT margins integer,
    OUT coef double precision[], OUT intercept double precision[],
    OUT classes double precision[])
LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].native_model(plpy, model)
$fn$;
REVOKE ALL ON FUNCTION loom._predict_model(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._predict_model(text) TO loomdb_user;
COMMENT ON FUNCTION loom._predict_model(text) IS
    'a model''s folded coefficients and classes, as the C loom_predict caches them';
CREATE OR REPLACE FUNCTION loom._predict_python(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom._predict_python(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._predict_python(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom._predict_python(text, double precision[]) IS
    'loom_predict in Python (the C loom_predict hands it the rows it does not serve)';
CREATE OR REPLACE FUNCTION loom._predict_proba_python(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba', model, features)
$fn$;
REVOKE ALL ON FUNCTION loom._predict_proba_python(text, double precision[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._predict_proba_python(text, double precision[]) TO loomdb_user;
COMMENT ON FUNCTION loom._predict_proba_python(text, double precision[]) IS
    'loom_predict_proba in Python (the C loom_predict_proba hands it the rows it does not serve)';

-- The access methods themselves, loom.finite and the C loom_predict, when their library is
-- installed (loomdb pg install builds it where PostgreSQL's server headers are present);
-- without it, loom_create_index only, and loom_predict in Python.
DO $do$
DECLARE
    library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                    || '/loomdb_am.so';
    predict_library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                            || '/loomdb_predict.so';
    owner_library text := (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')
                          || '/loomdb_owner.so';
BEGIN
    IF pg_catalog.pg_stat_file(library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: CREATE INDEX … USING mlweaving|toc|dense|pcr '
                     'is unavailable (loom_create_index works), loom_predict is Python', library;
        RETURN;
    END IF;
    CREATE OR REPLACE FUNCTION loom.mlweaving_handler(internal) RETURNS index_am_handler
        LANGUAGE c AS '$libdir/loomdb_am', 'loomdb_mlweaving_handler';
    REVOKE ALL ON FUNCTION loom.mlweaving_handler(internal) FROM PUBLIC;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_am WHERE amname = 'mlweaving') THEN
        CREATE ACCESS METHOD mlweaving TYPE INDEX HANDLER loom.mlweaving_handler;
        COMMENT ON ACCESS METHOD mlweaving IS 'loomdb: lay the table out as mlweaving for loom_train (never used by queries)';
        CREATE OPERATOR CLASS loom.mlweaving_float8_ops DEFAULT FOR TYPE float8 USING mlweaving AS STORAGE float8;
        CREATE OPERATOR CLASS loom.mlweaving_float4_ops DEFAULT FOR TYPE float4 USING mlweaving AS STORAGE float4;
        CREATE OPERATOR CLASS loom.mlweaving_numeric_ops DEFAULT FOR TYPE numeric USING mlweaving AS STORAGE numeric;
        CREATE OPERATOR CLASS loom.mlweaving_int8_ops DEFAULT FOR TYPE int8 USING mlweaving AS STORAGE int8;
        CREATE OPERATOR CLASS loom.mlweaving_int4_ops DEFAULT FOR TYPE int4 USING mlweaving AS STORAGE int4;
        CREATE OPERATOR CLASS loom.mlweaving_int2_ops DEFAULT FOR TYPE int2 USING mlweaving AS STORAGE int2;
        CREATE OPERATOR CLASS loom.mlweaving_bool_ops DEFAULT FOR TYPE bool USING mlweaving AS STORAGE bool;
    END IF;
    CREATE OR REPLACE FUNCTION loom.toc_handler(internal) RETURNS index_am_handler
        LANGUAGE c AS '$libdir/loomdb_am', 'loomdb_toc_handler';
    REVOKE ALL ON FUNCTION loom.toc_handler(internal) FROM PUBLIC;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_am WHERE amname = 'toc') THEN
        CREATE ACCESS METHOD toc TYPE INDEX HANDLER loom.toc_handler;
        COMMENT ON ACCESS METHOD toc IS 'loomdb: lay the table out as toc for loom_train (never used by queries)';
        CREATE OPERATOR CLASS loom.toc_float8_ops DEFAULT FOR TYPE float8 USING toc AS STORAGE float8;
        CREATE OPERATOR CLASS loom.toc_float4_ops DEFAULT FOR TYPE float4 USING toc AS STORAGE float4;
        CREATE OPERATOR CLASS loom.toc_numeric_ops DEFAULT FOR TYPE numeric USING toc AS STORAGE numeric;
        CREATE OPERATOR CLASS loom.toc_int8_ops DEFAULT FOR TYPE int8 USING toc AS STORAGE int8;
        CREATE OPERATOR CLASS loom.toc_int4_ops DEFAULT FOR TYPE int4 USING toc AS STORAGE int4;
        CREATE OPERATOR CLASS loom.toc_int2_ops DEFAULT FOR TYPE int2 USING toc AS STORAGE int2;
        CREATE OPERATOR CLASS loom.toc_bool_ops DEFAULT FOR TYPE bool USING toc AS STORAGE bool;
        CREATE OPERATOR CLASS loom.toc_int2_array_ops DEFAULT FOR TYPE int2[] USING toc AS STORAGE int2[];
        CREATE OPERATOR CLASS loom.toc_int4_array_ops DEFAULT FOR TYPE int4[] USING toc AS STORAGE int4[];
        CREATE OPERATOR CLASS loom.toc_int8_array_ops DEFAULT FOR TYPE int8[] USING toc AS STORAGE int8[];
        CREATE OPERATOR CLASS loom.toc_float4_array_ops DEFAULT FOR TYPE float4[] USING toc AS STORAGE float4[];
        CREATE OPERATOR CLASS loom.toc_float8_array_ops DEFAULT FOR TYPE float8[] USING toc AS STORAGE float8[];
        CREATE OPERATOR CLASS loom.toc_numeric_array_ops DEFAULT FOR TYPE numeric[] USING toc AS STORAGE numeric[];
    END IF;
    CREATE OR REPLACE FUNCTION loom.dense_handler(internal) RETURNS index_am_handler
        LANGUAGE c AS '$libdir/loomdb_am', 'loomdb_dense_handler';
    REVOKE ALL ON FUNCTION loom.dense_handler(internal) FROM PUBLIC;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_am WHERE amname = 'dense') THEN
        CREATE ACCESS METHOD dense TYPE INDEX HANDLER loom.dense_handler;
        COMMENT ON ACCESS METHOD dense IS 'loomdb: lay the table out as dense for loom_train (never used by queries)';
        CREATE OPERATOR CLASS loom.dense_float8_ops DEFAULT FOR TYPE float8 USING dense AS STORAGE float8;
        CREATE OPERATOR CLASS loom.dense_float4_ops DEFAULT FOR TYPE float4 USING dense AS STORAGE float4;
        CREATE OPERATOR CLASS loom.dense_numeric_ops DEFAULT FOR TYPE numeric USING dense AS STORAGE numeric;
        CREATE OPERATOR CLASS loom.dense_int8_ops DEFAULT FOR TYPE int8 USING dense AS STORAGE int8;
        CREATE OPERATOR CLASS loom.dense_int4_ops DEFAULT FOR TYPE int4 USING dense AS STORAGE int4;
        CREATE OPERATOR CLASS loom.dense_int2_ops DEFAULT FOR TYPE int2 USING dense AS STORAGE int2;
        CREATE OPERATOR CLASS loom.dense_bool_ops DEFAULT FOR TYPE bool USING dense AS STORAGE bool;
    END IF;
    CREATE OR REPLACE FUNCTION loom.pcr_handler(internal) RETURNS index_am_handler
        LANGUAGE c AS '$libdir/loomdb_am', 'loomdb_pcr_handler';
    REVOKE ALL ON FUNCTION loom.pcr_handler(internal) FROM PUBLIC;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_am WHERE amname = 'pcr') THEN
        CREATE ACCESS METHOD pcr TYPE INDEX HANDLER loom.pcr_handler;
        COMMENT ON ACCESS METHOD pcr IS 'loomdb: lay the table out as pcr for loom_train (never used by queries)';
        CREATE OPERATOR CLASS loom.pcr_bytea_ops DEFAULT FOR TYPE bytea USING pcr AS STORAGE bytea;
    END IF;
    IF pg_catalog.pg_stat_file(owner_library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: acting on another role''s index is '
                     'refused', owner_library;
    ELSE
    CREATE OR REPLACE FUNCTION loom._owner_begin(role name) RETURNS bigint
        LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS '$libdir/loomdb_owner', 'loomdb_owner_begin';
    REVOKE ALL ON FUNCTION loom._owner_begin(name) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION loom._owner_begin(name) TO loomdb_user;
    CREATE OR REPLACE FUNCTION loom._owner_end(key bigint) RETURNS void
        LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS '$libdir/loomdb_owner', 'loomdb_owner_end';
    REVOKE ALL ON FUNCTION loom._owner_end(bigint) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION loom._owner_end(bigint) TO loomdb_user;
    COMMENT ON FUNCTION loom._owner_begin(name) IS 'act as a role whose SQL loomdb runs, in a security-restricted operation, until loom._owner_end(the key it returns)';
    END IF;
    IF pg_catalog.pg_stat_file(predict_library, true) IS NULL THEN
        RAISE NOTICE 'loomdb: % is not installed: loom_predict is Python', predict_library;
        RETURN;
    END IF;
    -- NULL for NaN and ±infinity: the guard of compiled and deployed models, executable
    -- by everyone (callers of a deployed function need only USAGE on schema loom)
    CREATE OR REPLACE FUNCTION loom.finite(x double precision) RETURNS double precision
        LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS '$libdir/loomdb_predict', 'loomdb_finite';
    COMMENT ON FUNCTION loom.finite(double precision) IS 'its argument, or NULL for NaN and infinity (the guard of loom_predict_sql and deployed functions)';
    -- a change to a model (retrain, drop, version, grant) empties every backend's cache
    CREATE OR REPLACE FUNCTION loom._models_changed() RETURNS trigger
        LANGUAGE c VOLATILE AS '$libdir/loomdb_predict', 'loomdb_models_changed';
    REVOKE ALL ON FUNCTION loom._models_changed() FROM PUBLIC;
    DROP TRIGGER IF EXISTS predict_cache ON loom.models;
    CREATE TRIGGER predict_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON loom.models
        FOR EACH STATEMENT EXECUTE FUNCTION loom._models_changed();
    DROP TRIGGER IF EXISTS predict_cache ON loom.model_versions;
    CREATE TRIGGER predict_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON loom.model_versions
        FOR EACH STATEMENT EXECUTE FUNCTION loom._models_changed();
    DROP TRIGGER IF EXISTS predict_cache ON loom.grants;
    CREATE TRIGGER predict_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON loom.grants
        FOR EACH STATEMENT EXECUTE FUNCTION loom._models_changed();
    CREATE OR REPLACE FUNCTION loom_predict(model text, features double precision[]) RETURNS double precision
        LANGUAGE c STABLE PARALLEL UNSAFE STRICT AS '$libdir/loomdb_predict', 'loomdb_predict';
    CREATE OR REPLACE FUNCTION loom_predict_proba(model text, features double precision[]) RETURNS double precision
        LANGUAGE c STABLE PARALLEL UNSAFE STRICT AS '$libdir/loomdb_predict', 'loomdb_predict_proba';
END
$do$;

-- loomdb 0.1.0's loom_drop_model(text) and loom_evaluate(text, text): this version's
-- loom_drop_model(text, bigint) and loom_evaluate(text, text, text) with the defaulted last
-- argument left out.  Kept beside those under their names, loom_drop_model('m') would match
-- both ("is not unique"); dropped, they would take with them (or stop the update on) a user's
-- view or BEGIN ATOMIC function that calls them, which hold a function by identity, not by name.
-- So the update from 0.1.0 moves them into loom under names of their own (what called them still
-- does), and every install has them there, so that a dump of such a view restores anywhere.
-- Part of the generated install and update scripts, after the functions.
CREATE OR REPLACE FUNCTION loom.superseded_drop_model_0_1_0(model text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_model', model)
$fn$;
CREATE OR REPLACE FUNCTION loom.superseded_evaluate_0_1_0(model text, source text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate', model, source)
$fn$;
REVOKE ALL ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom.superseded_drop_model_0_1_0(text) IS
    'loomdb 0.1.0''s loom_drop_model(text), kept for what calls it: loom_drop_model(model)';
COMMENT ON FUNCTION loom.superseded_evaluate_0_1_0(text, text) IS
    'loomdb 0.1.0''s loom_evaluate(text, text), kept for what calls it: loom_evaluate(model, source)';

-- An update from a version before 0.4.0, last: the rows it kept name their owner (and a grant
-- its grantee) by name only.  Each gains the role of that name, where one exists now; a row
-- whose role is gone keeps no role, and no role sees it but a superuser.
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'model_versions', 'trials', 'indexes', 'grants',
                             'deployments', 'index_relations'] LOOP
        IF pg_catalog.to_regclass('loom.' || t) IS NOT NULL THEN
            EXECUTE format('UPDATE loom.%I AS x SET owner_role = r.oid::pg_catalog.regrole '
                           'FROM pg_catalog.pg_roles AS r '
                           'WHERE x.owner_role IS NULL AND r.rolname = x.owner', t);
        END IF;
    END LOOP;
END
$do$;
UPDATE loom.grants AS g SET grantee_role = r.oid::pg_catalog.regrole
FROM pg_catalog.pg_roles AS r
WHERE g.grantee_role IS NULL AND g.grantee <> 'public' AND r.rolname = g.grantee;
