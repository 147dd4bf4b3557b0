/* ex_common.h: what PMDK's examples take from PMDK's source tree (src/examples/ex_common.h),
 * which Debian's libpmemobj-dev leaves out. Written for locsim's tests (tests/pmdk.rs). */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

#define CREATE_MODE_RW (S_IWUSR | S_IRUSR)

/* 0 when the file exists (as access(2)). */
static inline int file_exists(char const *file)
{
	return access(file, F_OK);
}

/* The index of the highest set bit of a non-zero value. */
static inline unsigned find_last_set_64(uint64_t val)
{
	return 63 - (unsigned)__builtin_clzll(val);
}

#endif
