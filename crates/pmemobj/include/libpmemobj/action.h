/* libpmemobj/action.h: reservations and deferred actions, published atomically (locsim):
 * a reservation takes its object from the allocator at once; publish applies the actions as
 * one locsim transaction; cancel gives the reserved objects back. */
#ifndef LIBPMEMOBJ_ACTION_H
#define LIBPMEMOBJ_ACTION_H 1

#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pobj_action_type {
	POBJ_ACTION_TYPE_HEAP,
	POBJ_ACTION_TYPE_MEM,
	POBJ_MAX_ACTION_TYPE
};

struct pobj_action_heap {
	uint64_t offset;
	uint64_t usable_size;
};

/* Kept in volatile memory only (never in the pool). */
struct pobj_action {
	enum pobj_action_type type;
	uint32_t data[3];
	union {
		struct pobj_action_heap heap;
		uint64_t data2[14];
	};
};

PMEMoid pmemobj_reserve(PMEMobjpool *pop, struct pobj_action *act, size_t size, uint64_t type_num);
PMEMoid pmemobj_xreserve(PMEMobjpool *pop, struct pobj_action *act, size_t size, uint64_t type_num,
	uint64_t flags);
void pmemobj_set_value(PMEMobjpool *pop, struct pobj_action *act, uint64_t *ptr, uint64_t value);
void pmemobj_defer_free(PMEMobjpool *pop, PMEMoid oid, struct pobj_action *act);
int pmemobj_publish(PMEMobjpool *pop, struct pobj_action *actv, size_t actvcnt);
void pmemobj_cancel(PMEMobjpool *pop, struct pobj_action *actv, size_t actvcnt);

#define POBJ_RESERVE_NEW(pop, t, act)                                                              \
	((TOID(t))pmemobj_reserve((pop), (act), sizeof(t), TOID_TYPE_NUM(t)))
#define POBJ_RESERVE_ALLOC(pop, t, size, act)                                                      \
	((TOID(t))pmemobj_reserve((pop), (act), (size), TOID_TYPE_NUM(t)))
#define POBJ_XRESERVE_NEW(pop, t, act, flags)                                                      \
	((TOID(t))pmemobj_xreserve((pop), (act), sizeof(t), TOID_TYPE_NUM(t), (flags)))
#define POBJ_XRESERVE_ALLOC(pop, t, size, act, flags)                                              \
	((TOID(t))pmemobj_xreserve((pop), (act), (size), TOID_TYPE_NUM(t), (flags)))

#ifdef __cplusplus
}
#endif
#endif
