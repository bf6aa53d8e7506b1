-- slimml: a layout in groups of similar rows with their aggregated points, and training that
-- leaves out, before reading them, the groups whose points say they barely matter.
-- CREATE INDEX … WITH (slimml = true) is loomdb's SQL front-end (psql: PostgreSQL's own error;
-- loom_create_index is the same everywhere).

CREATE TABLE sl_points AS
SELECT a, b, CASE WHEN a > 0 THEN 1 ELSE 0 END AS y
FROM (SELECT CAST((i * 37) % 101 AS DOUBLE PRECISION) / 101 - 0.5
             + CASE WHEN i % 2 = 0 THEN 2 ELSE -2 END AS a,
             CAST((i * 53) % 97 AS DOUBLE PRECISION) / 97 AS b
      FROM generate_series(1, 2000) AS g(i)) AS s;

CREATE INDEX sl_ddl ON sl_points USING dense (a, b) WITH (label = y, slimml = true);
SELECT s->'slimml'->>'groups' AS groups, s->'slimml'->>'max_rows' AS max_rows,
       s->'slimml'->>'groups_per_batch' AS groups_per_batch, s->>'batches' AS batches
FROM (SELECT CAST(loom_create_index('sl_ix', 'sl_points', 'y',
             '{"slimml": true, "batch_size": 500}') AS JSON) AS s) AS q;
-- part -1 of each group is its aggregated point (the groups table)
SELECT part, count(*) AS stored_rows FROM loom_data.sl_ix GROUP BY part ORDER BY part;

-- Skip with SlimML's remover: the model records what it used; every stored byte of an epoch
-- is either returned by the engine or skipped.
SELECT s->>'rows' AS rows
FROM (SELECT CAST(loom_train('sl_svm', NULL, 'y',
             '{"index": "sl_ix", "model": "svm", "skip": "slimml", "epochs": 3, "tol": 0,
               "cache_mb": 0}') AS JSON) AS s) AS q;
SELECT o->>'skip' AS skip, o->>'epsilon' AS epsilon, o->>'read_ahead' AS read_ahead
FROM (SELECT CAST(options AS JSON) AS o FROM loom.models WHERE name = 'sl_svm') AS q;
SELECT CAST(h->-1->>'bytes_read' AS BIGINT) + CAST(h->-1->>'bytes_skipped' AS BIGINT)
       = (SELECT sum(octet_length(payload)) FROM loom_data.sl_ix WHERE part >= 0) AS every_byte,
       CAST(h->-1->>'removed' AS DOUBLE PRECISION) > 0.2 AS removes
FROM (SELECT CAST(history AS JSON) AS h FROM loom.models WHERE name = 'sl_svm') AS q;
SELECT CAST(loom_evaluate('sl_svm', 'sl_points') AS JSON)->>'accuracy' AS accuracy;

-- Honour or refuse.
SELECT loom_create_index('sl_plain', 'sl_points', 'y');
SELECT loom_train('sl_bad', NULL, 'y', '{"index": "sl_plain", "skip": "slimml"}');
SELECT loom_train('sl_bad', NULL, 'y', '{"index": "sl_ix", "epsilon": 0.05}');
SELECT loom_train('sl_bad', NULL, 'y', '{"index": "sl_ix", "skip": "random"}');
SELECT loom_create_index('sl_bad', 'sl_points', 'y', '{"stratify": true}');
SELECT count(*) AS bad FROM loom.models WHERE name = 'sl_bad';

SELECT loom_drop_model('sl_svm');
SELECT loom_drop_index('sl_ix');
SELECT loom_drop_index('sl_plain');
DROP INDEX sl_ddl;
DROP TABLE sl_points;
