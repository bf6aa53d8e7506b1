-- loomdb 0.5.0 → 0.6.0: the catalog is kept as it is, but for loom.trials.version (the model's
-- version a search made: loom_trials lists the current version's), made by the generator's
-- ADD COLUMN IF NOT EXISTS; a trial an older loomdb wrote names no version and stays listed.
-- The generator appends the catalog's tables, the multi-user rules (security.sql), the
-- bootstrap, every function (CREATE OR REPLACE), the access methods (made only where absent)
-- with their event triggers, the owner functions of the C module and
-- loom.superseded_drop_model_0_1_0 / loom.superseded_evaluate_0_1_0.
--
-- Models, versions, trials, grants, deployments and indexes are kept as they are; indexes made
-- by CREATE INDEX … USING keep their access methods (never dropped here).  What the appended
-- text creates without OR REPLACE is dropped first, to be made again: the bootstrap and the
-- access methods' event triggers.
DROP FUNCTION IF EXISTS loom._bootstrap();
DROP EVENT TRIGGER IF EXISTS loom_index_am_drop;
DROP EVENT TRIGGER IF EXISTS loom_index_am_alter;
