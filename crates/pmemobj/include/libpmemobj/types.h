/* libpmemobj/types.h: typed object ids (TOID), layouts, direct access macros (locsim). */
#ifndef LIBPMEMOBJ_TYPES_H
#define LIBPMEMOBJ_TYPES_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMEMOBJ_MAX_LAYOUT ((size_t)1024)
#define POBJ_ROOT_TYPE_NUM 0

/* A typed id is a union of the PMEMoid with two pointer members that are never used as
 * values: `_type` carries the object's type, `_type_num` the type number as the size of an
 * array type (so TOID_TYPE_NUM is a compile-time constant). */
/* `TOID(struct foo)` pastes to `_toid_struct foo_toid`: the prefixes below expand to nothing,
 * leaving the tag `foo_toid`. */
#define _toid_struct
#define _toid_union
#define _toid_enum
#define TOID(t) union _toid_##t##_toid
#define _LOCSIM_TOID_DECLARE(t, i)                                                                 \
	typedef uint8_t _toid_##t##_toid_type_num[(i) + 1];                                        \
	TOID(t)                                                                                    \
	{                                                                                          \
		PMEMoid oid;                                                                       \
		t *_type;                                                                          \
		_toid_##t##_toid_type_num *_type_num;                                              \
	}
#define TOID_DECLARE(t, i) _LOCSIM_TOID_DECLARE(t, i)
#define TOID_DECLARE_ROOT(t) _LOCSIM_TOID_DECLARE(t, POBJ_ROOT_TYPE_NUM)
#define TOID_TYPE_NUM(t) (sizeof(_toid_##t##_toid_type_num) - 1)
#define TOID_TYPE_NUM_OF(o) (sizeof(*(o)._type_num) - 1)
#define TOID_NULL(t) ((TOID(t))OID_NULL)
#define TOID_IS_NULL(o) ((o).oid.off == 0)
#define TOID_VALID(o) (TOID_TYPE_NUM_OF(o) == pmemobj_type_num((o).oid))
#define OID_INSTANCEOF(o, t) (TOID_TYPE_NUM(t) == pmemobj_type_num(o))
#define TOID_EQUALS(lhs, rhs) OID_EQUALS((lhs).oid, (rhs).oid)
#define TOID_ASSIGN(o, value) ({ (o).oid = (value); (o); })
#define TOID_TYPEOF(o) __typeof__(*(o)._type)
#define TOID_OFFSETOF(o, field) offsetof(TOID_TYPEOF(o), field)

/* Layouts: the types between BEGIN and END get the numbers 1, 2, ... in order, counted with
 * __COUNTER__ from the value it had at BEGIN. */
#define POBJ_LAYOUT_BEGIN(name) typedef uint8_t _pobj_layout_##name##_ref[__COUNTER__ + 1]
#define _LOCSIM_LAYOUT_REF(name) (sizeof(_pobj_layout_##name##_ref))
#define POBJ_LAYOUT_TOID(name, t) TOID_DECLARE(t, (__COUNTER__ + 1 - _LOCSIM_LAYOUT_REF(name)));
#define POBJ_LAYOUT_ROOT(name, t) TOID_DECLARE_ROOT(t);
#define POBJ_LAYOUT_END(name)                                                                      \
	typedef char _pobj_layout_##name##_cnt[__COUNTER__ + 1 - _LOCSIM_LAYOUT_REF(name)];
#define POBJ_LAYOUT_TYPES_NUM(name) (sizeof(_pobj_layout_##name##_cnt) - 1)
#define POBJ_LAYOUT_NAME(name) #name

#define DIRECT_RW(o) ((__typeof__(*(o)._type) *)pmemobj_direct((o).oid))
#define DIRECT_RO(o) ((const __typeof__(*(o)._type) *)pmemobj_direct((o).oid))
#define D_RW DIRECT_RW
#define D_RO DIRECT_RO

#ifdef __cplusplus
}
#endif
#endif
