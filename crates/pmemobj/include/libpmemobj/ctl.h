/* libpmemobj/ctl.h: the control interface (locsim): only "heap.alloc_class.new.desc", which
 * registers an allocation class (locsim's allocator serves it from its own size classes). */
#ifndef LIBPMEMOBJ_CTL_H
#define LIBPMEMOBJ_CTL_H 1

#include <libpmemobj/base.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pobj_header_type {
	POBJ_HEADER_LEGACY,
	POBJ_HEADER_COMPACT,
	POBJ_HEADER_NONE,
	MAX_POBJ_HEADER_TYPES
};

struct pobj_alloc_class_desc {
	size_t unit_size;
	size_t alignment;
	unsigned units_per_block;
	enum pobj_header_type header_type;
	unsigned class_id;
};

/* 0 on success; -1 with errno EINVAL for any other name. */
int pmemobj_ctl_set(PMEMobjpool *pop, const char *name, void *arg);

#ifdef __cplusplus
}
#endif
#endif
