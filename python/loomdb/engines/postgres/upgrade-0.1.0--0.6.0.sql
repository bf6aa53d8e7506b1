-- loomdb 0.1.0 → 0.6.0: what the catalog gains and loses; the generator appends the multi-user
-- rules (security.sql), the bootstrap and every function (CREATE OR REPLACE).
--
-- Indexes: 0.1.0 stored them in loom."ix_<name>" in a layout 0.6.0 does not read (no checks,
-- no parts); they are dropped here and must be rebuilt from their sources with
-- loom_create_index.  A WARNING names each (extension scripts hide NOTICEs).  Storage tables are derived from the (quoted) index
-- name, never from the storage_table text a 0.1.0 catalog row held.
-- Models keep their coefficients and standardisation; their owner becomes the role running
-- ALTER EXTENSION (0.1.0 recorded none).
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT name FROM loom.indexes LOOP
        RAISE WARNING 'loomdb 0.6.0: index % is dropped; rebuild it with loom_create_index', r.name;
        EXECUTE format('DROP TABLE IF EXISTS loom.%I', 'ix_' || r.name);
    END LOOP;
END
$do$;
DELETE FROM loom.indexes;
ALTER TABLE loom.indexes
    DROP COLUMN storage_table,
    ADD COLUMN owner name NOT NULL DEFAULT current_user,
    ADD COLUMN uid text,
    ADD COLUMN format_version integer,
    ADD CONSTRAINT indexes_name_check CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$');
DELETE FROM loom.models WHERE name !~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$';
ALTER TABLE loom.models
    ADD COLUMN owner name NOT NULL DEFAULT current_user,
    ADD CONSTRAINT models_name_check CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$');
DROP FUNCTION IF EXISTS loom._bootstrap();
CREATE SCHEMA IF NOT EXISTS loom_data;
-- 0.1.0's loom_drop_model(text) and loom_evaluate(text, text) move out of the way of this
-- version's (see superseded.sql, which replaces their bodies).
ALTER FUNCTION loom_drop_model(text) RENAME TO superseded_drop_model_0_1_0;
ALTER FUNCTION superseded_drop_model_0_1_0(text) SET SCHEMA loom;
ALTER FUNCTION loom_evaluate(text, text) RENAME TO superseded_evaluate_0_1_0;
ALTER FUNCTION superseded_evaluate_0_1_0(text, text) SET SCHEMA loom;
