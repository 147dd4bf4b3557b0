/* libpmemobj/pool.h: pools and the root object (locsim). */
#ifndef LIBPMEMOBJ_POOL_H
#define LIBPMEMOBJ_POOL_H 1

#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMEMOBJ_MIN_POOL ((size_t)(1024 * 1024 * 8))
#define PMEMOBJ_MIN_PART ((size_t)(1024 * 1024 * 2))

/* Open the pool at `path`, checking its layout name (NULL: any). The trace goes to
 * $LOCSIM_TRACE, or `path` + ".trace". */
PMEMobjpool *pmemobj_open(const char *path, const char *layout);
/* Create the pool file `path` of `poolsize` bytes (0: the existing file's size). */
PMEMobjpool *pmemobj_create(const char *path, const char *layout, size_t poolsize, mode_t mode);
/* 1: the pool is consistent, 0: it is not, -1: it cannot be read (errno). */
int pmemobj_check(const char *path, const char *layout);
/* Close the pool and finish its trace. */
void pmemobj_close(PMEMobjpool *pop);

PMEMoid pmemobj_root(PMEMobjpool *pop, size_t size);
PMEMoid pmemobj_root_construct(PMEMobjpool *pop, size_t size, pmemobj_constr constructor, void *arg);
size_t pmemobj_root_size(PMEMobjpool *pop);
void pmemobj_set_user_data(PMEMobjpool *pop, void *data);
void *pmemobj_get_user_data(PMEMobjpool *pop);

#define POBJ_ROOT(pop, t) ((TOID(t))pmemobj_root((pop), sizeof(t)))

#ifdef __cplusplus
}
#endif
#endif
