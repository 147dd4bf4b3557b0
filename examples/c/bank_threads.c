/* The bank of bank.c with threads (docs/your-own-workload.md): each thread records as its own
 * core (pm_thread) and makes transfers between accounts of one shared persistent heap. A
 * transfer locks its accounts' stripes in ascending order and unlocks them after the commit
 * (two-phase locking), so the order in which the recorder writes transactions is a serial
 * order of the program. Every tenth transfer of a thread is aborted. The heap's final bytes go
 * to HEAP (for a test to compare with the trace).
 *
 *   cc -O2 -I crates/recorder/include examples/c/bank_threads.c \
 *      target/release/liblocsim_recorder.a -lpthread -ldl -lm -o bank_threads
 *   ./bank_threads bank4.trace 500 4 heap.bin
 *   locsim run --trace bank4.trace --cores 4
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "locsim_pm.h"

#define ACCOUNTS 4096
#define STRIPES 64

static uint64_t *balance;
static pthread_mutex_t stripe[STRIPES];
static long transfers;

static void *teller(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg;
    if (pm_thread(id) != 0) return (void *)1;
    uint64_t x = 88172645463325252ull + id; /* xorshift64: a fixed sequence per thread */
    for (long t = 0; t < transfers; t++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t from = x % ACCOUNTS, to = (x >> 20) % ACCOUNTS, amount = (x >> 40) % 100;
        unsigned a = from % STRIPES, b = to % STRIPES;
        unsigned lo = a < b ? a : b, hi = a < b ? b : a;
        pthread_mutex_lock(&stripe[lo]);
        if (hi != lo) pthread_mutex_lock(&stripe[hi]);
        int ok = pm_tx_begin() == 0 && pm_load(&balance[from], sizeof(uint64_t)) == 0 &&
                 pm_load(&balance[to], sizeof(uint64_t)) == 0 && pm_compute(40) == 0;
        if (ok && from != to && balance[from] >= amount) {
            uint64_t na = balance[from] - amount, nb = balance[to] + amount;
            ok = pm_store(&balance[from], &na, sizeof na) == 0 && pm_store(&balance[to], &nb, sizeof nb) == 0;
        }
        if (ok) ok = (t % 10 == 9 ? pm_tx_abort() : pm_tx_commit()) == 0;
        if (hi != lo) pthread_mutex_unlock(&stripe[hi]);
        pthread_mutex_unlock(&stripe[lo]);
        if (!ok) return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s TRACE TRANSFERS_PER_THREAD THREADS HEAP\n", argv[0]);
        return 2;
    }
    transfers = atol(argv[2]);
    int threads = atoi(argv[3]);
    if (threads < 1 || threads > 16) {
        fprintf(stderr, "THREADS %d: allowed 1..=16\n", threads);
        return 2;
    }
    balance = aligned_alloc(64, ACCOUNTS * sizeof(uint64_t));
    for (int i = 0; i < ACCOUNTS; i++) balance[i] = 1000;
    for (int i = 0; i < STRIPES; i++) pthread_mutex_init(&stripe[i], NULL);
    if (pm_open(argv[1], balance, ACCOUNTS * sizeof(uint64_t)) != 0) return 1;
    pthread_t tid[16];
    for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, teller, (void *)(uintptr_t)i);
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(tid[i], &r);
        failed |= r != NULL;
    }
    if (failed || pm_close() != 0) return 1;
    uint64_t total = 0;
    for (int i = 0; i < ACCOUNTS; i++) total += balance[i];
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(balance, sizeof(uint64_t), ACCOUNTS, f) != ACCOUNTS || fclose(f) != 0) return 1;
    printf("%d threads, %ld transfers each, total %llu\n", threads, transfers, (unsigned long long)total);
    return total == 1000ull * ACCOUNTS ? 0 : 1;
}
