-- loomdb 0.1.0: generated from udfs/loomdb.toml by loomdb.udfs.pgsql; do not edit by hand.
\echo Use "CREATE EXTENSION loomdb" to load this file. \quit

CREATE SCHEMA IF NOT EXISTS loom;
CREATE TABLE IF NOT EXISTS loom.models (name text PRIMARY KEY, uid text, kind text, coefficients text, intercept text, feature_names text, classes text, standardization text, options text, history text, rows_processed bigint, rows_skipped bigint, timings text, storage_format text, backend text, source text, label text, report text, created_at timestamptz);
CREATE TABLE IF NOT EXISTS loom.indexes (name text PRIMARY KEY, source text, label text, columns text, format text, options text, stats text, label_counts text, rows bigint, skipped bigint, batches bigint, bytes bigint, storage_table text, source_signature text, built_at timestamptz);
SELECT pg_catalog.pg_extension_config_dump('loom.models', '');
SELECT pg_catalog.pg_extension_config_dump('loom.indexes', '');

CREATE FUNCTION loom._bootstrap() RETURNS void
LANGUAGE plpython3u VOLATILE AS $fn$
import os, sys, tempfile
row = plpy.execute("SELECT current_setting('loomdb.python_path', true) AS p, "
                   "current_setting('loomdb.numba_cache_dir', true) AS c")[0]
for path in reversed([p for p in (row['p'] or '').split(':') if p]):
    if path not in sys.path:
        sys.path.insert(0, path)
os.environ.setdefault('NUMBA_CACHE_DIR', row['c'] or os.path.join(tempfile.gettempdir(), 'loomdb-numba'))
try:
    from loomdb.engines.postgres import server
except ImportError as e:
    plpy.error('loomdb cannot be imported by the server\'s Python: %s' % e,
               hint='run "loomdb pg install --dsn ..." on the server machine, or set loomdb.python_path')
GD['loomdb'] = server
$fn$;
COMMENT ON FUNCTION loom._bootstrap() IS 'load loomdb into this session''s Python (called by every loomdb function once)';

CREATE FUNCTION loom_train(model text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_train', model, source, label, options)
$fn$;
COMMENT ON FUNCTION loom_train(text, text, text, text) IS 'train a generalized linear model (linear, logistic, svm) on a table, view or SELECT; options are JSON; returns a JSON summary';

CREATE FUNCTION loom_predict(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict', model, features)
$fn$;
COMMENT ON FUNCTION loom_predict(text, double precision[]) IS 'predict with a trained model: the class label for classifiers, the value for linear models';

CREATE FUNCTION loom_predict_proba(model text, features double precision[]) RETURNS double precision
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba', model, features)
$fn$;
COMMENT ON FUNCTION loom_predict_proba(text, double precision[]) IS 'probability of the positive class (binary logistic) or of the predicted class (one-vs-rest)';

CREATE FUNCTION loom_predict_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_sql', model)
$fn$;
COMMENT ON FUNCTION loom_predict_sql(text) IS 'the model compiled to a native SQL expression over its feature columns (what loom_predict computes)';

CREATE FUNCTION loom_predict_proba_sql(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_predict_proba_sql', model)
$fn$;
COMMENT ON FUNCTION loom_predict_proba_sql(text) IS 'the model''s probability compiled to a native SQL expression (what loom_predict_proba computes)';

CREATE FUNCTION loom_evaluate(model text, source text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate', model, source)
$fn$;
COMMENT ON FUNCTION loom_evaluate(text, text) IS 'evaluate a model on a table, view or SELECT holding its features and label; returns JSON metrics';

CREATE FUNCTION loom_evaluate_index(model text, index text, backend text DEFAULT 'cpu') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate_index', model, index, backend)
$fn$;
COMMENT ON FUNCTION loom_evaluate_index(text, text, text) IS 'evaluate a model on an index''s stored batches, computed on the stored form by a backend (A·w on TOC blobs); returns JSON metrics';

CREATE FUNCTION loom_model_info(model text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_model_info', model)
$fn$;
COMMENT ON FUNCTION loom_model_info(text) IS 'everything the catalog knows of a model, as JSON';

CREATE FUNCTION loom_drop_model(model text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_model', model)
$fn$;
COMMENT ON FUNCTION loom_drop_model(text) IS 'remove a model from the catalog';

CREATE FUNCTION loom_create_index(name text, source text, label text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_create_index', name, source, label, options)
$fn$;
COMMENT ON FUNCTION loom_create_index(text, text, text, text) IS 'lay a table out for learning in a storage format (dense, toc, mlweaving); what CREATE INDEX ... USING runs';

CREATE FUNCTION loom_drop_index(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_index', name)
$fn$;
COMMENT ON FUNCTION loom_drop_index(text) IS 'drop a loomdb index and its storage';

CREATE FUNCTION loom_reindex(name text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_reindex', name)
$fn$;
COMMENT ON FUNCTION loom_reindex(text) IS 'rebuild a loomdb index from its source with the same options';

CREATE FUNCTION loom_simulate(index text, options text DEFAULT '{}') RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_simulate', index, options)
$fn$;
COMMENT ON FUNCTION loom_simulate(text, text) IS 'the MLWeaving engine''s simulated cycles, bytes, seconds and throughput for a job on an index, without training (JSON)';

CREATE FUNCTION loom_backends() RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_backends')
$fn$;
COMMENT ON FUNCTION loom_backends() IS 'the accelerator backends, each with whether it is usable here and, if not, why (JSON)';

CREATE FUNCTION loom_version() RETURNS text
LANGUAGE plpython3u IMMUTABLE PARALLEL UNSAFE AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_version')
$fn$;
COMMENT ON FUNCTION loom_version() IS 'the loomdb version the server runs';
