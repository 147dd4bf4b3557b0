/* libpmemobj/base.h: object ids, direct pointers, persistence calls, errors (locsim). */
#ifndef LIBPMEMOBJ_BASE_H
#define LIBPMEMOBJ_BASE_H 1

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pmemobjpool PMEMobjpool;

/* The largest object one allocation gives. */
#define PMEMOBJ_MAX_ALLOC_SIZE ((size_t)0x3FFDFFFC0)

/* Flags of the x-variants (pmemobj_xalloc, pmemobj_tx_xadd_range, ...). */
#define POBJ_FLAG_ZERO ((uint64_t)1 << 0)
#define POBJ_FLAG_NO_FLUSH ((uint64_t)1 << 1)
#define POBJ_FLAG_NO_SNAPSHOT ((uint64_t)1 << 2)
#define POBJ_FLAG_ASSUME_INITIALIZED ((uint64_t)1 << 3)
#define POBJ_FLAG_TX_NO_ABORT ((uint64_t)1 << 4)

#define POBJ_CLASS_ID(id) (((uint64_t)(id)) << 48)
#define POBJ_ARENA_ID(id) (((uint64_t)(id)) << 32)
#define POBJ_XALLOC_CLASS_MASK ((((uint64_t)1 << 16) - 1) << 48)
#define POBJ_XALLOC_ARENA_MASK ((((uint64_t)1 << 16) - 1) << 32)
#define POBJ_XALLOC_ZERO POBJ_FLAG_ZERO
#define POBJ_XALLOC_NO_FLUSH POBJ_FLAG_NO_FLUSH
#define POBJ_XALLOC_NO_ABORT POBJ_FLAG_TX_NO_ABORT

/* Flags of pmemobj_memcpy/memmove/memset. */
#define PMEMOBJ_F_MEM_NODRAIN (1U << 0)
#define PMEMOBJ_F_MEM_NONTEMPORAL (1U << 1)
#define PMEMOBJ_F_MEM_TEMPORAL (1U << 2)
#define PMEMOBJ_F_MEM_WC (1U << 3)
#define PMEMOBJ_F_MEM_WB (1U << 4)
#define PMEMOBJ_F_MEM_NOFLUSH (1U << 5)
#define PMEMOBJ_F_RELAXED (1U << 31)

/* A persistent pointer: the pool's id and the object's offset in it (0: null). */
typedef struct pmemoid {
	uint64_t pool_uuid_lo;
	uint64_t off;
} PMEMoid;

static const PMEMoid OID_NULL = {0, 0};
#define OID_IS_NULL(o) ((o).off == 0)
#define OID_EQUALS(lhs, rhs) ((lhs).off == (rhs).off && (lhs).pool_uuid_lo == (rhs).pool_uuid_lo)

PMEMobjpool *pmemobj_pool_by_ptr(const void *addr);
PMEMobjpool *pmemobj_pool_by_oid(PMEMoid oid);
/* The object's address in this process (NULL for OID_NULL). At the plain level, a load of the
 * object is recorded (docs/pmdk.md). */
void *pmemobj_direct(PMEMoid oid);
PMEMoid pmemobj_oid(const void *addr);
size_t pmemobj_alloc_usable_size(PMEMoid oid);
uint64_t pmemobj_type_num(PMEMoid oid);

void *pmemobj_memcpy_persist(PMEMobjpool *pop, void *dest, const void *src, size_t len);
void *pmemobj_memset_persist(PMEMobjpool *pop, void *dest, int c, size_t len);
void *pmemobj_memcpy(PMEMobjpool *pop, void *dest, const void *src, size_t len, unsigned flags);
void *pmemobj_memmove(PMEMobjpool *pop, void *dest, const void *src, size_t len, unsigned flags);
void *pmemobj_memset(PMEMobjpool *pop, void *dest, int c, size_t len, unsigned flags);
void pmemobj_persist(PMEMobjpool *pop, const void *addr, size_t len);
int pmemobj_xpersist(PMEMobjpool *pop, const void *addr, size_t len, unsigned flags);
void pmemobj_flush(PMEMobjpool *pop, const void *addr, size_t len);
int pmemobj_xflush(PMEMobjpool *pop, const void *addr, size_t len, unsigned flags);
void pmemobj_drain(PMEMobjpool *pop);

#define PMEMOBJ_MAJOR_VERSION 2
#define PMEMOBJ_MINOR_VERSION 4
const char *pmemobj_check_version(unsigned major_required, unsigned minor_required);

typedef int (*pmemobj_constr)(PMEMobjpool *pop, void *ptr, void *arg);

/* Called by the iteration macros (debug builds of PMDK check them); a no-op here. */
void _pobj_debug_notice(const char *func_name, const char *file, int line);

/* The last error of the calling thread, as a message. */
const char *pmemobj_errormsg(void);

/* The exact level: every translation unit compiled with -fsanitize=thread (gcc defines
 * __SANITIZE_THREAD__; clang has __has_feature(thread_sanitizer)) tells the library at
 * start-up, and its calls of memcpy, memmove and memset go through the library, which records
 * them. -fsanitize=kernel-address (__SANITIZE_ADDRESS__) is taken as well. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define _LOCSIM_PMEMOBJ_INSTRUMENTED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(LOCSIM_PMEMOBJ_EXACT) || \
	defined(_LOCSIM_PMEMOBJ_INSTRUMENTED)
void locsim_pmemobj_exact_level(void);
void *locsim_pmemobj_memcpy(void *dest, const void *src, size_t n);
void *locsim_pmemobj_memmove(void *dest, const void *src, size_t n);
void *locsim_pmemobj_memset(void *dest, int c, size_t n);
__attribute__((constructor, used)) static void _locsim_pmemobj_exact_init(void)
{
	locsim_pmemobj_exact_level();
}
#define memcpy(d, s, n) locsim_pmemobj_memcpy((d), (s), (n))
#define memmove(d, s, n) locsim_pmemobj_memmove((d), (s), (n))
#define memset(d, c, n) locsim_pmemobj_memset((d), (c), (n))
#endif

#ifdef __cplusplus
}
#endif
#endif
