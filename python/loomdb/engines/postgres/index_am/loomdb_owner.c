/*
 * loomdb_owner.c: running SQL that another role owns with that role's rights, and no more.
 * No paper section.
 *
 *   loom._owner_begin(role name) → bigint   act as `role` until the matching end; the key
 *   loom._owner_end(key bigint)             back to the user and settings before its begin
 *
 * When a superuser reindexes, or trains on, another role's index, loomdb re-runs SQL that role
 * wrote (its source view, a row-level security policy on its storage table), which may call
 * the role's own functions.  Run under SET ROLE, such a function can RESET ROLE and act as the
 * session's user, a superuser.  This does what PostgreSQL's REINDEX, ANALYZE and REFRESH
 * MATERIALIZED VIEW do with an index's or a view's owner: SetUserIdAndSecContext(owner,
 * SECURITY_RESTRICTED_OPERATION), where SET ROLE, SET SESSION AUTHORIZATION and temporary
 * tables are refused.  (They also open a GUC nest level, to put back a setting the owner's code
 * changed; a begin called through SPI runs in PL/Python's subtransaction, whose commit would
 * fold such a level into its parent, so loomdb's Python checks the setting that chooses code,
 * search_path, instead, and refuses a change: engines/postgres/plpy_database.py as_role.)
 *
 * Only a role that may act as `role` begins (is_member_of_role, which SET ROLE asks, and which
 * superusers pass).  The key is 64 random bits that loomdb's Python keeps, and an end must give
 * the key of the innermost begin: the owner's code, running in between, cannot end it early.
 * An error ends the transaction or subtransaction, whose abort puts the user back; the
 * callbacks below forget the begins it abandoned.
 *
 * The loomdb_owner library, built beside loomdb_am (Makefile) by `loomdb pg install`.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC;

#define MAX_DEPTH 16

typedef struct
{
	Oid			user;			/* the user before the begin */
	int			context;		/* its security context */
	SubTransactionId subxact;	/* the subtransaction the begin ran in */
	int64		key;
} Saved;

static Saved saved[MAX_DEPTH];
static int	depth = 0;
static bool callbacks = false;

static void
forget_all(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		depth = 0;
}

static void
forget_aborted(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
			   void *arg)
{
	/*
	 * The begins made inside an aborted subtransaction or its children (their ids are no
	 * smaller): the abort restored the user of its start.
	 */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		while (depth > 0 && saved[depth - 1].subxact >= mySubid)
			depth--;
}

PG_FUNCTION_INFO_V1(loomdb_owner_begin);
PG_FUNCTION_INFO_V1(loomdb_owner_end);

Datum
loomdb_owner_begin(PG_FUNCTION_ARGS)
{
	Name		name = PG_GETARG_NAME(0);
	Oid			role = get_role_oid(NameStr(*name), false);
	Saved	   *s;

	if (!callbacks)
	{
		RegisterXactCallback(forget_all, NULL);
		RegisterSubXactCallback(forget_aborted, NULL);
		callbacks = true;
	}
	if (depth == MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("loomdb: acting as another role nested more than %d deep", MAX_DEPTH)));
	s = &saved[depth];
	GetUserIdAndSecContext(&s->user, &s->context);
	if (!is_member_of_role(s->user, role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("loomdb: permission denied to act as role \"%s\"", NameStr(*name))));
	if (!pg_strong_random(&s->key, sizeof(s->key)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("loomdb: could not generate a random key")));
	s->subxact = GetCurrentSubTransactionId();
	depth++;
	SetUserIdAndSecContext(role, s->context | SECURITY_RESTRICTED_OPERATION);
	PG_RETURN_INT64(s->key);
}

Datum
loomdb_owner_end(PG_FUNCTION_ARGS)
{
	int64		key = PG_GETARG_INT64(0);
	Saved	   *s;

	if (depth == 0 || saved[depth - 1].key != key)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("loomdb: no matching loom._owner_begin to end")));
	s = &saved[--depth];
	SetUserIdAndSecContext(s->user, s->context);
	PG_RETURN_VOID();
}
