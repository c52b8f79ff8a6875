/*
 * balance_check: workers with unequal work, each on its own data, for `pinlab run --balance`.
 *
 * balance_check [--no-attach] WORK:MIB...   (one worker per argument, created in that order)
 *
 * Worker i allocates MIB MiB with libpinlab-mem (first touch: on the node it is pinned to), attaches
 * it to itself (unless --no-attach), waits until every worker has done so (so that no node looks
 * idle only because its workers are not created yet), first touches it and adds 1 to every
 * element, pass after pass, until it has used WORK seconds of CPU from the wait. Then it checks that every element equals its number of passes (the data
 * survived whatever moved it) and reports, after all have ended, one JSON line each: its index,
 * tid, the node it started on, the one holding most of its data just after its first touch (a
 * worker taken between the barrier and its touch put it on its new node), the one it ended on,
 * and the node holding most of its data. That
 * node, and the CPU and node the worker ends on, are looked up once every worker has done its work
 * (a barrier), so that a move of the data that began while the worker ran (slow under emulation)
 * has ended by then, and a worker taken while it waited is seen where it went.
 */
#define _GNU_SOURCE
#include <pinlab_mem.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 64

struct worker {
    int index;
    double work;
    size_t bytes;
    pid_t tid;
    int start_node, touched_node, end_node, data_node, end_cpu;
    unsigned long long end_mask; /* the CPUs (below 64) it might run on when it looked where it ended */
    long passes;
    int ok;
};

static int attach = 1;
static pthread_barrier_t all_ready, all_done;

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int node_now(void)
{
    int node = -1;
    return pm_node_of_cpu(sched_getcpu(), &node) == PM_OK ? node : -1;
}

/* The node holding most of [x, x + bytes), -1 if none is known. */
static int most_node(void *x, size_t bytes)
{
    long counts[64] = {0}, absent = 0;
    int most = -1;
    if (pm_where(x, bytes, counts, 64, &absent) == PM_OK)
        for (int node = 0; node < 64; node++)
            if (counts[node] > 0 && (most < 0 || counts[node] > counts[most]))
                most = node;
    return most;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    w->tid = (pid_t)syscall(SYS_gettid);
    w->start_node = node_now();
    long *x = NULL;
    size_t n = w->bytes / sizeof *x;
    if (pm_alloc((void **)&x, w->bytes, PM_FIRST_TOUCH, NULL, 0) != PM_OK) {
        fprintf(stderr, "worker %d: %s\n", w->index, pm_last_error());
        pthread_barrier_wait(&all_ready);
        pthread_barrier_wait(&all_done);
        return NULL;
    }
    /* Base pages only: with transparent huge pages, khugepaged may later collapse a 2 MiB range
     * that spans two workers' neighbouring regions into one huge page on either's node. */
    madvise(x, w->bytes, MADV_NOHUGEPAGE);
    if (attach && pm_attach(x, 0) != PM_OK) /* before the first touch: a balancer sees it from the start */
        fprintf(stderr, "worker %d: %s\n", w->index, pm_last_error());
    pthread_barrier_wait(&all_ready);
    double began = cpu_seconds();
    memset(x, 0, w->bytes);
    w->touched_node = most_node(x, w->bytes); /* where the first touch put it: a thread taken before it touched its data put it there */
    while (cpu_seconds() - began < w->work) {
        for (size_t j = 0; j < n; j++)
            x[j] += 1;
        w->passes++;
    }
    w->ok = 1;
    for (size_t j = 0; j < n; j++)
        w->ok &= x[j] == w->passes;
    pthread_barrier_wait(&all_done);
    w->end_cpu = sched_getcpu(); /* after the barrier too: a thread stolen while it waited is counted where it went */
    w->end_node = node_now();
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0)
        for (int cpu = 0; cpu < 64; cpu++)
            if (CPU_ISSET(cpu, &mask))
                w->end_mask |= 1ULL << cpu;
    w->data_node = most_node(x, w->bytes);
    pm_free(x);
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker workers[MAX_WORKERS];
    pthread_t threads[MAX_WORKERS];
    int count = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-attach")) {
            attach = 0;
            continue;
        }
        double work, mib;
        if (count == MAX_WORKERS || sscanf(argv[i], "%lf:%lf", &work, &mib) != 2 || work <= 0 || mib <= 0) {
            fprintf(stderr, "usage: balance_check [--no-attach] WORK:MIB... (at most %d)\n", MAX_WORKERS);
            return 2;
        }
        workers[count] = (struct worker){.index = count, .work = work, .bytes = (size_t)(mib * (1 << 20)) & ~(size_t)4095};
        count++;
    }
    if (count == 0 || pthread_barrier_init(&all_ready, NULL, (unsigned)count) != 0
        || pthread_barrier_init(&all_done, NULL, (unsigned)count) != 0)
        return 2;
    for (int i = 0; i < count; i++)
        if (pthread_create(&threads[i], NULL, run, &workers[i]) != 0)
            return 1;
    for (int i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
    int bad = 0;
    for (int i = 0; i < count; i++) {
        struct worker *w = &workers[i];
        printf("{\"worker\": %d, \"tid\": %d, \"start_node\": %d, \"touched_node\": %d, \"end_node\": %d, \"end_cpu\": %d, \"end_mask\": %llu, \"data_node\": %d, \"passes\": %ld, \"ok\": %s}\n",
               w->index, (int)w->tid, w->start_node, w->touched_node, w->end_node, w->end_cpu, w->end_mask, w->data_node, w->passes, w->ok ? "true" : "false");
        bad += !w->ok;
    }
    return bad ? 1 : 0;
}
