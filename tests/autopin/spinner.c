/*
 * spinner: a test program for autopin. Worker threads do fixed chunks of arithmetic and report
 * each chunk through the heartbeat (pinlab_heartbeat.h); the work per second therefore shows
 * how much CPU each thread really gets where it is pinned.
 *
 * Usage: spinner --threads N --seconds S [--until-file P] [--slow-after X] [--slow-file P]
 *                [--slow-on CPU] [--churn MS] [--mem MB] [--attached MB]
 *   --threads N      N threads in all: the main thread and N - 1 created ones all spin
 *   --seconds S      run S seconds, then exit 0
 *   --until-file P   end as soon as file P exists (looked for every 50 ms); --seconds is then only
 *                    a cap. A test creates P once autopin has done what it checks, so that a
 *                    loaded machine, where autopin takes longer, cannot end the program first.
 *   --slow-after X   after X seconds each beat is 16 times the arithmetic: a new phase at 1/16 of
 *                    the rate, whatever share of the CPU the thread gets
 *   --slow-file P    the same slow phase, from when file P exists (looked for every 50 ms)
 *   --slow-on CPU    16 times the arithmetic per beat while on CPU: there a thread beats at 1/16 of
 *                    the rate it has elsewhere, on a quiet machine or a busy one alike (a co-runner
 *                    cannot promise that on a busy machine: the kernel moves other work away from
 *                    the CPU it loads, and a thread pinned there gets as much as anywhere)
 *   --slow-shared 1  16 times the arithmetic per beat on a CPU another thread computed its last
 *                    chunk on: sharing a CPU costs 15/16 of the rate, at any load
 *   --idle-on CPU    on CPU, a thread sleeps 99 times as long as each chunk took: it uses at most
 *                    1% of the wall time there, less than even a CPU shared with 50 others gives
 *                    (what a CPU-time metric such as task-clock can tell apart at any load)
 *   --ticks 1        print "tick <n>" (line by line, flushed) after each chunk: a stdout metric
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
static const char *until_file, *slow_file;
static int slow_on = -1, idle_on = -1, slow_shared, ticks;
static long churn_ms;
static struct timespec start;
static atomic_ulong chunks;
static atomic_int stopped, slow_phase;

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

/* Every 50 ms at most, per thread: has --until-file or --slow-file appeared? */
static void look_for_files(double *next)
{
    double now = elapsed();
    if (now < *next)
        return;
    *next = now + 0.05;
    if (until_file && !atomic_load(&stopped) && access(until_file, F_OK) == 0)
        atomic_store(&stopped, 1);
    if (slow_file && !atomic_load(&slow_phase) && access(slow_file, F_OK) == 0)
        atomic_store(&slow_phase, 1);
}

/* The CPU each long-lived thread last computed on (-1: none), for --slow-shared. */
#define SLOWDOWN 16

static atomic_int where[256];
static atomic_int next_index;

/* SLOWDOWN times the arithmetic per beat: in the slow phase, on the --slow-on CPU, or
 * (--slow-shared) on a CPU another thread of the program computed its last chunk on. The beat rate
 * is 1/SLOWDOWN for the same share of the CPU, so that the difference does not depend on how busy
 * the machine is; and a factor of 16 outweighs what other work pinned to one CPU (which the kernel
 * cannot move away) takes from a thread there on a shared machine. */
static int slowed(int index, int cpu)
{
    if ((slow_after >= 0 && elapsed() > slow_after) || atomic_load(&slow_phase) || (slow_on >= 0 && cpu == slow_on))
        return 1;
    if (slow_shared && index >= 0)
        for (int i = 0; i < 256; i++)
            if (i != index && atomic_load(&where[i]) == cpu)
                return 1;
    return 0;
}

static void *spin(void *arg)
{
    double until = arg ? *(double *)arg : seconds;
    int index = arg ? -1 : atomic_fetch_add(&next_index, 1);
    double next_look = 0;
    uint64_t x = (uint64_t)(uintptr_t)&x;
    while (elapsed() < until) {
        look_for_files(&next_look);
        if (atomic_load(&stopped))
            break;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        x = chunk(x);
        int cpu = sched_getcpu();
        if (index >= 0 && index < 256)
            atomic_store(&where[index], cpu);
        if (slowed(index, cpu))
            for (int i = 1; i < SLOWDOWN; i++)
                x = chunk(x);
        pinlab_beat(1);
        unsigned long done = atomic_fetch_add(&chunks, 1);
        if (ticks) {
            flockfile(stdout);
            printf("tick %lu\n", done);
            fflush(stdout);
            funlockfile(stdout);
        }
        if (idle_on >= 0 && cpu == idle_on) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            long ns = 99 * ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
            struct timespec pause = { ns / 1000000000L, ns % 1000000000L };
            nanosleep(&pause, NULL);
        }
    }
    if (index >= 0 && index < 256)
        atomic_store(&where[index], -1);
    return (void *)(uintptr_t)(x & 1);
}

static void *churner(void *arg)
{
    (void)arg;
    while (elapsed() < seconds && !atomic_load(&stopped)) {
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
        else if (!strcmp(argv[i], "--until-file"))
            until_file = argv[i + 1];
        else if (!strcmp(argv[i], "--slow-file"))
            slow_file = argv[i + 1];
        else if (!strcmp(argv[i], "--slow-on"))
            slow_on = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--idle-on"))
            idle_on = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--slow-shared"))
            slow_shared = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ticks"))
            ticks = atoi(argv[i + 1]);
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
    for (int i = 0; i < 256; i++)
        atomic_store(&where[i], -1);
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
