-- loomdb 0.1.0's loom_drop_model(text) and loom_evaluate(text, text) are this version's
-- loom_drop_model(text, bigint) and loom_evaluate(text, text, text) with the defaulted last
-- argument left out.  Kept beside them under their names, loom_drop_model('m') would match both
-- ("is not unique"); dropped, they would take with them (or stop the update on) a user's view or
-- BEGIN ATOMIC function that calls them — those hold a function by identity, not by name.  So
-- they move out of the way, into loom under names of their own: what called them still does
-- (their bodies call the same loomdb function with the argument left out), and a call by name
-- finds this version's function alone, as after CREATE EXTENSION.  Appended after the functions.
ALTER FUNCTION loom_drop_model(text) RENAME TO superseded_drop_model_0_1_0;
ALTER FUNCTION superseded_drop_model_0_1_0(text) SET SCHEMA loom;
ALTER FUNCTION loom_evaluate(text, text) RENAME TO superseded_evaluate_0_1_0;
ALTER FUNCTION superseded_evaluate_0_1_0(text, text) SET SCHEMA loom;
REVOKE ALL ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION loom.superseded_drop_model_0_1_0(text),
    loom.superseded_evaluate_0_1_0(text, text) TO loomdb_user;
COMMENT ON FUNCTION loom.superseded_drop_model_0_1_0(text) IS
    'loomdb 0.1.0''s loom_drop_model(text), kept for what calls it: loom_drop_model(model)';
COMMENT ON FUNCTION loom.superseded_evaluate_0_1_0(text, text) IS
    'loomdb 0.1.0''s loom_evaluate(text, text), kept for what calls it: loom_evaluate(model, source)';
