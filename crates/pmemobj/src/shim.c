/* The C side of locsim-pmemobj: what stable Rust cannot write.
 *  - pmemobj_tx_begin is C-variadic: its parameters are read here and passed on as arrays;
 *  - longjmp back into the program's TX_BEGIN block;
 *  - the exact level's hooks: gcc's and clang's -fsanitize=thread, compiled without linking
 *    the sanitizer's run-time, calls __tsan_{read,write}{1,2,4,8,16}(addr) (and the unaligned
 *    and range forms) before each access, a read-modify-write as a read then a write. The
 *    hooks test the address against the open pools' span here (one compare for the accesses
 *    that miss every pool) and pass the pool's accesses on with the caller's return address,
 *    the site of the access. The kernel-address sanitizer's hooks (__asan_*_noabort) are
 *    served too, but that instrumentation checks a read-modify-write once, as a load, so a
 *    `x += 1` store is not seen: docs/pmdk.md names -fsanitize=thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The span [lo, hi) covering every open pool; 0, 0 when none is open. Set by the Rust side. */
uintptr_t locsim_pmemobj_lo;
uintptr_t locsim_pmemobj_hi;

int locsim_tx_begin(void *pop, void *env, size_t n, const int *kinds, void *const *a,
		    void *const *b);
void locsim_access(uintptr_t addr, size_t len, int store, const void *site);

#define MAX_PARAMS 16

int pmemobj_tx_begin(void *pop, jmp_buf env, ...)
{
	int kinds[MAX_PARAMS];
	void *a[MAX_PARAMS], *b[MAX_PARAMS];
	size_t n = 0;
	va_list ap;
	va_start(ap, env);
	for (;;) {
		int k = va_arg(ap, int);
		if (k == 0 || n == MAX_PARAMS)
			break;
		kinds[n] = k;
		a[n] = va_arg(ap, void *);
		b[n] = k == 3 ? va_arg(ap, void *) : NULL; /* TX_PARAM_CB: callback, argument */
		n++;
	}
	va_end(ap);
	return locsim_tx_begin(pop, (void *)env, n, kinds, a, b);
}

void locsim_longjmp(void *env, int val)
{
	longjmp(*(jmp_buf *)env, val);
}

#define IN_POOL(a, n) ((uintptr_t)(a) + (n) > locsim_pmemobj_lo && (uintptr_t)(a) < locsim_pmemobj_hi)

#define HOOK(kind, store, size)                                                                    \
	void __asan_##kind##size##_noabort(uintptr_t addr)                                         \
	{                                                                                          \
		if (IN_POOL(addr, size))                                                           \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}                                                                                          \
	void __asan_##kind##size(uintptr_t addr)                                                   \
	{                                                                                          \
		if (IN_POOL(addr, size))                                                           \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}
HOOK(load, 0, 1)
HOOK(load, 0, 2)
HOOK(load, 0, 4)
HOOK(load, 0, 8)
HOOK(load, 0, 16)
HOOK(store, 1, 1)
HOOK(store, 1, 2)
HOOK(store, 1, 4)
HOOK(store, 1, 8)
HOOK(store, 1, 16)

#define HOOKN(kind, store)                                                                         \
	void __asan_##kind##N_noabort(uintptr_t addr, size_t size)                                 \
	{                                                                                          \
		if (size && IN_POOL(addr, size))                                                   \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}                                                                                          \
	void __asan_##kind##N(uintptr_t addr, size_t size)                                         \
	{                                                                                          \
		if (size && IN_POOL(addr, size))                                                   \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}
HOOKN(load, 0)
HOOKN(store, 1)

/* The exact level's memcpy, memmove and memset (the header maps the program's calls here):
 * the source is a load, the destination a store, at the caller's site. */
void *locsim_pmemobj_memcpy(void *d, const void *s, size_t n)
{
	if (n && IN_POOL(s, n))
		locsim_access((uintptr_t)s, n, 0, __builtin_return_address(0));
	if (n && IN_POOL(d, n))
		locsim_access((uintptr_t)d, n, 1, __builtin_return_address(0));
	return memcpy(d, s, n);
}
void *locsim_pmemobj_memmove(void *d, const void *s, size_t n)
{
	if (n && IN_POOL(s, n))
		locsim_access((uintptr_t)s, n, 0, __builtin_return_address(0));
	if (n && IN_POOL(d, n))
		locsim_access((uintptr_t)d, n, 1, __builtin_return_address(0));
	return memmove(d, s, n);
}
void *locsim_pmemobj_memset(void *d, int c, size_t n)
{
	if (n && IN_POOL(d, n))
		locsim_access((uintptr_t)d, n, 1, __builtin_return_address(0));
	return memset(d, c, n);
}

/* Called before a call that does not return (exit, longjmp): nothing to do here. */
void __asan_handle_no_return(void)
{
}

/* ThreadSanitizer's instrumentation (docs/pmdk.md: the exact level). */
#define TSAN(kind, store, size)                                                                    \
	void __tsan_##kind##size(uintptr_t addr)                                                   \
	{                                                                                          \
		if (IN_POOL(addr, size))                                                           \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}                                                                                          \
	void __tsan_unaligned_##kind##size(uintptr_t addr)                                         \
	{                                                                                          \
		if (IN_POOL(addr, size))                                                           \
			locsim_access(addr, size, store, __builtin_return_address(0));             \
	}
TSAN(read, 0, 1)
TSAN(read, 0, 2)
TSAN(read, 0, 4)
TSAN(read, 0, 8)
TSAN(read, 0, 16)
TSAN(write, 1, 1)
TSAN(write, 1, 2)
TSAN(write, 1, 4)
TSAN(write, 1, 8)
TSAN(write, 1, 16)

void __tsan_read_range(uintptr_t addr, size_t size)
{
	if (size && IN_POOL(addr, size))
		locsim_access(addr, size, 0, __builtin_return_address(0));
}
void __tsan_write_range(uintptr_t addr, size_t size)
{
	if (size && IN_POOL(addr, size))
		locsim_access(addr, size, 1, __builtin_return_address(0));
}
void __tsan_init(void)
{
}
void __tsan_func_entry(void *pc)
{
	(void)pc;
}
void __tsan_func_exit(void)
{
}
void __tsan_vptr_update(void **vptr, void *val)
{
	(void)vptr;
	(void)val;
}
