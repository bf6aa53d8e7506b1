-- indexes: lay a table out once (dense, toc, mlweaving) and train on it many times.
-- CREATE INDEX … USING, REINDEX INDEX and DROP INDEX work everywhere: loomdb sql and
-- loomdb.connect() rewrite them into loom_create_index & co. on both engines; psql hands them
-- to PostgreSQL, whose loomdb access methods (mlweaving, toc, dense) build the same layout
-- for an index relation (and PostgreSQL's own errors where a method does not exist).

CREATE TABLE ix_points AS
SELECT a, b, c, CASE WHEN a + b > 1 THEN 1 ELSE 0 END AS y
FROM (SELECT CAST((i * 37) % 101 AS DOUBLE PRECISION) / 101 AS a,
             CAST((i * 53) % 97 AS DOUBLE PRECISION) / 97 AS b,
             CAST(i % 5 AS DOUBLE PRECISION) AS c
      FROM generate_series(1, 600) AS g(i)) AS s;

-- The statement forms (loomdb sql) ...
CREATE INDEX ix_dense ON ix_points USING dense (a, b, c) WITH (label = y, batch_size = 64);
CREATE INDEX ix_weave_ddl ON ix_points USING mlweaving (a, b) WITH (label = y);
-- ... and the function every form runs.
SELECT CAST(loom_create_index('ix_toc', 'ix_points', 'y', '{"format": "toc", "batch_size": 64}')
            AS JSON)->>'rows' AS toc_rows;
SELECT CAST(loom_create_index('ix_weave', 'ix_points', 'y',
            '{"format": "mlweaving", "features": ["a", "b", "c"]}') AS JSON)->>'rows' AS weave_rows;
SELECT name, format, source, label, columns, rows, skipped, batches, bytes
FROM loom.indexes WHERE left(name, 3) = 'ix_' ORDER BY name;

-- A name in use, an unknown format, a method loomdb does not have, an index of another kind.
SELECT loom_create_index('ix_toc', 'ix_points', 'y', '{"format": "toc"}');
SELECT loom_create_index('ix_other', 'ix_points', 'y', '{"format": "columnar"}');
CREATE INDEX ix_bad ON ix_points USING weaving (a, b) WITH (label = y);
SELECT loom_create_index('ix_bad', 'ix_points', 'y', '{"format": "toc", "precision": 4}');
SELECT count(*) AS bad_indexes FROM loom.indexes WHERE name = 'ix_bad';

-- Train on each index: the model records the format it was trained on.
SELECT s->>'format' AS format, s->>'rows' AS rows
FROM (SELECT CAST(loom_train('ix_on_dense', NULL, 'y', '{"index": "ix_dense"}') AS JSON) AS s) AS q;
SELECT s->>'format' AS format, s->>'rows' AS rows
FROM (SELECT CAST(loom_train('ix_on_toc', NULL, 'y', '{"index": "ix_toc"}') AS JSON) AS s) AS q;
SELECT s->>'format' AS format, s->>'rows' AS rows
FROM (SELECT CAST(loom_train('ix_on_weave', NULL, 'y', '{"index": "ix_weave"}') AS JSON) AS s) AS q;
SELECT name, storage_format, rows_processed FROM loom.models
WHERE left(name, 3) = 'ix_' ORDER BY name;
SELECT m.name, CAST(CAST(loom_evaluate(m.name, 'ix_points') AS JSON)->>'accuracy' AS DOUBLE PRECISION) > 0.9 AS accurate
FROM loom.models AS m WHERE left(m.name, 3) = 'ix_' ORDER BY m.name;
-- Metrics computed on an index's stored form agree with loom_evaluate's row count.
SELECT e->>'rows' AS rows, e->>'index' AS index,
       CAST(e->>'accuracy' AS DOUBLE PRECISION) > 0.9 AS accurate
FROM (SELECT CAST(loom_evaluate_index('ix_on_weave', 'ix_toc') AS JSON) AS e) AS q;

-- Training accepts the layout options an index was built with and refuses others.
SELECT CAST(loom_train('ix_same', NULL, 'y', '{"index": "ix_dense", "batch_size": 64, "epochs": 2}')
            AS JSON)->>'format' AS format;
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_dense", "batch_size": 32}');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_dense", "features": ["a", "b"]}');

-- Precision: bits read from an mlweaving index, 1..32 or adaptive; other formats refuse it.
SELECT CAST(loom_train('ix_p1', NULL, 'y', '{"index": "ix_weave", "precision": 1, "epochs": 5}')
            AS JSON)->>'rows' AS rows;
SELECT CAST(loom_train('ix_p8', NULL, 'y', '{"index": "ix_weave", "precision": 8}')
            AS JSON)->>'rows' AS rows;
SELECT CAST(loom_train('ix_pa', NULL, 'y', '{"index": "ix_weave", "precision": "adaptive", "epochs": 20}')
            AS JSON)->>'rows' AS rows;
SELECT CAST(CAST(loom_evaluate('ix_p8', 'ix_points') AS JSON)->>'accuracy' AS DOUBLE PRECISION) > 0.9
       AS accurate_at_8_bits;
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_weave", "precision": 0}');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_weave", "precision": 33}');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_weave", "precision": "high"}');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_dense", "precision": 4}');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_toc", "precision": 4}');
SELECT loom_train('ix_x', 'ix_points', 'y', '{"precision": 4}');

-- The FPGA engine's simulated cost of an epoch: a function of the index's shape alone.
SELECT j->>'bytes_per_epoch' AS bytes_per_epoch, j->>'bits_per_sample' AS bits_per_sample,
       j->>'cycles_per_epoch' AS cycles_per_epoch, j->>'bound' AS bound
FROM (SELECT CAST(loom_simulate('ix_weave', '{"precision": 3}') AS JSON) AS j) AS q;
-- (loom_simulate also takes a toc index, as if it were woven at 32 bits, though the fpga-sim
-- backend refuses to train on one.)
SELECT j->>'format' AS format, j->>'bytes_per_epoch' AS bytes_per_epoch
FROM (SELECT CAST(loom_simulate('ix_toc') AS JSON) AS j) AS q;
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_toc", "backend": "fpga-sim", "model": "linear"}');

-- Staleness: after the source changes, an index is refused until it is rebuilt.
INSERT INTO ix_points VALUES (0.25, 0.25, 1, 0);
SELECT loom_train('ix_stale', NULL, 'y', '{"index": "ix_toc"}');
SELECT CAST(loom_train('ix_stale', NULL, 'y', '{"index": "ix_toc", "allow_stale": true, "epochs": 2}')
            AS JSON)->>'rows' AS rows_as_built;
SELECT CAST(loom_reindex('ix_toc') AS JSON)->>'rows' AS rows_rebuilt;
REINDEX INDEX ix_dense;
SELECT CAST(loom_train('ix_fresh', NULL, 'y', '{"index": "ix_toc", "epochs": 2}') AS JSON)->>'rows' AS rows;
SELECT name, rows FROM loom.indexes WHERE left(name, 3) = 'ix_' ORDER BY name;
SELECT loom_reindex('ix_nosuch');

-- Dropping: the statement form, the function, and an index that is not there.
DROP INDEX ix_dense;
DROP INDEX ix_weave_ddl;
SELECT loom_drop_index('ix_toc') AS dropped;
SELECT loom_drop_index('ix_weave') AS dropped;
SELECT loom_drop_index('ix_toc');
SELECT loom_train('ix_x', NULL, 'y', '{"index": "ix_toc"}');

-- Clean up: models trained on an index outlive it; drop them too.
SELECT loom_drop_model(name) AS dropped FROM loom.models WHERE left(name, 3) = 'ix_' ORDER BY name;
SELECT loom_drop_index(name) AS dropped FROM loom.indexes WHERE left(name, 3) = 'ix_' ORDER BY name;
SELECT count(*) AS indexes_left FROM loom.indexes WHERE left(name, 3) = 'ix_';
DROP TABLE ix_points;
