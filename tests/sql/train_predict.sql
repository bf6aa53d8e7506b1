-- train_predict: train, evaluate and predict in SELECT and WHERE; the compiled expressions
-- (loom_predict_sql, loom_predict_proba_sql) agree with the UDFs on every row.
-- Only deterministic fields are shown: counts, kinds, classes, metrics as thresholds.
-- loom_evaluate(model, 'SELECT …') runs any query it is given, so it also serves to run a
-- compiled expression on both engines (no dynamic SQL needed): evaluated against labels made
-- by the compiled expression itself, the UDF's accuracy is 1 exactly when they agree.

-- 400 points on a grid-like scatter of the unit square; three targets.
CREATE TABLE tp_points AS
SELECT id, alpha, beta,
       CASE WHEN alpha + beta > 1 THEN 1 ELSE 0 END AS above,
       CASE WHEN alpha < 0.33 THEN 0 WHEN alpha < 0.66 THEN 1 ELSE 2 END AS band,
       3 * alpha - 2 * beta + 1 AS target
FROM (SELECT CAST(i AS INTEGER) AS id,
             CAST((i * 37) % 101 AS DOUBLE PRECISION) / 101 AS alpha,
             CAST((i * 53) % 97 AS DOUBLE PRECISION) / 97 AS beta
      FROM generate_series(1, 400) AS g(i)) AS s;
SELECT count(*) AS points, sum(above) AS above, count(DISTINCT band) AS bands FROM tp_points;

-- Binary logistic regression from a SELECT source.
CREATE TABLE tp_summary AS
SELECT CAST(loom_train('tp_logistic', 'SELECT alpha, beta, above FROM tp_points', 'above',
                       '{"epochs": 50}') AS JSON) AS s;
SELECT s->>'model' AS model, s->>'kind' AS kind, s->>'features' AS features,
       s->>'rows' AS rows, s->>'skipped' AS skipped, s->>'format' AS format,
       s->>'backend' AS backend, s->>'classes' AS classes
FROM tp_summary;

-- Evaluate: accuracy and roc_auc above a threshold, row counts exact.
SELECT e->>'rows' AS rows, e->>'skipped' AS skipped,
       CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.95 AS accurate,
       CAST(e->>'roc_auc' AS DOUBLE PRECISION) > 0.95 AS ranks_well,
       CAST(e->>'log_loss' AS DOUBLE PRECISION) < 0.5 AS low_loss
FROM (SELECT CAST(loom_evaluate('tp_logistic', 'tp_points') AS JSON) AS e) AS q;

-- Predict in SELECT: most points of each class predicted right.
SELECT above, count(*) AS points,
       sum(CASE WHEN loom_predict('tp_logistic', ARRAY[alpha, beta]) = above THEN 1 ELSE 0 END)
           >= 0.95 * count(*) AS mostly_right
FROM tp_points GROUP BY above ORDER BY above;

-- Predict in WHERE; the probability agrees with the label it predicts.
SELECT count(*) <= 10 AS few_false_positives
FROM tp_points WHERE loom_predict('tp_logistic', ARRAY[alpha, beta]) = 1 AND above = 0;
SELECT count(*) AS disagreements
FROM tp_points
WHERE (loom_predict_proba('tp_logistic', ARRAY[alpha, beta]) > 0.5)
      <> (loom_predict('tp_logistic', ARRAY[alpha, beta]) = 1);
SELECT count(*) AS out_of_range
FROM tp_points
WHERE loom_predict_proba('tp_logistic', ARRAY[alpha, beta]) < 0
   OR loom_predict_proba('tp_logistic', ARRAY[alpha, beta]) > 1;

-- The compiled expressions mention the feature columns and equal the UDFs on every row.
SELECT strpos(loom_predict_sql('tp_logistic'), '"alpha"') > 0 AS names_alpha,
       strpos(loom_predict_sql('tp_logistic'), '"beta"') > 0 AS names_beta,
       strpos(loom_predict_proba_sql('tp_logistic'), 'exp(') > 0 AS has_sigmoid;
SELECT e->>'rows' AS rows, CAST(e->>'accuracy' AS DOUBLE PRECISION) = 1 AS compiled_equals_udf
FROM (SELECT CAST(loom_evaluate('tp_logistic',
        'SELECT alpha, beta, ' || loom_predict_sql('tp_logistic') || ' AS above FROM tp_points')
      AS JSON) AS e) AS q;
-- The compiled probability, row by row, within 1e-12 of loom_predict_proba: the label below
-- is the UDF's prediction where they agree and its opposite where they do not.
SELECT e->>'rows' AS rows, CAST(e->>'accuracy' AS DOUBLE PRECISION) = 1 AS compiled_proba_equals_udf
FROM (SELECT CAST(loom_evaluate('tp_logistic',
        'SELECT alpha, beta, CASE WHEN abs((' || loom_predict_proba_sql('tp_logistic')
        || ') - loom_predict_proba(''tp_logistic'', ARRAY[alpha, beta])) <= 1e-12'
        || ' THEN loom_predict(''tp_logistic'', ARRAY[alpha, beta])'
        || ' ELSE 1 - loom_predict(''tp_logistic'', ARRAY[alpha, beta]) END AS above FROM tp_points')
      AS JSON) AS e) AS q;

-- Three classes: one-vs-rest logistic regression from a table (every numeric column but the
-- label is a feature unless "features" says otherwise).
SELECT s->>'kind' AS kind, s->>'features' AS features, s->>'classes' AS classes
FROM (SELECT CAST(loom_train('tp_bands', 'tp_points', 'band',
        '{"features": ["alpha", "beta"], "epochs": 100}') AS JSON) AS s) AS q;
SELECT band, count(*) AS points,
       sum(CASE WHEN loom_predict('tp_bands', ARRAY[alpha, beta]) = band THEN 1 ELSE 0 END)
           >= 0.8 * count(*) AS mostly_right,
       min(loom_predict_proba('tp_bands', ARRAY[alpha, beta])) > 0 AS proba_positive
FROM tp_points GROUP BY band ORDER BY band;
SELECT CAST(e->>'accuracy' AS DOUBLE PRECISION) = 1 AS compiled_equals_udf
FROM (SELECT CAST(loom_evaluate('tp_bands',
        'SELECT alpha, beta, ' || loom_predict_sql('tp_bands') || ' AS band FROM tp_points')
      AS JSON) AS e) AS q;

-- Linear regression: an exact linear target is recovered.
SELECT s->>'kind' AS kind, s->>'features' AS features
FROM (SELECT CAST(loom_train('tp_linear', 'SELECT alpha, beta, target FROM tp_points', 'target',
        '{"model": "linear", "epochs": 200}') AS JSON) AS s) AS q;
SELECT e->>'rows' AS rows,
       CAST(e->>'r2' AS DOUBLE PRECISION) > 0.99 AS fits,
       CAST(e->>'mae' AS DOUBLE PRECISION) < 0.1 AS close
FROM (SELECT CAST(loom_evaluate('tp_linear', 'tp_points') AS JSON) AS e) AS q;
SELECT count(*) AS far_off
FROM tp_points WHERE abs(loom_predict('tp_linear', ARRAY[alpha, beta]) - target) > 0.25;
SELECT CAST(e->>'mse' AS DOUBLE PRECISION) < 1e-20 AS compiled_equals_udf
FROM (SELECT CAST(loom_evaluate('tp_linear',
        'SELECT alpha, beta, ' || loom_predict_sql('tp_linear') || ' AS target FROM tp_points')
      AS JSON) AS e) AS q;

-- A linear SVM: labels, no probabilities.
SELECT s->>'kind' AS kind
FROM (SELECT CAST(loom_train('tp_svm', 'SELECT alpha, beta, above FROM tp_points', 'above',
        '{"model": "svm", "epochs": 50}') AS JSON) AS s) AS q;
SELECT CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.95 AS accurate
FROM (SELECT CAST(loom_evaluate('tp_svm', 'tp_points') AS JSON) AS e) AS q;
SELECT CAST(e->>'accuracy' AS DOUBLE PRECISION) = 1 AS compiled_equals_udf
FROM (SELECT CAST(loom_evaluate('tp_svm',
        'SELECT alpha, beta, ' || loom_predict_sql('tp_svm') || ' AS above FROM tp_points')
      AS JSON) AS e) AS q;
SELECT loom_predict_proba('tp_svm', ARRAY[0.5, 0.5]);
SELECT loom_predict_proba_sql('tp_svm');

-- Predicting with the wrong number of features.
SELECT loom_predict('tp_logistic', ARRAY[0.5, 0.5, 0.5]);

-- Clean up: the catalog holds none of this file's models afterwards.
SELECT loom_drop_model(name) AS dropped FROM loom.models WHERE left(name, 3) = 'tp_' ORDER BY name;
SELECT count(*) AS models_left FROM loom.models WHERE left(name, 3) = 'tp_';
DROP TABLE tp_summary;
DROP TABLE tp_points;
