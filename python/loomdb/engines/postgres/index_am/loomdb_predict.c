/*
 * loomdb_predict.c: prediction at the engine's speed in PostgreSQL.  No paper section.
 *
 *   loom.finite(float8)          NULL for NaN and ±infinity, else its argument: the guard of
 *                                compiled and deployed models (functions/predict_sql.py), so
 *                                the margin is computed once (PostgreSQL evaluates a repeated
 *                                expression again).
 *   loom_predict(text, float8[]) and loom_predict_proba(text, float8[]) per row: the model's
 *                                folded coefficients are cached in this backend, so a row costs
 *                                a dot product, the link and the class choice, and no query.
 *   loom._models_changed()       a statement-level trigger on loom.models, loom.model_versions
 *                                and loom.grants that sends a relcache invalidation of its
 *                                table: plain INSERT/UPDATE/DELETE of a user table sends none,
 *                                and the cache must hear of a retrain, a drop, a version chosen,
 *                                a grant revoked.  PostgreSQL delivers it to every backend at
 *                                commit (to this one at the end of the command, and again at an
 *                                abort), where the relcache callback empties the cache.
 *
 * The cache never decides anything Python would decide differently.  A miss asks
 * loom._predict_model(name) (Python: model_cache, LinearModel.folded, classes) for the folded
 * weights, intercepts and classes, as the calling role sees them (row-level security): the
 * cache is keyed by role and model name, and also emptied when a role is renamed or a role
 * membership changes (pg_authid, pg_auth_members: a grant to a group may follow).  A row
 * this file does not serve — a sparse source's model, a feature count that does not match, a
 * multi-dimensional array, loom_predict_proba of a model without probabilities — goes to the
 * Python function (loom._predict_python, loom._predict_proba_python) through SPI, which gives
 * the Python path's answer or error.  A NULL element gives NULL before the model is looked up,
 * as the Python path does.
 *
 * Snapshots.  A statement pins the model it first used (fn_extra, a copy), as PostgreSQL's
 * STABLE functions see one snapshot per statement.  On its first row the statement takes the
 * invalidations pending (AcceptInvalidationMessages), so a change another session committed is
 * seen by the next statement.  An invalidation is sent only after its transaction became
 * visible, so a model read with a snapshot taken after the invalidations were taken is current;
 * one that may not be is used by its statement but not kept: read while an invalidation
 * arrived (the generation moved), or under REPEATABLE READ / SERIALIZABLE (the transaction's
 * snapshot may predate a change whose invalidation this backend already took).
 *
 * The loomdb_predict library, built beside loomdb_am (Makefile) by `loomdb pg install`.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

PG_MODULE_MAGIC;

#define KEY_BYTES 64			/* a model name is at most 63 characters (store/names.py) */
#define WATCHED 3

typedef struct LoomModel
{
	bool		classifier;
	bool		logistic;
	int			m;				/* features */
	int			k;				/* margins: 1, or one per class (one-vs-rest) */
	double	   *W;				/* k × m, margin-major */
	double	   *b;				/* k */
	double	   *classes;		/* 2 when k == 1, else k (classifiers only) */
} LoomModel;

typedef struct CacheKey
{
	Oid			role;
	char		name[KEY_BYTES];
} CacheKey;

typedef struct CacheEntry
{
	CacheKey	key;
	bool		served;			/* false: the Python function serves this model */
	LoomModel	model;
} CacheEntry;

/* What one call site (one statement's expression) pinned. */
typedef struct Pin
{
	Oid			role;
	int			len;
	char		name[KEY_BYTES];
	bool		served;
	LoomModel	model;
} Pin;

static HTAB *cache = NULL;
static MemoryContext cache_context = NULL;
static bool callbacks_registered = false;
static uint64 generation = 0;	/* invalidations taken so far */
static Oid	watched[WATCHED];	/* loom.models, loom.model_versions, loom.grants */
static SPIPlanPtr fetch_plan = NULL;
static SPIPlanPtr fallback_plans[2];	/* loom._predict_python, loom._predict_proba_python */

PG_FUNCTION_INFO_V1(loomdb_finite);
PG_FUNCTION_INFO_V1(loomdb_predict);
PG_FUNCTION_INFO_V1(loomdb_predict_proba);
PG_FUNCTION_INFO_V1(loomdb_models_changed);

Datum
loomdb_finite(PG_FUNCTION_ARGS)
{
	float8		x = PG_GETARG_FLOAT8(0);

	if (!isfinite(x))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(x);
}

Datum
loomdb_models_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigger = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("loom._models_changed() runs only as a trigger")));
	CacheInvalidateRelcache(trigger->tg_relation);
	return PointerGetDatum(NULL);
}

static void
forget_models(void)
{
	generation++;
	if (cache != NULL)
	{
		hash_destroy(cache);
		cache = NULL;
	}
	if (cache_context != NULL)
		MemoryContextReset(cache_context);
	memset(watched, 0, sizeof(watched));
}

static void
relation_changed(Datum arg, Oid relation)
{
	int			i;

	if (!OidIsValid(relation) || !OidIsValid(watched[0]))
	{
		forget_models();
		return;
	}
	for (i = 0; i < WATCHED; i++)
		if (relation == watched[i])
		{
			forget_models();
			return;
		}
}

/* a role renamed or a membership changed: row-level security may see other models */
static void
roles_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_models();
}

static void
watch(void)
{
	static const char *const tables[WATCHED] = {"models", "model_versions", "grants"};
	Oid			loom = get_namespace_oid("loom", true);
	int			i;

	for (i = 0; i < WATCHED; i++)
		watched[i] = OidIsValid(loom) ? get_relname_relid(tables[i], loom) : InvalidOid;
}

static void
ensure_cache(void)
{
	HASHCTL		ctl;

	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(relation_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, roles_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, roles_changed, (Datum) 0);
		callbacks_registered = true;
	}
	if (cache_context == NULL)
		cache_context = AllocSetContextCreate(TopMemoryContext, "loomdb predict cache",
											  ALLOCSET_SMALL_SIZES);
	if (cache != NULL)
		return;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(CacheKey);
	ctl.entrysize = sizeof(CacheEntry);
	ctl.hcxt = cache_context;
	cache = hash_create("loomdb predict cache", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static double *
copy_doubles(MemoryContext into, const double *from, int n)
{
	double	   *out = MemoryContextAlloc(into, sizeof(double) * Max(n, 1));

	if (n > 0)
		memcpy(out, from, sizeof(double) * n);
	return out;
}

static void
copy_model(MemoryContext into, LoomModel *to, const LoomModel *from)
{
	*to = *from;
	to->W = copy_doubles(into, from->W, from->k * from->m);
	to->b = copy_doubles(into, from->b, from->k);
	to->classes = copy_doubles(into, from->classes, from->classifier ? Max(from->k, 2) : 0);
}

/* A float8[] column of the fetched row, with n elements and no NULLs. */
static double *
fetched_array(HeapTuple row, TupleDesc desc, int column, int n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(row, desc, column, &isnull);
	ArrayType  *a;

	if (isnull)
		elog(ERROR, "loom._predict_model returned a NULL array");
	a = DatumGetArrayTypeP(d);
	if (ARR_NDIM(a) > 1 || ARR_HASNULL(a) || ARR_ELEMTYPE(a) != FLOAT8OID ||
		ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) != n)
		elog(ERROR, "loom._predict_model returned a malformed array");
	return copy_doubles(CurrentMemoryContext, (double *) ARR_DATA_PTR(a), n);
}

/*
 * Read model `name` as this role sees it, through Python, into `to` (allocated in `into`);
 * false when the Python function serves it (a sparse source's model).
 */
static bool
fetch_model(text *name, MemoryContext into, LoomModel *to)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	bool		served;
	LoomModel	got;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (fetch_plan == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare("SELECT served, classifier, logistic, width, margins, "
									   "coef, intercept, classes FROM loom._predict_model($1)",
									   1, types);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "preparing loom._predict_model failed");
		fetch_plan = plan;
	}
	values[0] = PointerGetDatum(name);
	/* not read-only: a snapshot taken now, after the invalidations already taken */
	if (SPI_execute_plan(fetch_plan, values, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "loom._predict_model returned no row");
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	served = DatumGetBool(SPI_getbinval(row, desc, 1, &isnull)) && !isnull;
	memset(&got, 0, sizeof(got));
	if (served)
	{
		got.classifier = DatumGetBool(SPI_getbinval(row, desc, 2, &isnull));
		got.logistic = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull));
		got.m = DatumGetInt32(SPI_getbinval(row, desc, 4, &isnull));
		got.k = DatumGetInt32(SPI_getbinval(row, desc, 5, &isnull));
		if (got.m < 0 || got.k < 1)
			elog(ERROR, "loom._predict_model returned a malformed model");
		got.W = fetched_array(row, desc, 6, got.k * got.m);
		got.b = fetched_array(row, desc, 7, got.k);
		got.classes = got.classifier ? fetched_array(row, desc, 8, Max(got.k, 2)) : NULL;
		copy_model(into, to, &got);
	}
	SPI_finish();
	return served;
}

/* The model `name` for this statement's call site: pinned, from the cache, or fetched. */
static Pin *
pinned(FunctionCallInfo fcinfo, text *name)
{
	Pin		   *pin = (Pin *) fcinfo->flinfo->fn_extra;
	MemoryContext into = fcinfo->flinfo->fn_mcxt;
	int			len = VARSIZE_ANY_EXHDR(name);
	Oid			role = GetUserId();
	CacheKey	key;
	CacheEntry *entry;
	bool		found;

	if (pin != NULL && pin->role == role && pin->len == len &&
		memcmp(pin->name, VARDATA_ANY(name), len) == 0)
		return pin;
	if (pin == NULL)
	{
		/* the statement's first row: take what other sessions committed */
		AcceptInvalidationMessages();
		pin = MemoryContextAllocZero(into, sizeof(Pin));
		fcinfo->flinfo->fn_extra = pin;
	}
	else if (pin->served)
	{
		pfree(pin->model.W);
		pfree(pin->model.b);
		pfree(pin->model.classes);
	}
	pin->role = role;
	pin->len = len < KEY_BYTES ? len : -1;	/* a longer name names no model: never pinned */
	memset(pin->name, 0, KEY_BYTES);
	if (len >= KEY_BYTES)
	{
		pin->served = false;
		return pin;
	}
	memcpy(pin->name, VARDATA_ANY(name), len);

	ensure_cache();
	memset(&key, 0, sizeof(key));
	key.role = role;
	memcpy(key.name, pin->name, len);
	entry = hash_search(cache, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		uint64		before = generation;
		LoomModel	got;
		bool		served;
		MemoryContext scratch = AllocSetContextCreate(CurrentMemoryContext, "loomdb fetch",
													  ALLOCSET_SMALL_SIZES);

		served = fetch_model(name, scratch, &got);
		if (served)
			copy_model(into, &pin->model, &got);
		pin->served = served;
		if (!OidIsValid(watched[0]))
			watch();
		/* kept only when no invalidation can have been missed (see the head of this file) */
		if (generation == before && !IsolationUsesXactSnapshot())
		{
			ensure_cache();
			entry = hash_search(cache, &key, HASH_ENTER, &found);
			entry->served = served;
			if (served)
				copy_model(cache_context, &entry->model, &got);
		}
		MemoryContextDelete(scratch);
		return pin;
	}
	pin->served = entry->served;
	if (entry->served)
		copy_model(into, &pin->model, &entry->model);
	return pin;
}

/* The Python function's answer for this row: its value, or its error. */
static Datum
python_answer(FunctionCallInfo fcinfo, bool proba, bool *isnull)
{
	const char *function = proba ? "_predict_proba_python" : "_predict_python";
	Oid			types[2] = {TEXTOID, FLOAT8ARRAYOID};
	Datum		values[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
	Datum		out;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (fallback_plans[proba] == NULL)
	{
		char	   *query = psprintf("SELECT loom.%s($1, $2)", function);
		SPIPlanPtr	plan = SPI_prepare(query, 2, types);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "preparing loom.%s failed", function);
		fallback_plans[proba] = plan;
	}
	if (SPI_execute_plan(fallback_plans[proba], values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "loom.%s returned no row", function);
	out = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	SPI_finish();
	return out;
}

/* true when some element is NULL */
static bool
has_null(ArrayType *a)
{
	bits8	   *bitmap = ARR_NULLBITMAP(a);
	int			n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	int			i;

	if (bitmap == NULL)
		return false;
	for (i = 0; i < n; i++)
		if (!(bitmap[i / 8] & (1 << (i % 8))))
			return true;
	return false;
}

static double
sigmoid(double z)
{
	double		e;

	if (z >= 0)
		return 1.0 / (1.0 + exp(-z));
	e = exp(z);
	return e / (1.0 + e);
}

/*
 * Margins of the row x into z (k of them); false when the row is not finite.  The sum runs
 * in feature order from 0, then the intercept: numpy's X @ W + b up to rounding.
 */
static bool
margins(const LoomModel *model, const double *x, double *z)
{
	int			i;
	int			j;

	for (i = 0; i < model->m; i++)
		if (!isfinite(x[i]))
			return false;
	for (j = 0; j < model->k; j++)
	{
		const double *w = model->W + (size_t) j * model->m;
		double		s = 0.0;

		for (i = 0; i < model->m; i++)
			s += w[i] * x[i];
		z[j] = s + model->b[j];
		if (isnan(z[j]))
			return false;
	}
	return true;
}

static Datum
predict(FunctionCallInfo fcinfo, bool proba)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	ArrayType  *features = PG_GETARG_ARRAYTYPE_P(1);
	Pin		   *pin;
	double		zs[16];
	double	   *z = zs;
	int			j;
	int			best;

	if (has_null(features))
		PG_RETURN_NULL();
	pin = pinned(fcinfo, name);
	if (!pin->served || ARR_NDIM(features) != 1 ||
		ARR_DIMS(features)[0] != pin->model.m || (proba && !pin->model.logistic))
	{
		bool		isnull;
		Datum		out = python_answer(fcinfo, proba, &isnull);

		if (isnull)
			PG_RETURN_NULL();
		return out;
	}
	if (pin->model.k > 16)
		z = palloc(sizeof(double) * pin->model.k);
	if (!margins(&pin->model, (double *) ARR_DATA_PTR(features), z))
		PG_RETURN_NULL();
	if (proba)
	{
		double		top = 0.0;
		double		sum = 0.0;

		if (pin->model.k == 1)
			PG_RETURN_FLOAT8(sigmoid(z[0]));
		for (j = 0; j < pin->model.k; j++)
		{
			double		p = sigmoid(z[j]);

			top = j == 0 || p > top ? p : top;
			sum += p;
		}
		PG_RETURN_FLOAT8(top / sum);
	}
	if (!pin->model.classifier)
		PG_RETURN_FLOAT8(z[0]);
	if (pin->model.k == 1)
		PG_RETURN_FLOAT8(z[0] > 0 ? pin->model.classes[1] : pin->model.classes[0]);
	best = 0;					/* the first of equal margins, as numpy's argmax */
	for (j = 1; j < pin->model.k; j++)
		if (z[j] > z[best])
			best = j;
	PG_RETURN_FLOAT8(pin->model.classes[best]);
}

Datum
loomdb_predict(PG_FUNCTION_ARGS)
{
	return predict(fcinfo, false);
}

Datum
loomdb_predict_proba(PG_FUNCTION_ARGS)
{
	return predict(fcinfo, true);
}
