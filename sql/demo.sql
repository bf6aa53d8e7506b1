-- loomdb demo: lay a table out for learning, train on it at any precision, predict in SELECT.
-- Runs unchanged on PostgreSQL (psql -f sql/demo.sql) and on DuckDB
-- (loomdb sql --duckdb demo.duckdb -f sql/demo.sql).
-- Data: the UCI handwritten digits (1,797 images of 8x8 pixels, intensities 0-16), shipped
-- inside loomdb: loom_load('sample', ...) reads no file and downloads nothing.

-- Start clean when the demo runs twice.
SELECT loom_drop_model(name) FROM loom.models WHERE left(name, 7) = 'digits_';
SELECT loom_drop_index(name) FROM loom.indexes WHERE left(name, 7) = 'digits_';
DROP TABLE IF EXISTS digits;

-- 1. Load the data: 64 pixel columns and the digit.
SELECT CAST(loom_load('sample', 'digits', 'digits') AS JSON)->>'rows' AS rows_loaded;
SELECT digit, count(*) AS images FROM digits GROUP BY digit ORDER BY digit;

-- 2. Train on the table as it is: ten classes, one-vs-rest logistic regression.
SELECT s->>'kind' AS kind, s->>'classes' AS classes, s->>'format' AS format
FROM (SELECT CAST(loom_train('digits_dense', 'digits', 'digit') AS JSON) AS s) AS q;
SELECT round(CAST(CAST(loom_evaluate('digits_dense', 'digits') AS JSON)->>'accuracy' AS NUMERIC), 2) AS accuracy;

-- 3. TOC: the rows compressed as tuple-oriented-coding minibatches, trained on without
--    decompressing. The ratio is the stored size against the same rows as float64.
SELECT CAST(loom_create_index('digits_toc', 'digits', 'digit', '{"format": "toc"}') AS JSON)->>'batches' AS toc_batches;
SELECT name, format, rows, bytes, round(CAST(rows * 64 * 8 AS NUMERIC) / bytes, 1) AS compression_ratio
FROM loom.indexes WHERE name = 'digits_toc';
SELECT s->>'format' AS format, s->>'rows' AS rows
FROM (SELECT CAST(loom_train('digits_on_toc', NULL, 'digit', '{"index": "digits_toc"}') AS JSON) AS s) AS q;
SELECT round(CAST(CAST(loom_evaluate('digits_on_toc', 'digits') AS JSON)->>'accuracy' AS NUMERIC), 2) AS accuracy;

-- 4. MLWeaving: an any-precision bit-plane index; a train reads only the bits it asks for.
SELECT CAST(loom_create_index('digits_weave', 'digits', 'digit', '{"format": "mlweaving"}') AS JSON)->>'batches' AS weave_batches;
SELECT loom_train('digits_2bit', NULL, 'digit', '{"index": "digits_weave", "precision": 2}') IS NOT NULL AS trained_2bit;
SELECT loom_train('digits_4bit', NULL, 'digit', '{"index": "digits_weave", "precision": 4}') IS NOT NULL AS trained_4bit;
SELECT loom_train('digits_32bit', NULL, 'digit', '{"index": "digits_weave", "precision": 32}') IS NOT NULL AS trained_32bit;
SELECT loom_train('digits_adaptive', NULL, 'digit', '{"index": "digits_weave", "precision": "adaptive"}') IS NOT NULL AS trained_adaptive;
SELECT name,
       round(CAST(CAST(loom_evaluate(name, 'digits') AS JSON)->>'accuracy' AS NUMERIC), 2) AS accuracy
FROM loom.models WHERE name IN ('digits_2bit', 'digits_4bit', 'digits_32bit', 'digits_adaptive')
ORDER BY name;

-- 5. The MLWeaving FPGA engine, simulated: what one epoch at 4 bits would cost it ...
SELECT j->>'bound' AS bound, j->>'bytes_per_epoch' AS bytes_per_epoch, j->>'cycles_per_epoch' AS cycles_per_epoch
FROM (SELECT CAST(loom_simulate('digits_weave', '{"precision": 4}') AS JSON) AS j) AS q;
-- ... and a model trained by the bit-exact simulator of that engine, which computes least
-- squares (here: the digit as a number) with power-of-two steps on 4-bit values.
SELECT s->>'backend' AS backend, s->>'kind' AS kind, s->>'rows' AS rows
FROM (SELECT CAST(loom_train('digits_fpga', NULL, 'digit',
        '{"index": "digits_weave", "backend": "fpga-sim", "model": "linear", "precision": 4, "epochs": 100}') AS JSON) AS s) AS q;
-- The same job on the cpu backend (plain SGD at the automatic step), for comparison.
SELECT loom_train('digits_linear', NULL, 'digit',
       '{"index": "digits_weave", "model": "linear", "precision": 4, "epochs": 100, "optimizer": "sgd"}') IS NOT NULL AS trained_cpu;
SELECT name, backend,
       round(CAST(CAST(loom_evaluate(name, 'digits') AS JSON)->>'r2' AS NUMERIC), 2) AS r2
FROM loom.models WHERE name IN ('digits_fpga', 'digits_linear') ORDER BY name;

-- 6. Predict inside SELECT: per digit, how many images the 4-bit model gets right.
SELECT digit, count(*) AS images,
       sum(CASE WHEN loom_predict('digits_4bit', ARRAY[
           pixel_0_0, pixel_0_1, pixel_0_2, pixel_0_3, pixel_0_4, pixel_0_5, pixel_0_6, pixel_0_7,
           pixel_1_0, pixel_1_1, pixel_1_2, pixel_1_3, pixel_1_4, pixel_1_5, pixel_1_6, pixel_1_7,
           pixel_2_0, pixel_2_1, pixel_2_2, pixel_2_3, pixel_2_4, pixel_2_5, pixel_2_6, pixel_2_7,
           pixel_3_0, pixel_3_1, pixel_3_2, pixel_3_3, pixel_3_4, pixel_3_5, pixel_3_6, pixel_3_7,
           pixel_4_0, pixel_4_1, pixel_4_2, pixel_4_3, pixel_4_4, pixel_4_5, pixel_4_6, pixel_4_7,
           pixel_5_0, pixel_5_1, pixel_5_2, pixel_5_3, pixel_5_4, pixel_5_5, pixel_5_6, pixel_5_7,
           pixel_6_0, pixel_6_1, pixel_6_2, pixel_6_3, pixel_6_4, pixel_6_5, pixel_6_6, pixel_6_7,
           pixel_7_0, pixel_7_1, pixel_7_2, pixel_7_3, pixel_7_4, pixel_7_5, pixel_7_6, pixel_7_7])
           = digit THEN 1 ELSE 0 END) AS predicted_right
FROM digits GROUP BY digit ORDER BY digit;

-- 7. Deploy: the model as a native SQL function of its columns, at the engine's own speed.
SELECT CAST(loom_deploy('digits_dense') AS JSON)->>'model' AS deployed;
SELECT count(*) AS images_called_zero
FROM digits
WHERE predict_digits_dense(
    pixel_0_0, pixel_0_1, pixel_0_2, pixel_0_3, pixel_0_4, pixel_0_5, pixel_0_6, pixel_0_7,
    pixel_1_0, pixel_1_1, pixel_1_2, pixel_1_3, pixel_1_4, pixel_1_5, pixel_1_6, pixel_1_7,
    pixel_2_0, pixel_2_1, pixel_2_2, pixel_2_3, pixel_2_4, pixel_2_5, pixel_2_6, pixel_2_7,
    pixel_3_0, pixel_3_1, pixel_3_2, pixel_3_3, pixel_3_4, pixel_3_5, pixel_3_6, pixel_3_7,
    pixel_4_0, pixel_4_1, pixel_4_2, pixel_4_3, pixel_4_4, pixel_4_5, pixel_4_6, pixel_4_7,
    pixel_5_0, pixel_5_1, pixel_5_2, pixel_5_3, pixel_5_4, pixel_5_5, pixel_5_6, pixel_5_7,
    pixel_6_0, pixel_6_1, pixel_6_2, pixel_6_3, pixel_6_4, pixel_6_5, pixel_6_6, pixel_6_7,
    pixel_7_0, pixel_7_1, pixel_7_2, pixel_7_3, pixel_7_4, pixel_7_5, pixel_7_6, pixel_7_7) = 0;

-- 8. What the catalog keeps: every model, the format and backend it was trained on.
SELECT name, kind, storage_format, backend, rows_processed FROM loom.models
WHERE left(name, 7) = 'digits_' ORDER BY name;
SELECT name, format, rows, batches FROM loom.indexes WHERE left(name, 7) = 'digits_' ORDER BY name;
