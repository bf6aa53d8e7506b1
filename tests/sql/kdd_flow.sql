-- kdd_flow: the flow a BigQuery ML or PostgresML user expects, the same SQL on both engines —
-- a raw table with text columns, NULLs and a text label → train with preprocessing and a held-out
-- test split → tune → deploy a version → predict by name → the ROC curve and the weights.

CREATE TABLE kdd_raw AS
SELECT i AS id,
       CASE i % 3 WHEN 0 THEN 'tcp' WHEN 1 THEN 'udp' ELSE 'icmp' END AS protocol,
       CASE i % 4 WHEN 0 THEN 'http' WHEN 1 THEN 'smtp' WHEN 2 THEN NULL ELSE 'ftp' END AS service,
       CASE WHEN i % 11 = 0 THEN NULL
            ELSE CAST((i * 37) % 101 AS DOUBLE PRECISION) / 10 END AS duration,
       CAST((i * 53) % 97 AS DOUBLE PRECISION) AS bytes,
       CASE WHEN (i % 3 = 0 AND (i * 53) % 97 > 30) OR (i * 37) % 101 > 85 THEN 'attack'
            ELSE 'normal' END AS verdict
FROM generate_series(1, 900) AS g(i);

-- Train: text columns one-hot encoded, NULL durations imputed, a fifth of the rows held out;
-- the label's classes stay text ('attack' < 'normal': 'normal' is the positive class).
SELECT s->>'rows' AS trained_rows
FROM (SELECT CAST(loom_train('kdd', 'kdd_raw', 'verdict',
             '{"features": ["protocol", "service", "duration", "bytes"],
               "preprocess": {"duration": {"impute": "mean"}},
               "model": "logistic", "test_fraction": 0.2, "seed": 7, "epochs": 30}')
             AS JSON) AS s) AS q;
SELECT o->'split'->'rows'->>'source' AS source_rows, o->'split'->'rows'->>'test' AS test_rows
FROM (SELECT CAST(options AS JSON) AS o FROM loom.models WHERE name = 'kdd') AS q;
SELECT o->>'label_classes' AS classes FROM (SELECT CAST(options AS JSON) AS o FROM loom.models WHERE name = 'kdd') AS q;
SELECT feature, weight > 0 AS raises_the_odds_of_normal FROM loom_weights('kdd') ORDER BY feature;

-- Evaluate on the rows the model never saw.
SELECT CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.75 AS accurate_on_test,
       CAST(e->>'roc_auc' AS DOUBLE PRECISION) > 0.8 AS ranks_well_on_test
FROM (SELECT CAST(loom_evaluate('kdd', 'kdd_raw', '{"split": "test"}') AS JSON) AS e) AS q;

-- Tune the step and the penalty on the same split; the best trial becomes version 2.
SELECT s->>'trials' AS trials, s->>'failed' AS failed
FROM (SELECT CAST(loom_tune('kdd', 'kdd_raw', 'verdict',
             '{"features": ["protocol", "service", "duration", "bytes"],
               "preprocess": {"duration": {"impute": "mean"}},
               "model": "logistic", "test_fraction": 0.2, "seed": 7, "epochs": 30,
               "lr": [0.05, 0.5], "l2": [0, 0.001], "replace": true}') AS JSON) AS s) AS q;
SELECT count(*) AS recorded_trials FROM loom_trials('kdd');
SELECT version, current FROM loom_model_versions('kdd') ORDER BY version;

-- Deploy the latest version as a native SQL function over the raw columns.
SELECT CAST(loom_deploy('kdd', '{"version": "latest"}') AS JSON)->>'version' AS deployed;

-- Predict by name (the row itself) and through the deployed function: the same answers.
SELECT count(*) AS scored,
       sum(CASE WHEN predict_kdd(protocol, service, duration, bytes)
                     = loom_predict_class('kdd', r) THEN 1 ELSE 0 END) AS agree
FROM kdd_raw AS r;
SELECT protocol, service, duration, bytes, verdict, loom_predict_class('kdd', r) AS predicted
FROM kdd_raw AS r WHERE id IN (1, 2, 11, 12) ORDER BY id;

-- The ROC curve on the whole table.
SELECT count(*) > 2 AS has_points, min(fpr) AS lowest_fpr, max(tpr) AS highest_tpr
FROM loom_roc_curve('kdd', 'kdd_raw');

SELECT loom_drop_model('kdd');
SELECT count(*) AS left_behind FROM loom.deployments WHERE model = 'kdd';
DROP TABLE kdd_raw;
