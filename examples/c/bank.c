/* A C program traced with the locsim recorder (docs/your-own-workload.md): transfers between
 * accounts in a persistent heap, each transfer one transaction; every tenth is aborted.
 *
 *   cargo build --release -p locsim-recorder
 *   cc -O2 -I crates/recorder/include examples/c/bank.c target/release/liblocsim_recorder.a \
 *      -lpthread -ldl -lm -o bank
 *   ./bank bank.trace 2000
 *   locsim crashtest --trace bank.trace -p h-wal
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "locsim_pm.h"

#define ACCOUNTS 4096

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TRACE TRANSFERS\n", argv[0]);
        return 2;
    }
    long transfers = atol(argv[2]);
    uint64_t *balance = aligned_alloc(64, ACCOUNTS * sizeof(uint64_t));
    for (int i = 0; i < ACCOUNTS; i++) balance[i] = 1000;
    if (pm_open(argv[1], balance, ACCOUNTS * sizeof(uint64_t)) != 0) return 1;

    uint64_t x = 88172645463325252ull; /* xorshift64: a fixed sequence of transfers */
    for (long t = 0; t < transfers; t++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t from = x % ACCOUNTS, to = (x >> 20) % ACCOUNTS, amount = (x >> 40) % 100;
        pm_tx_begin();
        pm_load(&balance[from], sizeof(uint64_t));
        pm_load(&balance[to], sizeof(uint64_t));
        pm_compute(40);
        if (from != to && balance[from] >= amount) {
            uint64_t a = balance[from] - amount, b = balance[to] + amount;
            pm_store(&balance[from], &a, sizeof a);
            pm_store(&balance[to], &b, sizeof b);
        }
        if (t % 10 == 9) pm_tx_abort(); else pm_tx_commit();
    }
    uint64_t total = 0;
    for (int i = 0; i < ACCOUNTS; i++) total += balance[i];
    if (pm_close() != 0) return 1;
    printf("%ld transfers, total %llu\n", transfers, (unsigned long long)total);
    return total == 1000ull * ACCOUNTS ? 0 : 1;
}
