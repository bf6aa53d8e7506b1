-- options_errors: every bad option, value, name and source is refused with its message and
-- hint, and a refused call changes nothing (the catalog and the tables are as they were).

CREATE TABLE oe_points AS
SELECT CAST(i AS DOUBLE PRECISION) / 60 AS x0,
       CAST(i % 7 AS DOUBLE PRECISION) AS x1,
       CAST('row ' || CAST(i AS VARCHAR(8)) AS VARCHAR(16)) AS note,
       i % 2 AS y
FROM generate_series(1, 60) AS g(i);

-- Options: an unknown name gets a suggestion; values are typed and bounded.
SELECT loom_train('oe_m', 'oe_points', 'y', '{"epoch": 3}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"learning_rate": 0.1}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"model": "forest"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"epochs": -1}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"epochs": 2.5}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"epochs": "ten"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"lr": 0}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"l2": -0.5}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"batch_size": 0}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"seed": 4294967296}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"nulls": "ignore"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"standardize": "robust"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"optimizer": "lbfgs"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"lr_schedule": "cosine"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"validation_fraction": 1.5}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"fit_intercept": "yes"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"features": "x0"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"class_weight": "heavy"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"backend": "tpu"}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"format": "parquet"}');

-- Options must be one JSON object: no NaN or Infinity, no deep nesting.
SELECT loom_train('oe_m', 'oe_points', 'y', 'not json');
SELECT loom_train('oe_m', 'oe_points', 'y', '[1, 2]');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"lr": NaN}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"l2": Infinity}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"lr": -Infinity}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"class_weight": {"1": {"a": {"b": {"c": [[[[[[[[1]]]]]]]]}}}}}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"epochs": 1e400}');

-- Names: a model, index, label, feature or source that is not there, or not a name.
SELECT loom_train('', 'oe_points', 'y');
SELECT loom_train('1abc', 'oe_points', 'y');
SELECT loom_train('a"b', 'oe_points', 'y');
SELECT loom_train('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'oe_points', 'y');
SELECT loom_train('oe_m', 'oe_nosuch', 'y');
SELECT loom_train('oe_m', 'oe_points', 'nope');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"features": ["x0", "nope"]}');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"features": ["x0", "note"], "preprocess": {"note": {"impute": "mean"}}}');
SELECT loom_train('oe_m', NULL, 'y', '{"index": "oe_nosuch"}');
SELECT loom_train('oe_m', NULL, 'y');
SELECT loom_create_index('oe_i', 'oe_points', 'y', '{"format": "weaving"}');
SELECT loom_predict('oe_nosuch', ARRAY[1.0, 2.0]);
SELECT loom_evaluate('oe_nosuch', 'oe_points');
SELECT loom_model_info('oe_nosuch');
SELECT loom_drop_model('oe_nosuch');
SELECT loom_drop_index('oe_nosuch');

-- Injection attempts in names and sources: refused, nothing run.
SELECT loom_train('x''; DROP TABLE oe_points; --', 'oe_points', 'y');
SELECT loom_train('robert''); DELETE FROM loom.models;--', 'oe_points', 'y');
SELECT loom_create_index('x''; DROP TABLE oe_points; --', 'oe_points', 'y');
SELECT loom_train('oe_m', 'oe_points; DROP TABLE oe_points', 'y');
SELECT loom_train('oe_m', 'oe_points WHERE 1=1; DELETE FROM loom.models', 'y');
SELECT loom_train('oe_m', 'SELECT 1; SELECT 2', 'y');
SELECT loom_train('oe_m', 'DELETE FROM oe_points RETURNING *', 'y');
SELECT loom_train('oe_m', 'oe_points', 'y"; DROP TABLE oe_points; --');
SELECT loom_train('oe_m', 'oe_points', 'y', '{"features": ["x0\"; DROP TABLE oe_points; --"]}');
SELECT count(*) AS points_still_there FROM oe_points;
SELECT count(*) AS models FROM loom.models WHERE left(name, 3) = 'oe_';

-- Data the trainer cannot use.
SELECT loom_train('oe_m', 'SELECT * FROM oe_points WHERE x0 > 100', 'y');
SELECT loom_train('oe_m', 'SELECT x0, x1, 1 AS y FROM oe_points', 'y');
SELECT loom_train('oe_m', 'SELECT x0, x1, y FROM oe_points WHERE y = 1', 'y');
SELECT loom_train('oe_m', 'SELECT x0, CAST(''NaN'' AS DOUBLE PRECISION) AS x1, y FROM oe_points', 'y');
SELECT loom_train('oe_m', 'SELECT x0, CAST(''Infinity'' AS DOUBLE PRECISION) AS x1, y FROM oe_points', 'y');

-- NULLs: refused by default, skipped and counted with {"nulls": "skip"}.
CREATE TABLE oe_holes AS
SELECT x0, CASE WHEN x1 = 3 THEN NULL ELSE x1 END AS x1,
       CASE WHEN x0 * 60 = 7 THEN NULL ELSE y END AS y
FROM oe_points;
SELECT count(*) AS rows, count(x1) AS with_x1, count(y) AS with_label FROM oe_holes;
SELECT loom_train('oe_m', 'oe_holes', 'y');
SELECT s->>'rows' AS rows, s->>'skipped' AS skipped
FROM (SELECT CAST(loom_train('oe_m', 'oe_holes', 'y', '{"nulls": "skip", "epochs": 5}') AS JSON) AS s) AS q;
SELECT rows_processed, rows_skipped FROM loom.models WHERE name = 'oe_m';

-- A name in use, then the option that replaces it.
SELECT loom_train('oe_m', 'oe_points', 'y', '{"features": ["x0", "x1"]}');
SELECT s->>'rows' AS rows
FROM (SELECT CAST(loom_train('oe_m', 'oe_points', 'y',
        '{"features": ["x0", "x1"], "replace": true, "epochs": 5}') AS JSON) AS s) AS q;

-- Clean up.
SELECT loom_drop_model(name) AS dropped FROM loom.models WHERE left(name, 3) = 'oe_' ORDER BY name;
DROP TABLE oe_holes;
DROP TABLE oe_points;
