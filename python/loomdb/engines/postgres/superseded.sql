-- loomdb 0.1.0's loom_drop_model(text) and loom_evaluate(text, text): this version's
-- loom_drop_model(text, bigint) and loom_evaluate(text, text, text) with the defaulted last
-- argument left out.  Kept beside those under their names, loom_drop_model('m') would match
-- both ("is not unique"); dropped, they would take with them (or stop the update on) a user's
-- view or BEGIN ATOMIC function that calls them, which hold a function by identity, not by name.
-- So the update from 0.1.0 moves them into loom under names of their own (what called them still
-- does), and every install has them there, so that a dump of such a view restores anywhere.
-- Part of the generated install and update scripts, after the functions.
CREATE OR REPLACE FUNCTION loom.superseded_drop_model_0_1_0(model text) RETURNS text
LANGUAGE plpython3u VOLATILE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_drop_model', model)
$fn$;
CREATE OR REPLACE FUNCTION loom.superseded_evaluate_0_1_0(model text, source text) RETURNS text
LANGUAGE plpython3u STABLE PARALLEL UNSAFE STRICT AS $fn$
if 'loomdb' not in GD: plpy.execute('SELECT loom._bootstrap()')
return GD['loomdb'].call(plpy, 'loom_evaluate', model, source)
$fn$;
REVOKE ALL ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom.superseded_drop_model_0_1_0(text) IS
    'loomdb 0.1.0''s loom_drop_model(text), kept for what calls it: loom_drop_model(model)';
COMMENT ON FUNCTION loom.superseded_evaluate_0_1_0(text, text) IS
    'loomdb 0.1.0''s loom_evaluate(text, text), kept for what calls it: loom_evaluate(model, source)';
