-- Several users (loomdb's multi-user model).  Part of the generated install script.
--
-- loomdb_user may train, predict, evaluate and build indexes on what its members may read.
-- Every catalog row has an owner (the role that wrote it); row-level security hides other
-- roles' rows and keeps them from being changed, unless the owner granted a model
-- (loom.grants, through loom_grant).  Superusers see everything.  Storage tables live in
-- loom_data, owned by their creator, with no PUBLIC access.  loom.settings (where the server
-- imports loomdb from) is written only by the superuser who installed loomdb.
--
-- A row names its owner twice: ``owner`` (the name, as loomdb reads it) and ``owner_role`` (the
-- role itself: a regrole is the role's OID, dumped and restored as its name), and every policy
-- asks both.  A role dropped and created again under the same name is another role: it sees
-- none of the old role's rows, nor what was granted to the old one (``grantee_role``).  Rows of
-- a dropped role stay, seen by superusers only (their owner_role no longer names a role).
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'loomdb_user') THEN
        CREATE ROLE loomdb_user NOLOGIN;
    END IF;
END
$do$;
REVOKE ALL ON SCHEMA loom, loom_data FROM PUBLIC;
GRANT USAGE ON SCHEMA loom TO loomdb_user;
GRANT USAGE, CREATE ON SCHEMA loom_data TO loomdb_user;
REVOKE ALL ON loom.models, loom.model_versions, loom.trials, loom.indexes, loom.grants,
    loom.deployments, loom.settings FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON loom.models, loom.model_versions, loom.trials,
    loom.indexes, loom.grants, loom.deployments TO loomdb_user;
GRANT SELECT ON loom.settings TO loomdb_user;

CREATE OR REPLACE FUNCTION loom._current_role() RETURNS regrole
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
SELECT r.oid::pg_catalog.regrole FROM pg_catalog.pg_roles AS r
WHERE r.rolname OPERATOR(pg_catalog.=) current_user
$fn$;
COMMENT ON FUNCTION loom._current_role() IS
    'the role loomdb acts as, by identity (the default of owner_role)';
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['models', 'model_versions', 'trials', 'indexes', 'grants',
                             'deployments'] LOOP
        EXECUTE format('ALTER TABLE loom.%I ADD COLUMN IF NOT EXISTS owner_role regrole', t);
        EXECUTE format('ALTER TABLE loom.%I ALTER COLUMN owner_role '
                       'SET DEFAULT loom._current_role()', t);
    END LOOP;
END
$do$;
ALTER TABLE loom.grants ADD COLUMN IF NOT EXISTS grantee_role regrole;  -- NULL: public

ALTER TABLE loom.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.model_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.trials ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.indexes ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.deployments ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS models_own ON loom.models;  -- an update makes it again
CREATE POLICY models_own ON loom.models
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS models_granted ON loom.models;
CREATE POLICY models_granted ON loom.models FOR SELECT USING (EXISTS (
    SELECT 1 FROM loom.grants g
    WHERE g.model = models.name AND g.owner = models.owner AND g.owner_role = models.owner_role
      AND (g.grantee = 'public' OR EXISTS (
          SELECT 1 FROM pg_catalog.pg_roles r
          WHERE r.oid = g.grantee_role AND r.rolname = g.grantee
            AND pg_catalog.pg_has_role(r.oid, 'USAGE')))));
-- a model's old versions and its trials are its owner's alone (a grant shares the current one)
DROP POLICY IF EXISTS model_versions_own ON loom.model_versions;
CREATE POLICY model_versions_own ON loom.model_versions
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
-- a model's trials are its owner's alone (a grant shares the model, not how it was searched)
DROP POLICY IF EXISTS trials_own ON loom.trials;
CREATE POLICY trials_own ON loom.trials
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS indexes_own ON loom.indexes;
CREATE POLICY indexes_own ON loom.indexes
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS deployments_own ON loom.deployments;
CREATE POLICY deployments_own ON loom.deployments
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS grants_own ON loom.grants;
CREATE POLICY grants_own ON loom.grants
    USING (owner = current_user AND owner_role = (SELECT loom._current_role()))
    WITH CHECK (owner = current_user AND owner_role = (SELECT loom._current_role()));
DROP POLICY IF EXISTS grants_received ON loom.grants;
CREATE POLICY grants_received ON loom.grants FOR SELECT USING (
    grantee = 'public' OR EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE r.oid = grantee_role AND r.rolname = grantee
          AND pg_catalog.pg_has_role(r.oid, 'USAGE')));
