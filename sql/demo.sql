-- loomdb demo: train, evaluate and predict inside the database.
-- Runs unchanged on PostgreSQL (psql -f sql/demo.sql) and on DuckDB
-- (loomdb sql --duckdb demo.duckdb -f sql/demo.sql).
-- Data: Fisher's iris measurements (150 flowers, 3 species), as shipped with scikit-learn.

DROP TABLE IF EXISTS iris;
CREATE TABLE iris (
    sepal_length DOUBLE PRECISION,
    sepal_width DOUBLE PRECISION,
    petal_length DOUBLE PRECISION,
    petal_width DOUBLE PRECISION,
    species INTEGER  -- 0 setosa, 1 versicolor, 2 virginica
);
INSERT INTO iris VALUES
(5.1, 3.5, 1.4, 0.2, 0),
(4.9, 3.0, 1.4, 0.2, 0),
(4.7, 3.2, 1.3, 0.2, 0),
(4.6, 3.1, 1.5, 0.2, 0),
(5.0, 3.6, 1.4, 0.2, 0),
(5.4, 3.9, 1.7, 0.4, 0),
(4.6, 3.4, 1.4, 0.3, 0),
(5.0, 3.4, 1.5, 0.2, 0),
(4.4, 2.9, 1.4, 0.2, 0),
(4.9, 3.1, 1.5, 0.1, 0),
(5.4, 3.7, 1.5, 0.2, 0),
(4.8, 3.4, 1.6, 0.2, 0),
(4.8, 3.0, 1.4, 0.1, 0),
(4.3, 3.0, 1.1, 0.1, 0),
(5.8, 4.0, 1.2, 0.2, 0),
(5.7, 4.4, 1.5, 0.4, 0),
(5.4, 3.9, 1.3, 0.4, 0),
(5.1, 3.5, 1.4, 0.3, 0),
(5.7, 3.8, 1.7, 0.3, 0),
(5.1, 3.8, 1.5, 0.3, 0),
(5.4, 3.4, 1.7, 0.2, 0),
(5.1, 3.7, 1.5, 0.4, 0),
(4.6, 3.6, 1.0, 0.2, 0),
(5.1, 3.3, 1.7, 0.5, 0),
(4.8, 3.4, 1.9, 0.2, 0),
(5.0, 3.0, 1.6, 0.2, 0),
(5.0, 3.4, 1.6, 0.4, 0),
(5.2, 3.5, 1.5, 0.2, 0),
(5.2, 3.4, 1.4, 0.2, 0),
(4.7, 3.2, 1.6, 0.2, 0),
(4.8, 3.1, 1.6, 0.2, 0),
(5.4, 3.4, 1.5, 0.4, 0),
(5.2, 4.1, 1.5, 0.1, 0),
(5.5, 4.2, 1.4, 0.2, 0),
(4.9, 3.1, 1.5, 0.2, 0),
(5.0, 3.2, 1.2, 0.2, 0),
(5.5, 3.5, 1.3, 0.2, 0),
(4.9, 3.6, 1.4, 0.1, 0),
(4.4, 3.0, 1.3, 0.2, 0),
(5.1, 3.4, 1.5, 0.2, 0),
(5.0, 3.5, 1.3, 0.3, 0),
(4.5, 2.3, 1.3, 0.3, 0),
(4.4, 3.2, 1.3, 0.2, 0),
(5.0, 3.5, 1.6, 0.6, 0),
(5.1, 3.8, 1.9, 0.4, 0),
(4.8, 3.0, 1.4, 0.3, 0),
(5.1, 3.8, 1.6, 0.2, 0),
(4.6, 3.2, 1.4, 0.2, 0),
(5.3, 3.7, 1.5, 0.2, 0),
(5.0, 3.3, 1.4, 0.2, 0),
(7.0, 3.2, 4.7, 1.4, 1),
(6.4, 3.2, 4.5, 1.5, 1),
(6.9, 3.1, 4.9, 1.5, 1),
(5.5, 2.3, 4.0, 1.3, 1),
(6.5, 2.8, 4.6, 1.5, 1),
(5.7, 2.8, 4.5, 1.3, 1),
(6.3, 3.3, 4.7, 1.6, 1),
(4.9, 2.4, 3.3, 1.0, 1),
(6.6, 2.9, 4.6, 1.3, 1),
(5.2, 2.7, 3.9, 1.4, 1),
(5.0, 2.0, 3.5, 1.0, 1),
(5.9, 3.0, 4.2, 1.5, 1),
(6.0, 2.2, 4.0, 1.0, 1),
(6.1, 2.9, 4.7, 1.4, 1),
(5.6, 2.9, 3.6, 1.3, 1),
(6.7, 3.1, 4.4, 1.4, 1),
(5.6, 3.0, 4.5, 1.5, 1),
(5.8, 2.7, 4.1, 1.0, 1),
(6.2, 2.2, 4.5, 1.5, 1),
(5.6, 2.5, 3.9, 1.1, 1),
(5.9, 3.2, 4.8, 1.8, 1),
(6.1, 2.8, 4.0, 1.3, 1),
(6.3, 2.5, 4.9, 1.5, 1),
(6.1, 2.8, 4.7, 1.2, 1),
(6.4, 2.9, 4.3, 1.3, 1),
(6.6, 3.0, 4.4, 1.4, 1),
(6.8, 2.8, 4.8, 1.4, 1),
(6.7, 3.0, 5.0, 1.7, 1),
(6.0, 2.9, 4.5, 1.5, 1),
(5.7, 2.6, 3.5, 1.0, 1),
(5.5, 2.4, 3.8, 1.1, 1),
(5.5, 2.4, 3.7, 1.0, 1),
(5.8, 2.7, 3.9, 1.2, 1),
(6.0, 2.7, 5.1, 1.6, 1),
(5.4, 3.0, 4.5, 1.5, 1),
(6.0, 3.4, 4.5, 1.6, 1),
(6.7, 3.1, 4.7, 1.5, 1),
(6.3, 2.3, 4.4, 1.3, 1),
(5.6, 3.0, 4.1, 1.3, 1),
(5.5, 2.5, 4.0, 1.3, 1),
(5.5, 2.6, 4.4, 1.2, 1),
(6.1, 3.0, 4.6, 1.4, 1),
(5.8, 2.6, 4.0, 1.2, 1),
(5.0, 2.3, 3.3, 1.0, 1),
(5.6, 2.7, 4.2, 1.3, 1),
(5.7, 3.0, 4.2, 1.2, 1),
(5.7, 2.9, 4.2, 1.3, 1),
(6.2, 2.9, 4.3, 1.3, 1),
(5.1, 2.5, 3.0, 1.1, 1),
(5.7, 2.8, 4.1, 1.3, 1),
(6.3, 3.3, 6.0, 2.5, 2),
(5.8, 2.7, 5.1, 1.9, 2),
(7.1, 3.0, 5.9, 2.1, 2),
(6.3, 2.9, 5.6, 1.8, 2),
(6.5, 3.0, 5.8, 2.2, 2),
(7.6, 3.0, 6.6, 2.1, 2),
(4.9, 2.5, 4.5, 1.7, 2),
(7.3, 2.9, 6.3, 1.8, 2),
(6.7, 2.5, 5.8, 1.8, 2),
(7.2, 3.6, 6.1, 2.5, 2),
(6.5, 3.2, 5.1, 2.0, 2),
(6.4, 2.7, 5.3, 1.9, 2),
(6.8, 3.0, 5.5, 2.1, 2),
(5.7, 2.5, 5.0, 2.0, 2),
(5.8, 2.8, 5.1, 2.4, 2),
(6.4, 3.2, 5.3, 2.3, 2),
(6.5, 3.0, 5.5, 1.8, 2),
(7.7, 3.8, 6.7, 2.2, 2),
(7.7, 2.6, 6.9, 2.3, 2),
(6.0, 2.2, 5.0, 1.5, 2),
(6.9, 3.2, 5.7, 2.3, 2),
(5.6, 2.8, 4.9, 2.0, 2),
(7.7, 2.8, 6.7, 2.0, 2),
(6.3, 2.7, 4.9, 1.8, 2),
(6.7, 3.3, 5.7, 2.1, 2),
(7.2, 3.2, 6.0, 1.8, 2),
(6.2, 2.8, 4.8, 1.8, 2),
(6.1, 3.0, 4.9, 1.8, 2),
(6.4, 2.8, 5.6, 2.1, 2),
(7.2, 3.0, 5.8, 1.6, 2),
(7.4, 2.8, 6.1, 1.9, 2),
(7.9, 3.8, 6.4, 2.0, 2),
(6.4, 2.8, 5.6, 2.2, 2),
(6.3, 2.8, 5.1, 1.5, 2),
(6.1, 2.6, 5.6, 1.4, 2),
(7.7, 3.0, 6.1, 2.3, 2),
(6.3, 3.4, 5.6, 2.4, 2),
(6.4, 3.1, 5.5, 1.8, 2),
(6.0, 3.0, 4.8, 1.8, 2),
(6.9, 3.1, 5.4, 2.1, 2),
(6.7, 3.1, 5.6, 2.4, 2),
(6.9, 3.1, 5.1, 2.3, 2),
(5.8, 2.7, 5.1, 1.9, 2),
(6.8, 3.2, 5.9, 2.3, 2),
(6.7, 3.3, 5.7, 2.5, 2),
(6.7, 3.0, 5.2, 2.3, 2),
(6.3, 2.5, 5.0, 1.9, 2),
(6.5, 3.0, 5.2, 2.0, 2),
(6.2, 3.4, 5.4, 2.3, 2),
(5.9, 3.0, 5.1, 1.8, 2);

-- Start clean when the demo runs twice.
SELECT loom_drop_model(name) FROM loom.models WHERE name IN ('iris_species', 'iris_virginica', 'iris_petal');

-- 1. Multi-class logistic regression (one-vs-rest), features standardised (z-score).
SELECT loom_train('iris_species', 'iris', 'species',
                  '{"model": "logistic", "epochs": 100, "batch_size": 8, "lr": 0.5, "lr_schedule": "constant"}') AS summary;
SELECT loom_evaluate('iris_species', 'iris') AS metrics;

-- 2. A binary linear SVM from a SELECT source.
SELECT loom_train('iris_virginica',
                  'SELECT sepal_length, sepal_width, petal_length, petal_width, CAST(species = 2 AS INTEGER) AS virginica FROM iris',
                  'virginica', '{"model": "svm", "epochs": 40, "batch_size": 16}') AS summary;

-- 3. Linear regression: petal width from the other measurements.
SELECT loom_train('iris_petal', 'SELECT sepal_length, sepal_width, petal_length, petal_width FROM iris',
                  'petal_width', '{"model": "linear", "epochs": 50, "batch_size": 16, "lr": 0.05}') AS summary;
SELECT loom_evaluate('iris_petal', 'SELECT sepal_length, sepal_width, petal_length, petal_width FROM iris') AS metrics;

-- Predict inside SELECT (and WHERE).
SELECT species,
       count(*) AS flowers,
       sum(CASE WHEN loom_predict('iris_species', ARRAY[sepal_length, sepal_width, petal_length, petal_width]) = species THEN 1 ELSE 0 END) AS predicted_right
FROM iris GROUP BY species ORDER BY species;

SELECT count(*) AS likely_virginica
FROM iris
WHERE loom_predict('iris_virginica', ARRAY[sepal_length, sepal_width, petal_length, petal_width]) = 1;

-- The same model as a native SQL expression (no UDF call per row).
SELECT loom_predict_sql('iris_virginica') AS compiled_expression;

-- What the catalog keeps.
SELECT name, kind, storage_format, backend, rows_processed, rows_skipped FROM loom.models ORDER BY name;
