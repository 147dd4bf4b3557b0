/* libpmemobj/lists_atomic.h: persistent circular doubly linked lists changed atomically
 * (locsim). Each insert, remove or move is one locsim transaction of its own in the trace. */
#ifndef LIBPMEMOBJ_LISTS_ATOMIC_H
#define LIBPMEMOBJ_LISTS_ATOMIC_H 1

#include <libpmemobj/thread.h>
#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `pe_offset`: where the element's entry (next, prev) lies in it; `head`: the list's head
 * (its first element's id, then a PMEMmutex); `dest`: the element to insert before or after
 * (OID_NULL: the head when `before`, else the tail). */
int pmemobj_list_insert(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid dest, int before,
	PMEMoid oid);
PMEMoid pmemobj_list_insert_new(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid dest,
	int before, size_t size, uint64_t type_num, pmemobj_constr constructor, void *arg);
int pmemobj_list_remove(PMEMobjpool *pop, size_t pe_offset, void *head, PMEMoid oid, int free);
int pmemobj_list_move(PMEMobjpool *pop, size_t pe_old_offset, void *head_old, size_t pe_new_offset,
	void *head_new, PMEMoid dest, int before, PMEMoid oid);

#define POBJ_LIST_ENTRY(type)                                                                      \
	struct {                                                                                   \
		TOID(type) pe_next;                                                                \
		TOID(type) pe_prev;                                                                \
	}
#define POBJ_LIST_HEAD(name, type)                                                                 \
	struct name {                                                                              \
		TOID(type) pe_first;                                                               \
		PMEMmutex lock;                                                                    \
	}

#define POBJ_LIST_DEST_HEAD 1
#define POBJ_LIST_DEST_TAIL 0
#define POBJ_LIST_DEST_BEFORE 1
#define POBJ_LIST_DEST_AFTER 0

#define POBJ_LIST_FIRST(head) ((head)->pe_first)
#define POBJ_LIST_LAST(head, field)                                                                \
	(TOID_IS_NULL((head)->pe_first) ? (head)->pe_first : D_RO((head)->pe_first)->field.pe_prev)
#define POBJ_LIST_EMPTY(head) (TOID_IS_NULL((head)->pe_first))
#define POBJ_LIST_NEXT(elm, field) (D_RO(elm)->field.pe_next)
#define POBJ_LIST_PREV(elm, field) (D_RO(elm)->field.pe_prev)

#define POBJ_LIST_FOREACH(var, head, field)                                                        \
	for ((var) = POBJ_LIST_FIRST(head); TOID_IS_NULL(var) == 0;                                \
	     TOID_EQUALS(POBJ_LIST_NEXT(var, field), POBJ_LIST_FIRST(head))                        \
		     ? TOID_ASSIGN(var, OID_NULL)                                              \
		     : ((var) = POBJ_LIST_NEXT(var, field)))
#define POBJ_LIST_FOREACH_REVERSE(var, head, field)                                                \
	for ((var) = POBJ_LIST_LAST(head, field); TOID_IS_NULL(var) == 0;                          \
	     TOID_EQUALS(POBJ_LIST_PREV(var, field), POBJ_LIST_LAST(head, field))                  \
		     ? TOID_ASSIGN(var, OID_NULL)                                              \
		     : ((var) = POBJ_LIST_PREV(var, field)))

#define _LOCSIM_PE_OFF(head, field) TOID_OFFSETOF(POBJ_LIST_FIRST(head), field)
#define POBJ_LIST_INSERT_HEAD(pop, head, elm, field)                                               \
	pmemobj_list_insert((pop), _LOCSIM_PE_OFF(head, field), (head), OID_NULL,                  \
		POBJ_LIST_DEST_HEAD, (elm).oid)
#define POBJ_LIST_INSERT_TAIL(pop, head, elm, field)                                               \
	pmemobj_list_insert((pop), _LOCSIM_PE_OFF(head, field), (head), OID_NULL,                  \
		POBJ_LIST_DEST_TAIL, (elm).oid)
#define POBJ_LIST_INSERT_AFTER(pop, head, listelm, elm, field)                                     \
	pmemobj_list_insert((pop), _LOCSIM_PE_OFF(head, field), (head), (listelm).oid,             \
		POBJ_LIST_DEST_AFTER, (elm).oid)
#define POBJ_LIST_INSERT_BEFORE(pop, head, listelm, elm, field)                                    \
	pmemobj_list_insert((pop), _LOCSIM_PE_OFF(head, field), (head), (listelm).oid,             \
		POBJ_LIST_DEST_BEFORE, (elm).oid)
#define POBJ_LIST_INSERT_NEW_HEAD(pop, head, field, size, constr, arg)                             \
	pmemobj_list_insert_new((pop), _LOCSIM_PE_OFF(head, field), (head), OID_NULL,              \
		POBJ_LIST_DEST_HEAD, (size), TOID_TYPE_NUM_OF((head)->pe_first), (constr), (arg))
#define POBJ_LIST_INSERT_NEW_TAIL(pop, head, field, size, constr, arg)                             \
	pmemobj_list_insert_new((pop), _LOCSIM_PE_OFF(head, field), (head), OID_NULL,              \
		POBJ_LIST_DEST_TAIL, (size), TOID_TYPE_NUM_OF((head)->pe_first), (constr), (arg))
#define POBJ_LIST_INSERT_NEW_AFTER(pop, head, listelm, field, size, constr, arg)                   \
	pmemobj_list_insert_new((pop), _LOCSIM_PE_OFF(head, field), (head), (listelm).oid,         \
		POBJ_LIST_DEST_AFTER, (size), TOID_TYPE_NUM_OF((head)->pe_first), (constr), (arg))
#define POBJ_LIST_INSERT_NEW_BEFORE(pop, head, listelm, field, size, constr, arg)                  \
	pmemobj_list_insert_new((pop), _LOCSIM_PE_OFF(head, field), (head), (listelm).oid,         \
		POBJ_LIST_DEST_BEFORE, (size), TOID_TYPE_NUM_OF((head)->pe_first), (constr), (arg))
#define POBJ_LIST_REMOVE(pop, head, elm, field)                                                    \
	pmemobj_list_remove((pop), _LOCSIM_PE_OFF(head, field), (head), (elm).oid, 0)
#define POBJ_LIST_REMOVE_FREE(pop, head, elm, field)                                               \
	pmemobj_list_remove((pop), _LOCSIM_PE_OFF(head, field), (head), (elm).oid, 1)
#define POBJ_LIST_MOVE_ELEMENT_HEAD(pop, head, head_new, elm, field, field_new)                    \
	pmemobj_list_move((pop), _LOCSIM_PE_OFF(head, field), (head),                              \
		_LOCSIM_PE_OFF(head_new, field_new), (head_new), OID_NULL, POBJ_LIST_DEST_HEAD,     \
		(elm).oid)
#define POBJ_LIST_MOVE_ELEMENT_TAIL(pop, head, head_new, elm, field, field_new)                    \
	pmemobj_list_move((pop), _LOCSIM_PE_OFF(head, field), (head),                              \
		_LOCSIM_PE_OFF(head_new, field_new), (head_new), OID_NULL, POBJ_LIST_DEST_TAIL,     \
		(elm).oid)
#define POBJ_LIST_MOVE_ELEMENT_AFTER(pop, head, head_new, listelm, elm, field, field_new)          \
	pmemobj_list_move((pop), _LOCSIM_PE_OFF(head, field), (head),                              \
		_LOCSIM_PE_OFF(head_new, field_new), (head_new), (listelm).oid,                    \
		POBJ_LIST_DEST_AFTER, (elm).oid)
#define POBJ_LIST_MOVE_ELEMENT_BEFORE(pop, head, head_new, listelm, elm, field, field_new)         \
	pmemobj_list_move((pop), _LOCSIM_PE_OFF(head, field), (head),                              \
		_LOCSIM_PE_OFF(head_new, field_new), (head_new), (listelm).oid,                    \
		POBJ_LIST_DEST_BEFORE, (elm).oid)

#ifdef __cplusplus
}
#endif
#endif
