/*
 * thread_churn: creates and joins many short threads and prints how long that took.
 *
 * Usage: thread_churn [TOTAL [BATCH]]   (default 10000 threads, 8 at a time)
 *
 * The main thread creates BATCH threads, joins them, and repeats until TOTAL threads have run.
 * Each thread does trivial work (a few additions into an atomic counter). The time is measured
 * by the program itself (CLOCK_MONOTONIC, from before the first pthread_create to after the
 * last pthread_join), so a launcher's own start-up is not counted.
 *
 * Output, one line:
 *     threads=<TOTAL> batch=<BATCH> elapsed_s=<seconds> per_thread_us=<microseconds>
 * Exit status 0, or 1 if a thread cannot be created.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long counter;

static void *work(void *arg)
{
    unsigned long x = (unsigned long)(size_t)arg, sum = 0;
    for (int i = 0; i < 16; i++)
        sum += x * (unsigned long)i;
    __atomic_add_fetch(&counter, sum | 1, __ATOMIC_RELAXED);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long total = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    long batch = argc > 2 ? strtol(argv[2], NULL, 10) : 8;
    if (total < 1 || batch < 1 || batch > 4096) {
        fprintf(stderr, "usage: %s [TOTAL [BATCH]]   (TOTAL >= 1, 1 <= BATCH <= 4096)\n", argv[0]);
        return 2;
    }
    pthread_t *threads = calloc((size_t)batch, sizeof *threads);
    if (!threads) {
        perror("thread_churn");
        return 1;
    }
    double start = now_s();
    for (long done = 0; done < total;) {
        long n = total - done < batch ? total - done : batch;
        for (long i = 0; i < n; i++) {
            int rc = pthread_create(&threads[i], NULL, work, (void *)(size_t)(done + i));
            if (rc != 0) {
                fprintf(stderr, "thread_churn: pthread_create: %s\n", strerror(rc));
                return 1;
            }
        }
        for (long i = 0; i < n; i++)
            pthread_join(threads[i], NULL);
        done += n;
    }
    double elapsed = now_s() - start;
    printf("threads=%ld batch=%ld elapsed_s=%.6f per_thread_us=%.3f\n", total, batch, elapsed, elapsed / (double)total * 1e6);
    free(threads);
    return counter == 0; /* keeps the work from being optimised away */
}
