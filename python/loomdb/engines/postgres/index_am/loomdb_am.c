/*
 * loomdb_am.c: the index access methods mlweaving, toc, dense and pcr, so that
 *
 *     CREATE INDEX name ON table USING mlweaving (a, b) WITH (label = y, ...)
 *     REINDEX INDEX name;  DROP INDEX name;
 *
 * work in plain psql.  No paper section: the layouts are loomdb's (Python), this file only
 * hands PostgreSQL's index DDL over to them.
 *
 * A loomdb index is not a search structure: its relation holds no pages, the planner never
 * uses it, and everything it stores lives in loomdb's catalog (loom.indexes) and storage table
 * (loom_data."name"), written by loomdb's Python.  So:
 *
 *   ambuild        runs SELECT ... FROM loom._index_am_build($1) through SPI, with the index's
 *                  OID as the one (bound) parameter; loomdb reads the index's name, table,
 *                  columns and WITH options from the system catalogs itself.  No text derived
 *                  from user data is ever part of the SQL.  It runs as PostgreSQL runs every
 *                  index build: as the table's owner, in a security-restricted operation.
 *                  Inside REINDEX and PostgreSQL's own rebuilds see may_read_table().
 *   amoptions      accepts any name = value (WITH options are loomdb's, not PostgreSQL's); when
 *                  PostgreSQL asks for validation (CREATE INDEX, ALTER INDEX ... SET) loomdb
 *                  checks them through loom._index_am_check($1, $2); the parsed form is never
 *                  needed, loomdb reads pg_class.reloptions.
 *   aminsert       does nothing.  "Stale" is loomdb's source fingerprint (count and hash of
 *                  the indexed columns and the label), checked when a train opens the index:
 *                  it sees INSERTs but also what aminsert never sees (DELETE, TRUNCATE, a HOT
 *                  UPDATE of the label column), and costs writes nothing.
 *   scans          none: no amgettuple, no amgetbitmap, operator classes without operators,
 *                  so no index path is ever built; amcostestimate answers a prohibitive cost
 *                  all the same, and beginning a scan is an error.
 *   vacuum         nothing to clean: the relation has no tuples.
 *
 * DROP INDEX (and DROP TABLE, DROP SCHEMA ... CASCADE) is handled by the extension's sql_drop
 * event trigger, not here: PostgreSQL has no access-method callback for a drop.
 *
 * Built with PGXS by `loomdb pg install` (Makefile beside this file).
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/reloptions.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pathnodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/relcache.h"

PG_MODULE_MAGIC;

#define LOOM_ROLE "loomdb_user"
#define PROHIBITIVE_COST 1.0e30

/* Refuse, with a message that says what to do, a role that may not call loomdb. */
static void
require_loomdb_role(void)
{
	Oid			role = get_role_oid(LOOM_ROLE, true);
	Oid			user = GetUserId();

	if (!OidIsValid(role) || !has_privs_of_role(user, role))
	{
		const char *name = GetUserNameFromId(user, false);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not build loomdb indexes", name),
				 errdetail("PostgreSQL builds an index as the owner of its table."),
				 errhint("A superuser runs: GRANT %s TO %s;", LOOM_ROLE,
						 quote_identifier(name))));
	}
}

static void
handover_context(void *arg)
{
	errcontext("loomdb index access method %s", (const char *) arg);
}

/*
 * Run one constant query with bound arguments through SPI; return the first row's float8
 * columns into out[0 .. nout-1].  Errors (loomdb's, with their hints) propagate unchanged.
 */
static void
handover(const char *what, const char *query, int nargs, Oid *types, Datum *values,
		 double *out, int nout)
{
	ErrorContextCallback context;
	int			ret;
	int			i;

	require_loomdb_role();
	context.callback = handover_context;
	context.arg = (void *) what;
	context.previous = error_context_stack;
	error_context_stack = &context;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ret = SPI_execute_with_args(query, nargs, types, values, NULL, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "loomdb's %s returned no row", what);
	for (i = 0; i < nout; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									  i + 1, &isnull);

		out[i] = isnull ? 0.0 : DatumGetFloat8(d);
	}
	SPI_finish();
	error_context_stack = context.previous;
}

/* Whether an index of the table other than `self` awaits its rebuild after a table rewrite. */
static bool
others_marked(Relation heap, Oid self)
{
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		if (lfirst_oid(lc) != self && ReindexIsProcessingIndex(lfirst_oid(lc)))
			return true;
	}
	return false;
}

/*
 * REINDEX, and the rebuilds PostgreSQL does itself (TRUNCATE, VACUUM FULL, CLUSTER, a
 * rewriting ALTER TABLE), mark the index being rebuilt -- and, after a rewrite, every index of
 * the table still waiting for its rebuild -- so that nothing uses it meanwhile: PostgreSQL
 * then refuses to plan any query on the table, and loomdb's build reads the table with
 * queries.  Nothing can use a loomdb index (it has no scans and takes no tuples), so when it
 * alone is marked its mark is cleared (ResetReindexState: the whole state, which is then this
 * index's mark alone) and the build goes on.  When another index still waits, the table cannot
 * be read: the layout is kept as it is -- a rewrite keeps the rows, and the source fingerprint
 * checked at train time tells whether they changed -- and false is returned.
 */
static bool
may_read_table(Relation heap, Relation index)
{
	Oid			self = RelationGetRelid(index);

	if (!ReindexIsProcessingIndex(self))
		return true;
	if (others_marked(heap, self))
		return false;
	ResetReindexState(GetCurrentTransactionNestLevel());
	return true;
}

static IndexBuildResult *
loom_ambuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(RelationGetRelid(index))};
	double		counts[2];

	if (!may_read_table(heap, index))
	{
		/* the table's row count as the rewrite recorded it: keep it */
		result->heap_tuples = heap->rd_rel->reltuples;
		result->index_tuples = heap->rd_rel->reltuples;
		return result;
	}
	handover("build",
			 "SELECT heap_tuples, index_tuples FROM loom._index_am_build($1)",
			 1, types, values, counts, 2);
	result->heap_tuples = counts[0];
	result->index_tuples = counts[1];
	return result;
}

static void
loom_ambuildempty(Relation index)
{
	/* the relation holds no pages: an unlogged table's init fork stays empty */
}

static bool
loom_aminsert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			  Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
			  IndexInfo *indexInfo)
{
	return false;				/* see the header: staleness is the source fingerprint */
}

static IndexBulkDeleteResult *
loom_ambulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				  IndexBulkDeleteCallback callback, void *callback_state)
{
	return stats;
}

static IndexBulkDeleteResult *
loom_amvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	return stats;
}

static void
loom_amcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
					Cost *indexStartupCost, Cost *indexTotalCost,
					Selectivity *indexSelectivity, double *indexCorrelation,
					double *indexPages)
{
	*indexStartupCost = PROHIBITIVE_COST;
	*indexTotalCost = PROHIBITIVE_COST;
	*indexSelectivity = 1.0;
	*indexCorrelation = 0.0;
	*indexPages = 0.0;
}

static bytea *
check_options(const char *method, Datum reloptions, bool validate)
{
	Oid			types[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	double		ok;

	if (!validate || DatumGetPointer(reloptions) == NULL)
		return NULL;
	values[0] = CStringGetTextDatum(method);
	values[1] = reloptions;
	handover("options", "SELECT 1::float8 FROM loom._index_am_check($1, $2)",
			 2, types, values, &ok, 1);
	return NULL;
}

static bool
loom_amvalidate(Oid opclassoid)
{
	return true;				/* operator classes without operators or functions */
}

static IndexScanDesc
loom_ambeginscan(Relation index, int nkeys, int norderbys)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("a loomdb index cannot be scanned"),
			 errhint("loomdb indexes lay tables out for loom_train; queries read the table")));
	return NULL;
}

static void
loom_amrescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys)
{
}

static void
loom_amendscan(IndexScanDesc scan)
{
}

static IndexAmRoutine *
routine(amoptions_function amoptions)
{
	IndexAmRoutine *am = makeNode(IndexAmRoutine);	/* zeroed: every flag false */

	am->amstrategies = 0;
	am->amsupport = 0;
	am->amcanmulticol = true;
	am->amoptionalkey = true;
	am->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
	am->amkeytype = InvalidOid;
	am->ambuild = loom_ambuild;
	am->ambuildempty = loom_ambuildempty;
	am->aminsert = loom_aminsert;
	am->ambulkdelete = loom_ambulkdelete;
	am->amvacuumcleanup = loom_amvacuumcleanup;
	am->amcostestimate = loom_amcostestimate;
	am->amoptions = amoptions;
	am->amvalidate = loom_amvalidate;
	am->ambeginscan = loom_ambeginscan;
	am->amrescan = loom_amrescan;
	am->amendscan = loom_amendscan;
	return am;
}

/*
 * One handler per method: PostgreSQL's amoptions callback is not told which method's options
 * it validates, so each method has its own.
 */
#define LOOM_METHOD(method) \
	static bytea * \
	method##_amoptions(Datum reloptions, bool validate) \
	{ \
		return check_options(#method, reloptions, validate); \
	} \
	PG_FUNCTION_INFO_V1(loomdb_##method##_handler); \
	Datum \
	loomdb_##method##_handler(PG_FUNCTION_ARGS) \
	{ \
		PG_RETURN_POINTER(routine(method##_amoptions)); \
	}

LOOM_METHOD(mlweaving)
LOOM_METHOD(toc)
LOOM_METHOD(dense)
LOOM_METHOD(pcr)
