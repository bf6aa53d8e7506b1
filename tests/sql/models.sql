-- models: what the catalog keeps of a model (its deterministic fields), replace, warm_start,
-- drop, and grants (PostgreSQL has roles; DuckDB refuses with its reason).

CREATE TABLE md_points AS
SELECT f1, f2, f3, CASE WHEN f1 - f2 > 0 THEN 1 ELSE 0 END AS y
FROM (SELECT CAST((i * 37) % 101 AS DOUBLE PRECISION) / 101 AS f1,
             CAST((i * 53) % 97 AS DOUBLE PRECISION) / 97 AS f2,
             CAST(i % 4 AS DOUBLE PRECISION) AS f3
      FROM generate_series(1, 300) AS g(i)) AS s;

CREATE TABLE md_first AS
SELECT CAST(loom_train('md_a', 'md_points', 'y',
                       '{"features": ["f1", "f2"], "epochs": 7, "tol": 0, "batch_size": 32}')
            AS JSON) AS s;
SELECT s->>'epochs' AS epochs, s->>'rows' AS rows FROM md_first;

-- loom_model_info: everything the catalog knows, as JSON; here its deterministic fields.
CREATE TABLE md_info AS SELECT CAST(loom_model_info('md_a') AS JSON) AS i;
SELECT i->>'name' AS name, i->>'kind' AS kind, i->>'feature_names' AS feature_names,
       i->>'classes' AS classes, i->>'label' AS label, i->>'source' AS source,
       i->>'storage_format' AS storage_format, i->>'backend' AS backend
FROM md_info;
SELECT i->>'rows_processed' AS rows_processed, i->>'rows_skipped' AS rows_skipped,
       json_array_length(i->'coefficients') AS coefficients,
       json_array_length(i->'intercept') AS intercepts,
       json_array_length(i->'history') AS epochs_in_history,
       i->'standardization'->>'method' AS standardization,
       json_array_length(i->'standardization'->'shift') AS shifts
FROM md_info;
-- The options the train actually used: given ones as given, the others at their defaults.
SELECT i->'options'->>'model' AS model, i->'options'->>'epochs' AS epochs,
       i->'options'->>'tol' AS tol, i->'options'->>'batch_size' AS batch_size,
       i->'options'->>'seed' AS seed, i->'options'->>'nulls' AS nulls,
       i->'options'->>'format' AS format, i->'options'->>'warm_start' AS warm_start,
       (i->'options'->>'lr') IS NOT NULL AS lr_recorded
FROM md_info;
-- (Parenthesised: DuckDB binds IS NOT NULL tighter than ->>.)
SELECT (i->>'uid') IS NOT NULL AS has_uid, (i->>'created_at') IS NOT NULL AS has_created_at,
       (i->'timings'->>'total_s') IS NOT NULL AS has_timings
FROM md_info;
-- The catalog table holds the same.
SELECT name, kind, feature_names, classes, storage_format, backend, source, label,
       rows_processed, rows_skipped
FROM loom.models WHERE name = 'md_a';

-- A name in use is refused; replace overwrites it (a new uid).
SELECT loom_train('md_a', 'md_points', 'y');
SELECT CAST(loom_train('md_a', 'md_points', 'y',
                       '{"replace": true, "model": "svm", "epochs": 3, "tol": 0}') AS JSON)->>'kind'
       AS kind;
SELECT m.kind, m.feature_names, m.uid <> (i->>'uid') AS new_uid
FROM loom.models AS m, md_info WHERE m.name = 'md_a';

-- warm_start continues from the stored model: same kind and features required.
SELECT loom_train('md_b', 'md_points', 'y', '{"warm_start": true}');
CREATE TABLE md_cold AS
SELECT CAST(loom_train('md_b', 'md_points', 'y', '{"epochs": 2, "tol": 0, "lr": 0.05}') AS JSON) AS s;
CREATE TABLE md_warm AS
SELECT CAST(loom_train('md_b', 'md_points', 'y',
                       '{"warm_start": true, "epochs": 2, "tol": 0, "lr": 0.05}') AS JSON) AS s;
SELECT CAST(w.s->>'loss' AS DOUBLE PRECISION) < CAST(c.s->>'loss' AS DOUBLE PRECISION)
       AS warm_start_lowers_the_loss,
       w.s->>'features' AS features
FROM md_cold AS c, md_warm AS w;
SELECT CAST(loom_model_info('md_b') AS JSON)->'options'->>'warm_start' AS warm_start;
SELECT loom_train('md_b', 'md_points', 'y', '{"warm_start": true, "model": "linear"}');
SELECT loom_train('md_b', 'md_points', 'y', '{"warm_start": true, "features": ["f1", "f2"]}');

-- Grants: PostgreSQL roles see and predict with a model only when granted; DuckDB has no
-- roles and says so.
SELECT loom_grant('md_b', 'public');
SELECT loom_revoke('md_b', 'public');
SELECT loom_grant('md_b', 'md_nobody');
SELECT loom_grant('md_nosuch', 'public');

-- Drop: the model is gone, and so are predictions with it.
SELECT loom_drop_model('md_a') AS dropped;
SELECT loom_drop_model('md_a');
SELECT loom_predict('md_a', ARRAY[0.5, 0.5]);
SELECT loom_model_info('md_a');
SELECT name FROM loom.models WHERE left(name, 3) = 'md_' ORDER BY name;

-- Clean up.
SELECT loom_drop_model(name) AS dropped FROM loom.models WHERE left(name, 3) = 'md_' ORDER BY name;
SELECT count(*) AS models_left FROM loom.models WHERE left(name, 3) = 'md_';
DROP TABLE md_warm;
DROP TABLE md_cold;
DROP TABLE md_info;
DROP TABLE md_first;
DROP TABLE md_points;
