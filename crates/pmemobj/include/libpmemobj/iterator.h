/* libpmemobj/iterator.h: walking the pool's allocated objects (locsim). */
#ifndef LIBPMEMOBJ_ITERATOR_H
#define LIBPMEMOBJ_ITERATOR_H 1

#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first allocated object (not the root), and the one after `oid`, in pool order. */
PMEMoid pmemobj_first(PMEMobjpool *pop);
PMEMoid pmemobj_next(PMEMoid oid);

static inline PMEMoid POBJ_FIRST_TYPE_NUM(PMEMobjpool *pop, uint64_t type_num)
{
	PMEMoid o = pmemobj_first(pop);
	while (!OID_IS_NULL(o) && pmemobj_type_num(o) != type_num)
		o = pmemobj_next(o);
	return o;
}
static inline PMEMoid POBJ_NEXT_TYPE_NUM(PMEMoid from)
{
	PMEMoid o = from;
	do
		o = pmemobj_next(o);
	while (!OID_IS_NULL(o) && pmemobj_type_num(o) != pmemobj_type_num(from));
	return o;
}

#define POBJ_FIRST(pop, t) ((TOID(t))POBJ_FIRST_TYPE_NUM((pop), TOID_TYPE_NUM(t)))
#define POBJ_NEXT(o) ((__typeof__(o))POBJ_NEXT_TYPE_NUM((o).oid))
#define POBJ_FOREACH(pop, varoid)                                                                  \
	for ((varoid) = pmemobj_first(pop); (varoid).off != 0; (varoid) = pmemobj_next(varoid))
#define POBJ_FOREACH_SAFE(pop, varoid, nvaroid)                                                    \
	for ((varoid) = pmemobj_first(pop); (varoid).off != 0 && ((nvaroid) = pmemobj_next(varoid), 1); \
	     (varoid) = (nvaroid))
#define POBJ_FOREACH_TYPE(pop, var)                                                                \
	POBJ_FOREACH(pop, (var).oid)                                                               \
	if (pmemobj_type_num((var).oid) == TOID_TYPE_NUM_OF(var))
#define POBJ_FOREACH_SAFE_TYPE(pop, var, nvar)                                                     \
	POBJ_FOREACH_SAFE(pop, (var).oid, (nvar).oid)                                              \
	if (pmemobj_type_num((var).oid) == TOID_TYPE_NUM_OF(var))

#ifdef __cplusplus
}
#endif
#endif
