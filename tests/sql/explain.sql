-- explain: the functions returning rows (loom_roc_curve, loom_weights, loom_training_info),
-- called in FROM with the same SQL on both engines, and loom_evaluate's confusion matrix.

CREATE TABLE ex_points AS
SELECT f1, f2, f3, CASE WHEN 3 * f1 - f2 > 1 THEN 1 ELSE 0 END AS y
FROM (SELECT CAST((i * 37) % 101 AS DOUBLE PRECISION) / 101 AS f1,
             CAST((i * 53) % 97 AS DOUBLE PRECISION) / 97 AS f2,
             CAST(i % 4 AS DOUBLE PRECISION) AS f3
      FROM generate_series(1, 300) AS g(i)) AS s;

CREATE TABLE ex_first AS
SELECT CAST(loom_train('ex_m', 'ex_points', 'y',
                       '{"epochs": 30, "tol": 0, "batch_size": 32, "validation_fraction": 0.2}')
            AS JSON) AS s;
SELECT s->>'epochs' AS epochs FROM ex_first;

-- loom_weights: a row per feature and the intercept; the positive class; ranks by magnitude.
SELECT feature, class, rank, odds_ratio > 0 AS has_odds_ratio
FROM loom_weights('ex_m') ORDER BY rank, feature;
SELECT count(*) AS signs_agree FROM loom_weights('ex_m')
WHERE feature <> '(intercept)' AND weight * weight_standardized > 0;

-- loom_training_info: one row per epoch, validated, trained on the first 80% of the rows.
SELECT count(*) AS epochs, min(epoch) AS first, max(epoch) AS last,
       count(validation_loss) AS validated, count(precision) AS with_precision,
       min(rows) AS min_rows, max(rows) AS max_rows
FROM loom_training_info('ex_m');

-- loom_roc_curve: from (0, 0) at threshold infinity to (1, 1); tpr and fpr never decrease.
SELECT count(*) > 10 AS many_points, min(tpr) AS min_tpr, max(tpr) AS max_tpr,
       min(fpr) AS min_fpr, max(fpr) AS max_fpr, max(threshold) > 1 AS top_threshold
FROM loom_roc_curve('ex_m', 'ex_points');

-- loom_evaluate's confusion matrix: labels, rows = true class.
CREATE TABLE ex_eval AS SELECT CAST(loom_evaluate('ex_m', 'ex_points') AS JSON) AS e;
SELECT e->'confusion_matrix'->>'labels' AS labels,
       json_array_length(e->'confusion_matrix'->'matrix') AS matrix_rows,
       CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.9 AS accurate
FROM ex_eval;

-- Bad input: clear errors with hints.
SELECT * FROM loom_weights('ex_none');
SELECT * FROM loom_training_info('ex_none');
SELECT * FROM loom_roc_curve('ex_m', 'SELECT f1, f2, y FROM ex_points');
SELECT * FROM loom_roc_curve('ex_m', 'SELECT f1, f2, f3 FROM ex_points');
SELECT * FROM loom_roc_curve('ex_m', 'SELECT * FROM ex_points WHERE y = 1');
CREATE TABLE ex_lin AS SELECT loom_train('ex_l', 'ex_points', 'f1', '{"model": "linear", "epochs": 2}') AS s;
SELECT * FROM loom_roc_curve('ex_l', 'ex_points');
SELECT count(*) AS regression_rows, count(class) AS with_class, count(odds_ratio) AS with_odds
FROM loom_weights('ex_l');

SELECT loom_drop_model('ex_m');
SELECT loom_drop_model('ex_l');
DROP TABLE ex_lin;
DROP TABLE ex_eval;
DROP TABLE ex_first;
DROP TABLE ex_points;
