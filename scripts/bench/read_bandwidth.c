// How fast this machine's threads can read memory: each of T threads streams
// its own 1 GiB buffer with 512-bit loads, best of 6 passes. A decode step
// reads every weight once (1.1 GB for Qwen2.5-Coder-1.5B Q4_K_M), so
// total GB/s / 1.1 GB bounds any runtime's decode tokens/s on this machine.
//
//   gcc -O2 -mavx512f -pthread scripts/bench/read_bandwidth.c -o /tmp/read_bandwidth
//   /tmp/read_bandwidth 2        # threads: 1 or 2
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BYTES (1UL << 30)
#define MAX_THREADS 2

static char *buf[MAX_THREADS];
static double gbps[MAX_THREADS];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *stream(void *arg) {
    long i = (long)arg;
    const char *b = buf[i];
    __m512i acc = _mm512_setzero_si512();
    double best = 1e9;
    for (int pass = 0; pass < 6; pass++) {
        double t = now();
        for (size_t o = 0; o < BYTES; o += 256) {
            acc = _mm512_xor_si512(acc, _mm512_load_si512(b + o));
            acc = _mm512_xor_si512(acc, _mm512_load_si512(b + o + 64));
            acc = _mm512_xor_si512(acc, _mm512_load_si512(b + o + 128));
            acc = _mm512_xor_si512(acc, _mm512_load_si512(b + o + 192));
        }
        t = now() - t;
        if (t < best) best = t;
    }
    gbps[i] = BYTES / best / 1e9;
    volatile long keep = _mm512_reduce_add_epi64(acc);  // the loads are not dead
    (void)keep;
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    if (n < 1 || n > MAX_THREADS) {
        fprintf(stderr, "usage: %s THREADS (1 or 2)\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        buf[i] = aligned_alloc(64, BYTES);
        if (!buf[i]) {
            fprintf(stderr, "no memory for a 1 GiB buffer\n");
            return 1;
        }
        for (size_t o = 0; o < BYTES; o += 4096) buf[i][o] = 1;  // fault the pages in
    }
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, stream, (void *)(long)i);
    double total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        printf("thread %d: %.1f GB/s\n", i, gbps[i]);
        total += gbps[i];
    }
    printf("total: %.1f GB/s\n", total);
    return 0;
}
