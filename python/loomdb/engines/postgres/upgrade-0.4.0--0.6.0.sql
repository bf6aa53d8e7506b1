-- loomdb 0.4.0 → 0.6.0: the catalog is kept as it is, but for loom.trials.version (made by the
-- generator's ADD COLUMN IF NOT EXISTS); the generator appends the catalog's tables, the
-- multi-user rules (security.sql), the bootstrap,
-- every function (CREATE OR REPLACE: loom_drop_model's new default, the row forms of predict
-- under search_path = pg_catalog, pg_temp), the access methods (made only where absent) with
-- the ALTER INDEX check (loom._index_am_altered and its ddl_command_end event trigger), the
-- owner functions of the C module (loom._owner_begin/_owner_end, where it is installed) and
-- loom.superseded_drop_model_0_1_0 / loom.superseded_evaluate_0_1_0.
--
-- Models, versions, trials, grants, deployments and indexes are kept as they are; indexes made
-- by CREATE INDEX … USING keep their access methods (never dropped here).  What the appended
-- text creates without OR REPLACE is dropped first, to be made again: the bootstrap and the
-- access methods' event triggers (loom_index_am_alter only where a 0.4.0 built before its
-- release had it).
DROP FUNCTION IF EXISTS loom._bootstrap();
DROP EVENT TRIGGER IF EXISTS loom_index_am_drop;
DROP EVENT TRIGGER IF EXISTS loom_index_am_alter;
