-- sparse: a source whose rows are (indices, values) arrays trains, evaluates and predicts with
-- the same SQL on both engines; sparse models refuse what they cannot do, with a reason.

CREATE TABLE sp_rows AS
SELECT CASE WHEN i % 7 < 3 THEN 1 ELSE 0 END AS label,
       ARRAY[i % 7, 100 + i % 5, 1000000 + i % 3] AS indices,
       CAST(ARRAY[1.0, 0.5 * (i % 4), 2.0] AS DOUBLE PRECISION[]) AS "values"
FROM generate_series(1, 400) AS g(i);

SELECT CAST(loom_train('sp_m', 'sp_rows', 'label', '{"format": "toc", "epochs": 30}')
            AS JSON)->>'features' AS width;
SELECT CAST(loom_model_info('sp_m') AS JSON)->'coefficients'->>'stored' AS stored,
       CAST(loom_model_info('sp_m') AS JSON)->'options'->'sparse'->>'values' AS values_column;
SELECT CAST(CAST(loom_evaluate('sp_m', 'sp_rows') AS JSON)->>'accuracy' AS DOUBLE PRECISION) > 0.99
       AS learned;
SELECT count(*) AS agree FROM sp_rows
WHERE loom_predict_sparse('sp_m', indices, "values") = label;
SELECT loom_predict_sparse('sp_m', ARRAY[0, 1000001], ARRAY[1.0, 2.0]) AS known,
       loom_predict_sparse('sp_m', ARRAY[5, 999], ARRAY[1.0, 2.0]) AS unseen_column,
       loom_predict_sparse('sp_m', ARRAY[0], ARRAY[CAST(NULL AS DOUBLE PRECISION)]) AS null_value;

-- what a sparse model cannot do
SELECT loom_predict_sql('sp_m');
SELECT loom_predict_sparse('sp_m', ARRAY[1000003], ARRAY[1.0]);
SELECT loom_predict_sparse('sp_m', ARRAY[0, 1], ARRAY[1.0]);

-- a dense layout of a sparse source holds its observed columns; bad sparse sources
SELECT CAST(loom_train('sp_d', 'sp_rows', 'label', '{"epochs": 5}') AS JSON)->>'format' AS fmt;
SELECT loom_train('sp_bad', 'SELECT label, indices, "values" FROM sp_rows', 'label',
                  '{"sparse": {"width": 1000}}');
SELECT loom_train('sp_bad', 'sp_rows', 'label', '{"features": ["indices"]}');

SELECT loom_drop_model('sp_m'), loom_drop_model('sp_d');
DROP TABLE sp_rows;
