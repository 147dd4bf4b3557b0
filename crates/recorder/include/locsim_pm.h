/* locsim_pm.h: record a C or C++ program's persistent-memory transactions as a locsim trace
 * (docs/formats/trace.md), to replay and crash-check it with `locsim run --trace FILE` and
 * `locsim crashtest --trace FILE`. Link with liblocsim_recorder (built by
 * `cargo build --release -p locsim-recorder`: target/release/liblocsim_recorder.a or .so).
 *
 * Every function returns 0 on success and -1 on misuse or an I/O error (a message goes to
 * stderr once and recording stops). One trace per process; the calls are thread-safe but the
 * trace is one stream of transactions. */
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
/* TxBegin. */
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
