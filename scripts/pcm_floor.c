// The host-memory floor of one bit-level PCM device write, without the simulator: the
// read-modify-write of a 64-byte block's old bytes and of its two 64-byte counter planes 0 and 1
// (the work `Pcm::write_block` and `Wear::apply_block` cannot avoid), over blocks in order (a
// log) or at random (home writes), with or without the next writes' lines prefetched, and with
// the three lines of a block in separate arrays (locsim's layout) or side by side in one record.
// docs/performance.md ("Limits of PCM mode") quotes what it gives.
//
//   cc -O2 -march=native -o /tmp/pcm_floor scripts/pcm_floor.c
//   /tmp/pcm_floor MIB order|random AHEAD separate|interleaved
//   e.g. /tmp/pcm_floor 32 order 16 separate; /tmp/pcm_floor 16 random 16 separate
//
// Prints the best of five sweeps, in ns per block write.
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define HUGE (2u << 20)

// `n` bytes aligned to a huge page, advised for huge pages and touched.
static uint64_t *huge(size_t n) {
    char *p = mmap(0, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    char *a = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    madvise(a, n, MADV_HUGEPAGE);
    memset(a, 1, n);
    return (uint64_t *)a;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MIB order|random AHEAD separate|interleaved\n", argv[0]);
        return 2;
    }
    size_t blocks = (size_t)atol(argv[1]) << 20 >> 6;
    int random = argv[2][0] == 'r', interleaved = argv[4][0] == 'i';
    size_t ahead = (size_t)atol(argv[3]);
    // Separate: old bytes in `bytes` (64 B a block), planes 0-1 in `planes` (128 B a block).
    // Interleaved: one 192-byte record a block (bytes, plane 0, plane 1).
    uint64_t *bytes = 0, *planes = 0, *rec = 0;
    if (interleaved) {
        rec = huge(blocks * 192);
    } else {
        bytes = huge(blocks * 64);
        planes = huge(blocks * 128);
    }
    size_t n = blocks * 4;
    size_t *order = malloc(n * sizeof *order);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        order[i] = random ? x % blocks : i % blocks;
    }
    double best = 1e9;
    uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t = now();
        for (size_t i = 0; i < n; i++) {
            size_t k = order[i];
            if (ahead) {
                size_t q = order[i + ahead < n ? i + ahead : i];
                uint64_t *first = interleaved ? &rec[q * 24] : &bytes[q * 8];
                uint64_t *p = interleaved ? first + 8 : &planes[q * 16];
                _mm_prefetch((const char *)first, _MM_HINT_T0);
                _mm_prefetch((const char *)p, _MM_HINT_T0);
                _mm_prefetch((const char *)(p + 8), _MM_HINT_T0);
            }
            uint64_t *b = interleaved ? &rec[k * 24] : &bytes[k * 8];
            uint64_t *p0 = interleaved ? b + 8 : &planes[k * 16], *p1 = p0 + 8;
            for (int l = 0; l < 8; l++) {
                uint64_t next = b[l] ^ (i * 0x9E3779B97F4A7C15ull + l);
                uint64_t carry = b[l] ^ next;
                b[l] = next;
                uint64_t o = p0[l];
                p0[l] = o ^ carry;
                carry &= o;
                p1[l] ^= carry;
                sink += carry;
            }
        }
        double ns = (now() - t) / n * 1e9;
        best = ns < best ? ns : best;
    }
    printf("%s %s, %zu MiB, %zu ahead: %.1f ns per block write (%llu)\n", random ? "random" : "in order",
           interleaved ? "interleaved" : "separate", blocks * 64 >> 20, ahead, best,
           (unsigned long long)(sink & 1));
    return 0;
}
