-- hash_encoding: a text column hashed to buckets ("encode": "hash"), replayed alike by the
-- deployed function and loom_predict_row on both engines; its bad options; and loom_tune
-- scoring the trials by validation accuracy instead of the loss.

CREATE TABLE he_raw AS
SELECT i AS id,
       CASE i % 7 WHEN 0 THEN 'it''s' WHEN 1 THEN '東京' WHEN 2 THEN '' WHEN 3 THEN NULL
                  WHEN 4 THEN 'São Paulo' ELSE 'city' || CAST(i % 23 AS TEXT) END AS city,
       CAST((i * 37) % 101 AS DOUBLE PRECISION) / 10 AS x,
       CASE WHEN (i % 7 IN (0, 1) AND (i * 37) % 101 > 20) OR (i * 37) % 101 > 70 THEN 1 ELSE 0
       END AS y
FROM generate_series(1, 600) AS g(i);

-- Train: the city becomes 8 bucket features city#0 … city#7.
SELECT s->>'features' AS features
FROM (SELECT CAST(loom_train('he_m', 'he_raw', 'y',
             '{"features": ["city", "x"], "preprocess": {"city": {"encode": "hash", "buckets": 8}},
               "model": "logistic", "epochs": 30}') AS JSON) AS s) AS q;
SELECT feature FROM loom_weights('he_m') ORDER BY feature;
SELECT o->'encoding'->0->>'encode' AS encode, o->'encoding'->0->>'buckets' AS buckets
FROM (SELECT CAST(options AS JSON) AS o FROM loom.models WHERE name = 'he_m') AS q;

-- The deployed function and loom_predict_row put every value in the same bucket.
SELECT json_array_length(CAST(loom_deploy('he_m') AS JSON)->'functions') AS deployed;
SELECT count(*) AS scored,
       sum(CASE WHEN predict_he_m(city, x) = loom_predict_row('he_m', r) THEN 1 ELSE 0 END)
         AS agree
FROM he_raw AS r;
SELECT CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.8 AS accurate
FROM (SELECT CAST(loom_evaluate('he_m', 'he_raw') AS JSON) AS e) AS q;

-- Bad options name the column and the option.
SELECT loom_train('he_b', 'he_raw', 'y',
  '{"features": ["city", "x"], "preprocess": {"city": {"encode": "hash", "top_k": 5}}}');
SELECT loom_train('he_b', 'he_raw', 'y',
  '{"features": ["city", "x"], "preprocess": {"city": {"buckets": 8}}}');
SELECT loom_train('he_b', 'he_raw', 'y',
  '{"features": ["city", "x"], "preprocess": {"x": {"encode": "hash"}}}');
SELECT loom_train('he_b', 'he_raw', 'y',
  '{"features": ["city", "x"], "preprocess": {"city": {"encode": "hash", "buckets": 0}}}');

-- Tune scored by validation accuracy: higher is better, and the trials say so.
SELECT s->>'metric' AS metric, s->>'trials' AS trials
FROM (SELECT CAST(loom_tune('he_t', 'he_raw', 'y',
             '{"features": ["city", "x"], "preprocess": {"city": {"encode": "hash", "buckets": 8}},
               "model": "logistic", "epochs": 10, "lr": [0.05, 0.5], "metric": "accuracy"}')
             AS JSON) AS s) AS q;
SELECT metric, count(*) AS trials, min(score) >= 0 AND max(score) <= 1 AS fractions
FROM loom_trials('he_t') GROUP BY metric;
SELECT CAST(options AS JSON)->'tuned'->>'metric' AS kept_by FROM loom.models WHERE name = 'he_t';
SELECT loom_tune('he_b', 'he_raw', 'y', '{"model": "linear", "lr": [0.1, 1], "metric": "auc"}');

SELECT loom_drop_model('he_m');
SELECT loom_drop_model('he_t');
DROP TABLE he_raw;
