/* locsim_pm.h: record a C or C++ program's persistent-memory transactions as a locsim trace
 * (docs/formats/trace.md), to replay and crash-check it with `locsim run --trace FILE` and
 * `locsim crashtest --trace FILE`. Link with liblocsim_recorder (built by
 * `cargo build --release -p locsim-recorder`: target/release/liblocsim_recorder.a or .so).
 *
 * Every function returns 0 on success and -1 on misuse or an I/O error (a message goes to
 * stderr once and recording stops). One trace per process; the calls are thread-safe.
 *
 * Threads: each thread records as the simulated core `pm_thread` gives it (0 by default, so a
 * single-threaded program needs no call), replayed with `locsim run --trace FILE --cores N`
 * (N above every thread number). Each core has one transaction open at a time. The trace
 * lists each transaction whole when it commits or aborts: isolate your threads' transactions
 * yourself (e.g. two-phase locking, locks released after pm_tx_commit) so that this order is
 * a serial order of your program. */
#ifndef LOCSIM_PM_H
#define LOCSIM_PM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Start a binary trace at `path` for the persistent heap of `size` bytes at `base`, and record
 * the heap's current bytes as its initial content. Heap byte `base + i` is the simulator's
 * data-area byte `i`: align `base` to 64 bytes (better 4096) so that the simulated cache
 * blocks are the program's cache lines. */
int pm_open(const char *path, void *base, size_t size);
/* Record the calling thread's calls as core `thread`'s (0..=65535; outside a transaction). */
int pm_thread(unsigned thread);
/* TxBegin (of the calling thread's core). */
int pm_tx_begin(void);
/* Store: copy `len` bytes from `src` to `dst` (inside the heap) and record them. */
int pm_store(void *dst, const void *src, size_t len);
/* Record a load of `len` bytes at `src` (the program reads them itself). */
int pm_load(const void *src, size_t len);
/* Charge `cycles` core cycles of non-memory work. */
int pm_compute(uint64_t cycles);
/* TxCommit. */
int pm_tx_commit(void);
/* TxAbort: the recorder undoes the transaction's stores in the heap (as the simulator does). */
int pm_tx_abort(void);
/* Finish the trace (the `end` record) and close the file. */
int pm_close(void);

#ifdef __cplusplus
}
#endif

#endif
