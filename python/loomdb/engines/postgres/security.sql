-- Several users (loomdb's multi-user model).  Part of the generated install script.
--
-- loomdb_user may train, predict, evaluate and build indexes on what its members may read.
-- Every catalog row has an owner (the role that wrote it); row-level security hides other
-- roles' rows and keeps them from being changed, unless the owner granted a model
-- (loom.grants, through loom_grant).  Superusers see everything.  Storage tables live in
-- loom_data, owned by their creator, with no PUBLIC access.  loom.settings (where the server
-- imports loomdb from) is written only by the superuser who installed loomdb.
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
REVOKE ALL ON loom.models, loom.trials, loom.indexes, loom.grants, loom.deployments, loom.settings
    FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON loom.models, loom.trials, loom.indexes, loom.grants, loom.deployments TO loomdb_user;
GRANT SELECT ON loom.settings TO loomdb_user;

ALTER TABLE loom.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.trials ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.indexes ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE loom.deployments ENABLE ROW LEVEL SECURITY;
CREATE POLICY models_own ON loom.models
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY models_granted ON loom.models FOR SELECT USING (EXISTS (
    SELECT 1 FROM loom.grants g
    WHERE g.model = models.name AND g.owner = models.owner
      AND (g.grantee = 'public' OR EXISTS (
          SELECT 1 FROM pg_catalog.pg_roles r
          WHERE r.rolname = g.grantee AND pg_catalog.pg_has_role(r.oid, 'USAGE')))));
-- a model's trials are its owner's alone (a grant shares the model, not how it was searched)
CREATE POLICY trials_own ON loom.trials
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY indexes_own ON loom.indexes
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY deployments_own ON loom.deployments
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY grants_own ON loom.grants
    USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY grants_received ON loom.grants FOR SELECT USING (
    grantee = 'public' OR EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE r.rolname = grantee AND pg_catalog.pg_has_role(r.oid, 'USAGE')));
