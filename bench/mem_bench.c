/* Migration throughput of pinlab's memory API against the kernel's own tools, side by side.
 *
 * For SIZE MiB first placed on node 0 and moved to node 1 (ROUNDS times, interleaved):
 *   move_pages   the system call directly, 1024 pages a call (the floor)
 *   pm_migrate   the API's migrate-now
 *   migratepages numactl's tool on a child process holding the memory (fork + exec included)
 *   nt_region    next touch of the whole region: one touch from a thread on node 1
 *   nt_page      next touch page by page: a thread on node 1 touching every page
 * and, per page, the cost of a next-touch fault against a plain first-touch fault.
 * One JSON object per measurement on stdout. Built by bench/bench_memory.py with the flags of
 * `pinlab cflags --mem` / `pinlab ldflags --mem`. */
#define _GNU_SOURCE
#include <pinlab_mem.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static long page;
static size_t size;
static int cpu_node[2];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int first_cpu(int node)
{
    char path[96], text[64] = "";
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(text, sizeof text, f))
        exit(2);
    fclose(f);
    return atoi(text);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static char *on_node0(void)
{
    int zero = 0;
    char *p;
    if (pm_alloc((void **)&p, size, PM_BIND, &zero, 1) != PM_OK) {
        fprintf(stderr, "pm_alloc: %s\n", pm_last_error());
        exit(1);
    }
    madvise(p, size, MADV_NOHUGEPAGE);
    memset(p, 1, size);
    return p;
}

static long on(const char *p, int node)
{
    long counts[8] = {0}, absent = 0;
    pm_where(p, size, counts, 8, &absent);
    return counts[node];
}

static void report(const char *method, int round, double seconds, long moved)
{
    printf("{\"method\": \"%s\", \"round\": %d, \"seconds\": %.6f, \"bytes\": %zu, \"pages_moved\": %ld, \"pages\": %zu}\n", method, round,
           seconds, size, moved, size / (size_t)page);
    fflush(stdout);
}

static void direct(int round)
{
    char *p = on_node0();
    size_t count = size / (size_t)page;
    void **pages = malloc(count * sizeof *pages);
    int *nodes = malloc(count * sizeof *nodes), *status = malloc(count * sizeof *status);
    for (size_t i = 0; i < count; i++)
        pages[i] = p + i * (size_t)page, nodes[i] = 1;
    double t = now();
    for (size_t done = 0; done < count; done += 1024)
        syscall(SYS_move_pages, 0, count - done < 1024 ? count - done : 1024, pages + done, nodes + done, status + done, 2);
    report("move_pages", round, now() - t, on(p, 1));
    free(pages), free(nodes), free(status);
    pm_free(p);
}

static void api(int round)
{
    char *p = on_node0();
    double t = now();
    int rc = pm_migrate(p, 1);
    double spent = now() - t;
    if (rc)
        fprintf(stderr, "pm_migrate: %s\n", pm_last_error());
    report("pm_migrate", round, spent, on(p, 1));
    pm_free(p);
}

static void tool(int round)
{
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        exit(1);
    pid_t child = fork();
    if (child == 0) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(p, size, MADV_NOHUGEPAGE);
        memset(p, 1, size); /* first touch on node 0: the parent is pinned there */
        char c = 'r';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1)
        exit(1);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)child);
    char *argv[] = {"migratepages", pid, "0", "1", NULL};
    pid_t helper;
    double t = now();
    if (posix_spawnp(&helper, "migratepages", NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "migratepages not found (Debian package numactl)\n");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return;
    }
    waitpid(helper, NULL, 0);
    double spent = now() - t;
    report("migratepages", round, spent, -1);
    if (write(go[1], &c, 1) != 1)
        exit(1);
    waitpid(child, NULL, 0);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

struct touch {
    char *p;
    int every;
    double seconds;
};

static void *toucher(void *arg)
{
    struct touch *t = arg;
    pin(cpu_node[1]);
    double start = now();
    if (t->every)
        for (size_t off = 0; off < size; off += (size_t)page)
            ((volatile char *)t->p)[off] = ((volatile char *)t->p)[off];
    else
        ((volatile char *)t->p)[0] = ((volatile char *)t->p)[0];
    t->seconds = now() - start;
    return NULL;
}

static double touch_from_node1(char *p, int every)
{
    struct touch t = {p, every, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, toucher, &t);
    pthread_join(thread, NULL);
    return t.seconds;
}

static void next_touch(int round, int granularity)
{
    char *p = on_node0();
    pm_migrate_on_next_touch(p, granularity);
    double spent = touch_from_node1(p, granularity == PM_TOUCH_PAGE);
    report(granularity == PM_TOUCH_PAGE ? "nt_page" : "nt_region", round, spent, on(p, 1));
    pm_free(p);
}

/* Per page: touching pages already in place, first-touch faults, next-touch faults. */
static void per_page(int round)
{
    char *p = on_node0();
    double plain = touch_from_node1(p, 1);
    pm_free(p);
    char *fresh;
    int one = 1;
    pm_alloc((void **)&fresh, size, PM_BIND, &one, 1);
    madvise(fresh, size, MADV_NOHUGEPAGE);
    double fault = touch_from_node1(fresh, 1);
    pm_free(fresh);
    size_t pages = size / (size_t)page;
    printf("{\"method\": \"per_page\", \"round\": %d, \"touch_us\": %.3f, \"first_touch_fault_us\": %.3f}\n", round, plain / pages * 1e6,
           fault / pages * 1e6);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    size = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
    page = sysconf(_SC_PAGESIZE);
    int nodes = 0;
    pm_nodes(&nodes);
    if (nodes < 2) {
        fprintf(stderr, "mem_bench needs two NUMA nodes with memory (this machine has %d): run it in tests/vm/numavm\n", nodes);
        return 2;
    }
    cpu_node[0] = first_cpu(0), cpu_node[1] = first_cpu(1);
    pin(cpu_node[0]);
    for (int r = 0; r < rounds; r++) {
        direct(r);
        api(r);
        tool(r);
        next_touch(r, PM_TOUCH_REGION);
        next_touch(r, PM_TOUCH_PAGE);
        per_page(r);
    }
    return 0;
}
