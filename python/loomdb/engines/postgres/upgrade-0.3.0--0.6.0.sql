-- loomdb 0.3.0 → 0.6.0: every catalog row gains its owner by identity (owner_role) and every
-- grant its grantee's (grantee_role), so that a role dropped and created again under the same
-- name is another role; the generator appends the catalog's tables, the multi-user rules
-- (security.sql: the new columns and the policies that ask them), the bootstrap, every
-- function (CREATE OR REPLACE) and the access methods (made only where absent), then fills the
-- new columns of the rows kept (owner_roles.sql).
--
-- Models, versions, trials, grants, deployments and indexes are kept as they are; indexes made
-- by CREATE INDEX … USING keep their access methods (never dropped here).  What the appended
-- text creates without OR REPLACE is dropped first, to be made again: the bootstrap and the
-- access methods' drop trigger.
DROP FUNCTION IF EXISTS loom._bootstrap();
DROP EVENT TRIGGER IF EXISTS loom_index_am_drop;
