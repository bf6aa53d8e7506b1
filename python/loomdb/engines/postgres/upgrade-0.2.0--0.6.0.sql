-- loomdb 0.2.0 → 0.6.0: what the catalog gains; the generator appends the catalog's tables
-- (CREATE TABLE / ADD COLUMN IF NOT EXISTS), the multi-user rules (security.sql), the
-- bootstrap, every function (CREATE OR REPLACE) and the access methods (made only where absent).
--
-- Models, versions, trials, grants, deployments and indexes are kept as they are; indexes made
-- by CREATE INDEX … USING keep their access methods (never dropped here).
--
-- What the appended text creates without OR REPLACE is dropped first, to be made again: the
-- bootstrap and the access methods' drop trigger (the row-level policies drop themselves).
-- loom_trials and loom_weights return one more column (metric, class_name), which CREATE OR
-- REPLACE cannot change.  Trials scored before 0.3.0 were scored by their validation loss.
DROP FUNCTION IF EXISTS loom._bootstrap();
DROP EVENT TRIGGER IF EXISTS loom_index_am_drop;
DROP FUNCTION IF EXISTS loom_trials(text);
DROP FUNCTION IF EXISTS loom_weights(text);
ALTER TABLE loom.trials ADD COLUMN IF NOT EXISTS metric text;
UPDATE loom.trials SET metric = 'validation loss' WHERE metric IS NULL;
