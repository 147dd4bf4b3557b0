/* libpmemobj.h: locsim's libpmemobj-compatible library (crates/pmemobj).
 *
 * A program written against PMDK's libpmemobj 1.x compiles against this header unmodified and,
 * linked with liblocsim_pmemobj, runs on a pool file as it would with PMDK while writing a
 * locsim trace of its persistent accesses (docs/pmdk.md). The API is libpmemobj's documented
 * one (libpmemobj(7) and the pages it names); a call that is not provided here is simply not
 * declared, so a program that uses it fails to compile or link with its name.
 *
 * Two levels of recording, chosen when the program is compiled (docs/pmdk.md):
 *  - plain: loads are the objects reached through pmemobj_direct (D_RO, D_RW), stores are the
 *    bytes a transaction changed in what it added, allocated or reached;
 *  - exact: compiled with gcc's -fsanitize=kernel-address and call-based instrumentation,
 *    every load and store to the pool in program order, memcpy/memmove/memset included. */
#ifndef LIBPMEMOBJ_H
#define LIBPMEMOBJ_H 1

#include <libpmemobj/base.h>
#include <libpmemobj/types.h>
#include <libpmemobj/pool.h>
#include <libpmemobj/thread.h>
#include <libpmemobj/tx.h>
#include <libpmemobj/atomic.h>
#include <libpmemobj/lists_atomic.h>
#include <libpmemobj/iterator.h>
#include <libpmemobj/action.h>
#include <libpmemobj/ctl.h>

#endif
