-- CREATE INDEX … USING mlweaving | toc | dense | pcr in psql (part of the generated install script).
--
-- loom.index_relations says which PostgreSQL index relation holds which loomdb index: its OID
-- is the identity (it survives ALTER INDEX … RENAME and REINDEX), its name the loomdb index's.
-- Rows are written by loom._index_am_build, which the access methods' build callback calls as
-- the table's owner.  The table is not dumped: OIDs mean nothing in another cluster; a
-- restored CREATE INDEX takes over the restored loomdb index of its name and table.
CREATE TABLE IF NOT EXISTS loom.index_relations (
    relation oid PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name ~ '^{name_pattern}$'),
    owner name NOT NULL DEFAULT current_user
);
-- the owner by identity too, as every catalog row (security.sql)
ALTER TABLE loom.index_relations ADD COLUMN IF NOT EXISTS owner_role regrole;
ALTER TABLE loom.index_relations ALTER COLUMN owner_role SET DEFAULT loom._current_role();
REVOKE ALL ON loom.index_relations FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON loom.index_relations TO loomdb_user;
ALTER TABLE loom.index_relations ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS index_relations_own ON loom.index_relations;  -- an update makes it again
CREATE POLICY index_relations_own ON loom.index_relations
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));

-- The Python half of the access methods (loomdb.engines.postgres.index_am).
CREATE OR REPLACE FUNCTION loom._index_am_build(index oid, OUT heap_tuples float8, OUT index_tuples float8)
LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'build', index)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_build(oid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_build(oid) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_build(oid) IS 'lay a table out for the loomdb index relation given (called by CREATE INDEX and REINDEX)';

CREATE OR REPLACE FUNCTION loom._index_am_check(method text, options text[])
RETURNS void LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'check', method, options)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_check(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_check(text, text[]) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_check(text, text[]) IS 'check the WITH options of a loomdb index (called by CREATE INDEX and ALTER INDEX … SET)';

-- DROP INDEX (or DROP TABLE, DROP SCHEMA … CASCADE) of a loomdb index relation removes the
-- loomdb index: its catalog row and its storage table.  SECURITY DEFINER because whoever may
-- drop the relation (any role with the table owner's privileges, a superuser) may not see
-- the rows, which row-level security keeps to the role that built it; the function can only
-- run as this event trigger, and acts only on index relations PostgreSQL reports dropped.
-- It removes only rows of the owner that registered the relation, and the storage table
-- (derived from the checked name, never read from the catalog as SQL) only with its row: a
-- DROP TABLE runs no code of the table's owner.
CREATE OR REPLACE FUNCTION loom._index_am_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    gone record;
BEGIN
    FOR gone IN
        SELECT DISTINCT r.name, r.owner, r.owner_role
        FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
        JOIN loom.index_relations AS r
          ON r.relation = d.objid
          -- an index relation PostgreSQL replaced without building it again (a column type
          -- change that keeps the operator class) has a new OID: match it by name
          OR (r.name = d.object_name
              AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c WHERE c.oid = r.relation))
        WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.object_type = 'index'
    LOOP
        DELETE FROM loom.index_relations WHERE name = gone.name;
        DELETE FROM loom.indexes
        WHERE name = gone.name AND owner = gone.owner AND owner_role = gone.owner_role;
        IF FOUND THEN
            EXECUTE format('DROP TABLE IF EXISTS loom_data.%I', gone.name);
        END IF;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_dropped() FROM PUBLIC;
COMMENT ON FUNCTION loom._index_am_dropped() IS 'remove the loomdb index of a dropped loomdb index relation';
CREATE EVENT TRIGGER loom_index_am_drop ON sql_drop EXECUTE FUNCTION loom._index_am_dropped();

-- ALTER INDEX of a loomdb index relation: what it left must be what a build can take, or the
-- next REINDEX, TRUNCATE or VACUUM FULL would fail.  PostgreSQL checks the options (through
-- loom._index_am_check) only while some remain, so RESET (label) goes unchecked, and nothing
-- checks that the label is a column of the table.  Not SECURITY DEFINER: the check runs as the
-- role that altered the index (its table's owner, who builds it), and only for relations of
-- loomdb's access methods (their handlers are loom's).
CREATE OR REPLACE FUNCTION loom._index_am_altered(index oid)
RETURNS void LANGUAGE plpython3u VOLATILE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].index_am(plpy, 'altered', index)
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_altered(oid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom._index_am_altered(oid) TO loomdb_user;
COMMENT ON FUNCTION loom._index_am_altered(oid) IS 'refuse what ALTER INDEX left a loomdb index relation that its next build could not take';

CREATE OR REPLACE FUNCTION loom._index_am_alter() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    altered oid;
BEGIN
    FOR altered IN
        SELECT DISTINCT c.oid
        FROM pg_catalog.pg_event_trigger_ddl_commands() AS d
        JOIN pg_catalog.pg_class AS c ON c.oid = d.objid
        JOIN pg_catalog.pg_am AS a ON a.oid = c.relam
        JOIN pg_catalog.pg_proc AS p ON p.oid = a.amhandler
        JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
        WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.relkind = 'i'
          AND n.nspname = 'loom'
    LOOP
        PERFORM loom._index_am_altered(altered);
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION loom._index_am_alter() FROM PUBLIC;
COMMENT ON FUNCTION loom._index_am_alter() IS 'refuse an ALTER INDEX that leaves a loomdb index relation unbuildable';
CREATE EVENT TRIGGER loom_index_am_alter ON ddl_command_end WHEN TAG IN ('ALTER INDEX')
    EXECUTE FUNCTION loom._index_am_alter();
