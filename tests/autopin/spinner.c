/*
 * spinner: a test program for autopin. Worker threads do fixed chunks of arithmetic and report
 * each chunk through the heartbeat (pinlab_heartbeat.h); the work per second therefore shows
 * how much CPU each thread really gets where it is pinned.
 *
 * Usage: spinner --threads N --seconds S [--slow-after X] [--churn MS] [--mem MB] [--attached MB]
 *   --threads N      N threads in all: the main thread and N - 1 created ones all spin
 *   --seconds S      run S seconds, then exit 0
 *   --slow-after X   after X seconds each thread sleeps as long as it computed (a new phase
 *                    at half the rate)
 *   --churn MS       the main thread also creates a short-lived extra thread every MS ms
 *                    (it spins MS/2 ms and ends): threads that appear and end during probing
 *   --exit N         exit with status N (default 0)
 *   --mem MB         the main thread first touches MB MiB (pages to migrate), keeps them to the end
 *   --attached MB    and MB MiB more, allocated with libpinlab-mem and attached to the main thread
 * Prints "spinner chunks=<total> threads=<N> last_cpu=<CPU the main thread ended on>" at the end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinlab_heartbeat.h"
#include "pinlab_mem.h"

static double seconds, slow_after = -1;
static long churn_ms;
static struct timespec start;
static atomic_ulong chunks;

static double elapsed(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
}

static uint64_t chunk(uint64_t x)
{
    for (int i = 0; i < 200000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void *spin(void *arg)
{
    double until = arg ? *(double *)arg : seconds;
    uint64_t x = (uint64_t)(uintptr_t)&x;
    while (elapsed() < until) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        x = chunk(x);
        pinlab_beat(1);
        atomic_fetch_add(&chunks, 1);
        if (slow_after >= 0 && elapsed() > slow_after) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            long ns = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
            struct timespec pause = { ns / 1000000000L, ns % 1000000000L };
            nanosleep(&pause, NULL);
        }
    }
    return (void *)(uintptr_t)(x & 1);
}

static void *churner(void *arg)
{
    (void)arg;
    while (elapsed() < seconds) {
        usleep((useconds_t)churn_ms * 1000);
        double until = elapsed() + churn_ms / 2000.0;
        pthread_t t;
        if (pthread_create(&t, NULL, spin, &until) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1;
    long mem_mb = 0, attached_mb = 0;
    int status = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--slow-after"))
            slow_after = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--churn"))
            churn_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--exit"))
            status = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mem"))
            mem_mb = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--attached"))
            attached_mb = atol(argv[i + 1]);
    }
    char *memory = NULL, *attached = NULL;
    if (mem_mb > 0 && (memory = malloc((size_t)mem_mb << 20)))
        memset(memory, 1, (size_t)mem_mb << 20);
    if (attached_mb > 0) {
        if (pm_alloc((void **)&attached, (size_t)attached_mb << 20, PM_FIRST_TOUCH, NULL, 0) != PM_OK
            || pm_attach(attached, 0) != PM_OK) {
            fprintf(stderr, "spinner: %s\n", pm_last_error());
            return 2;
        }
        memset(attached, 1, (size_t)attached_mb << 20);
        printf("spinner attached=%p\n", (void *)attached);
        fflush(stdout);
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t t[256];
    int made = 0;
    for (int i = 1; i < threads && i < 256; i++)
        if (pthread_create(&t[made], NULL, spin, NULL) == 0)
            made++;
    pthread_t c;
    int churning = churn_ms > 0 && pthread_create(&c, NULL, churner, NULL) == 0;
    spin(NULL);
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    if (churning)
        pthread_join(c, NULL);
    printf("spinner chunks=%lu threads=%d last_cpu=%d\n", (unsigned long)atomic_load(&chunks), threads, sched_getcpu());
    free(memory);
    if (attached)
        pm_free(attached);
    return status;
}
