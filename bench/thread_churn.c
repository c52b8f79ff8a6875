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
 * Compiled with -DSELF_PIN it is the floor of per-thread pinning: a program that pins its own
 * threads as pinlab would, with nothing else.
 *
 *     thread_churn_selfpin [TOTAL [BATCH [CPUS]]]   (CPUS: comma list, default: CPU 0)
 *
 * The main thread is pinned to the first CPU of CPUS (sched_setaffinity, before the clock
 * starts) and the k-th thread created (k = 1, 2, ...) to CPUS[k mod n], through
 * pthread_attr_setaffinity_np on its attributes: the placement `pinlab run -c CPUS` gives.
 *
 * Output, one line:
 *     threads=<TOTAL> batch=<BATCH> elapsed_s=<seconds> per_thread_us=<microseconds>
 * Exit status 0, or 1 if a thread cannot be created.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
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
#ifdef SELF_PIN
    int cpus[CPU_SETSIZE], ncpus = 0;
    for (const char *p = argc > 3 ? argv[3] : "0"; *p && ncpus < CPU_SETSIZE;) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p || c < 0 || c >= CPU_SETSIZE || (*end && *end != ',')) {
            fprintf(stderr, "%s: CPUS must be a comma list of CPU numbers\n", argv[0]);
            return 2;
        }
        cpus[ncpus++] = (int)c;
        p = *end ? end + 1 : end;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[0], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("thread_churn: sched_setaffinity");
        return 1;
    }
    long created = 0; /* threads created so far: thread k = created + 1 gets cpus[k % ncpus] */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
#endif
    double start = now_s();
    for (long done = 0; done < total;) {
        long n = total - done < batch ? total - done : batch;
        for (long i = 0; i < n; i++) {
#ifdef SELF_PIN
            CPU_ZERO(&set);
            CPU_SET(cpus[++created % ncpus], &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
            int rc = pthread_create(&threads[i], &attr, work, (void *)(size_t)(done + i));
#else
            int rc = pthread_create(&threads[i], NULL, work, (void *)(size_t)(done + i));
#endif
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
