-- An update from a version before 0.4.0, last: the rows it kept name their owner (and a grant
-- its grantee) by name only.  Each gains the role of that name, where one exists now; a row
-- whose role is gone keeps no role, and no role sees it but a superuser.
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'model_versions', 'trials', 'indexes', 'grants',
                             'deployments', 'index_relations'] LOOP
        IF pg_catalog.to_regclass('loom.' || t) IS NOT NULL THEN
            EXECUTE format('UPDATE loom.%I AS x SET owner_role = r.oid::pg_catalog.regrole '
                           'FROM pg_catalog.pg_roles AS r '
                           'WHERE x.owner_role IS NULL AND r.rolname = x.owner', t);
        END IF;
    END LOOP;
END
$do$;
UPDATE loom.grants AS g SET grantee_role = r.oid::pg_catalog.regrole
FROM pg_catalog.pg_roles AS r
WHERE g.grantee_role IS NULL AND g.grantee <> 'public' AND r.rolname = g.grantee;
