/* Drives every call of pinlab's memory API on the machine it runs on (one node here, 2 and 4
 * nodes in the emulated NUMA machine) and prints what the kernel reports as JSON lines, one per
 * check; tests/memory/test_mem_api.py and tests/vm/test_vm_memory.py assert on them.
 * Built with the flags `pinlab cflags --mem` and `pinlab ldflags --mem` print. */
#define _GNU_SOURCE
#include <pinlab_mem.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIB (1UL << 20)
#define MAXN 64

static int nodes;
static long page;

static int cpu_of_node(int node)
{
    char path[96], text[256] = "";
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    if (!f)
        return node == 0 ? 0 : -1;
    if (!fgets(text, sizeof text, f))
        text[0] = 0;
    fclose(f);
    return text[0] >= '0' && text[0] <= '9' ? atoi(text) : -1;
}

static void pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void print_where(const char *check, const void *addr, size_t size, const char *extra)
{
    long counts[MAXN], absent = 0;
    int rc = pm_where(addr, size, counts, MAXN, &absent);
    printf("{\"check\": \"%s\", \"rc\": %d%s%s, \"absent\": %ld, \"where\": {", check, rc, extra[0] ? ", " : "", extra, absent);
    int first = 1;
    for (int n = 0; n < MAXN && rc == PM_OK; n++)
        if (counts[n]) {
            printf("%s\"%d\": %ld", first ? "" : ", ", n, counts[n]);
            first = 0;
        }
    printf("}}\n");
    fflush(stdout);
}

static uint64_t fill(uint64_t *a, size_t words, uint64_t seed)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++) {
        a[i] = (i + seed) * 0x9E3779B97F4A7C15ULL;
        sum ^= a[i] + i;
    }
    return sum;
}

static uint64_t checksum(const uint64_t *a, size_t words)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++)
        sum ^= a[i] + i;
    return sum;
}

/* ---- next touch from several threads at once ---- */
struct toucher {
    int cpu, id, count;
    uint64_t *a;
    size_t words;
    pthread_barrier_t *go;
    int disjoint;
};

static void *touch(void *arg)
{
    struct toucher *t = arg;
    pin_self(t->cpu);
    pthread_barrier_wait(t->go);
    size_t per_page = (size_t)page / 8, pages = t->words / per_page;
    for (size_t k = 0; k < pages; k++) {
        /* disjoint: thread id owns pages id, id+count, ...; else every thread walks every page,
         * each from another starting point, reading and writing back the same value. */
        size_t p = t->disjoint ? k : (k + (size_t)t->id * pages / (size_t)t->count) % pages;
        if (t->disjoint && (int)(p % (size_t)t->count) != t->id)
            continue;
        volatile uint64_t *w = &t->a[p * per_page + (size_t)t->id % per_page];
        *w = *w;
    }
    return NULL;
}

static void next_touch(const char *check, int granularity, int disjoint, size_t size)
{
    uint64_t *a;
    int home = 0, rc = pm_alloc((void **)&a, size, PM_BIND, &home, 1);
    if (rc) {
        printf("{\"check\": \"%s\", \"rc\": %d, \"error\": \"%s\"}\n", check, rc, pm_last_error());
        return;
    }
    size_t words = size / 8;
    madvise(a, size, MADV_NOHUGEPAGE); /* base pages: a page of a transparent huge page moves with all 512 */
    uint64_t before = fill(a, words, 7);
    rc = pm_migrate_on_next_touch(a, granularity);
    long pending_armed = -1, pending_after = -1;
    pm_next_touch_pending(a, &pending_armed);
    int count = 2 * nodes;
    pthread_t threads[2 * MAXN];
    struct toucher t[2 * MAXN];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)count);
    for (int i = 0; i < count; i++) {
        t[i] = (struct toucher){cpu_of_node(i % nodes), i, count, a, words, &go, disjoint};
        pthread_create(&threads[i], NULL, touch, &t[i]);
    }
    for (int i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
    pm_next_touch_pending(a, &pending_after);
    char extra[256];
    snprintf(extra, sizeof extra, "\"arm_rc\": %d, \"threads\": %d, \"pages\": %zu, \"pending_armed\": %ld, \"pending_after\": %ld, "
             "\"same\": %s", rc, count, size / (size_t)page, pending_armed, pending_after, checksum(a, words) == before ? "true" : "false");
    print_where(check, a, size, extra);
    if (disjoint) { /* the node of each page against the node of its owner */
        size_t per_page = (size_t)page / 8, wrong = 0;
        char first[160] = "";
        for (size_t p = 0; p < words / per_page; p++) {
            void *addr = &a[p * per_page];
            int status = -1;
            syscall(SYS_move_pages, 0, 1UL, &addr, NULL, &status, 0);
            if (status != (int)(p % (size_t)count) % nodes && wrong++ < 4)
                snprintf(first + strlen(first), sizeof first - strlen(first), "%spage %zu on %d, not %d", wrong > 1 ? "; " : "", p,
                         status, (int)(p % (size_t)count) % nodes);
        }
        long moved = 0, failed = 0;
        int err = 0;
        pm_next_touch_stats(&moved, &failed, &err);
        printf("{\"check\": \"%s-owners\", \"wrong\": %zu, \"first\": \"%s\", \"moved\": %ld, \"failed\": %ld, \"errno\": %d}\n", check,
               wrong, first, moved, failed, err);
    }
    pm_free(a);
}

/* A region touched first by a thread of node `node`: all of it moves there. */
static void *touch_one(void *arg)
{
    volatile char *p = arg; /* volatile: a plain p[0] = p[0] is compiled away */
    p[0] = p[0];
    return NULL;
}

static void next_touch_region(void)
{
    for (int node = 0; node < nodes; node++) {
        char *a;
        int home = (node + 1) % nodes;
        pm_alloc((void **)&a, 8 * MIB, PM_BIND, &home, 1);
        madvise(a, 8 * MIB, MADV_NOHUGEPAGE); /* a huge page moves only where a free huge page is (see pinlab_mem.h) */
        uint64_t before = fill((uint64_t *)a, 8 * MIB / 8, 3);
        int rc = pm_migrate_on_next_touch(a, PM_TOUCH_REGION);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu_of_node(node), &set);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        pthread_t thread;
        pthread_create(&thread, &attr, touch_one, a + 5 * (size_t)page + 3);
        pthread_join(thread, NULL);
        char extra[200];
        long moved = 0, failed = 0;
        pm_next_touch_stats(&moved, &failed, NULL);
        snprintf(extra, sizeof extra, "\"arm_rc\": %d, \"toucher_node\": %d, \"home\": %d, \"same\": %s, \"failed_so_far\": %ld", rc, node,
                 home, checksum((uint64_t *)a, 8 * MIB / 8) == before ? "true" : "false", failed);
        print_where("next-touch-region", a, 8 * MIB, extra);
        pm_free(a);
    }
}

/* Next touch of pages never touched (interleaved by policy): they land on the toucher's node. */
struct filler {
    char *p;
    size_t size;
    int cpu;
};

static void *fill_from(void *arg)
{
    struct filler *f = arg;
    pin_self(f->cpu);
    memset(f->p, 7, f->size);
    return NULL;
}

static void next_touch_untouched(void)
{
    for (int node = 0; node < nodes; node++) {
        for (int granularity = PM_TOUCH_PAGE; granularity <= PM_TOUCH_REGION; granularity++) {
            char *a;
            pm_alloc((void **)&a, 1 * MIB, PM_INTERLEAVE, NULL, 0);
            madvise(a, 1 * MIB, MADV_NOHUGEPAGE);
            int rc = pm_migrate_on_next_touch(a, granularity);
            struct filler f = {a, 1 * MIB, cpu_of_node(node)};
            pthread_t thread;
            pthread_create(&thread, NULL, fill_from, &f);
            pthread_join(thread, NULL);
            char extra[96];
            snprintf(extra, sizeof extra, "\"arm_rc\": %d, \"toucher_node\": %d, \"granularity\": %d", rc, node, granularity);
            print_where("next-touch-untouched", a, 1 * MIB, extra);
            pm_free(a);
        }
    }
}

/* pm_next_touch_pending asked to write its answer into the armed region itself. */
static void pending_into_region(void)
{
    long *a;
    pm_alloc((void **)&a, 8 * (size_t)page, PM_FIRST_TOUCH, NULL, 0);
    memset(a, 0, 8 * (size_t)page);
    pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    int rc = pm_next_touch_pending(a, a);
    long after = -1;
    pm_next_touch_pending(a, &after);
    printf("{\"check\": \"pending-into-region\", \"rc\": %d, \"answer\": %ld, \"after\": %ld}\n", rc, *a, after);
    pm_free(a);
}

/* System calls reading from and writing into armed memory: no EFAULT, the bytes as they were. */
static void syscalls(void)
{
    char *a;
    int home = nodes - 1, fds[2];
    size_t size = 64 * (size_t)page;
    pm_alloc((void **)&a, size, PM_BIND, &home, 1);
    for (size_t i = 0; i < size; i++)
        a[i] = (char)(i * 7);
    pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    if (pipe(fds) != 0)
        return;
    ssize_t wrote = write(fds[1], a + page, 3 * (size_t)page); /* the kernel reads armed pages */
    pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    char *b = malloc(3 * (size_t)page);
    ssize_t got = read(fds[0], b, 3 * (size_t)page);
    int same_out = got == 3 * page && memcmp(b, a + page, 3 * (size_t)page) == 0;
    pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    memset(b, 0x5A, 3 * (size_t)page);
    ssize_t wrote2 = write(fds[1], b, 3 * (size_t)page);
    ssize_t got2 = read(fds[0], a + 10 * (size_t)page, 3 * (size_t)page); /* the kernel writes armed pages */
    int same_in = got2 == 3 * page && a[10 * page] == 0x5A && a[13 * page - 1] == 0x5A && a[13 * page] == (char)(13 * page * 7);
    long pending = -1;
    pm_next_touch_pending(a, &pending);
    printf("{\"check\": \"syscalls\", \"wrote\": %zd, \"got\": %zd, \"wrote2\": %zd, \"got2\": %zd, \"same_out\": %s, \"same_in\": %s, "
           "\"pending\": %ld, \"pages\": %zu, \"errno\": %d}\n", wrote, got, wrote2, got2, same_out ? "true" : "false",
           same_in ? "true" : "false", pending, size / (size_t)page, errno);
    free(b);
    close(fds[0]);
    close(fds[1]);
    pm_free(a);
}

static void *attached_thread(void *arg)
{
    int *result = arg;
    char *a;
    pin_self(cpu_of_node(0));
    pm_alloc((void **)&a, 4 * MIB, PM_FIRST_TOUCH, NULL, 0);
    memset(a, 1, 4 * MIB);
    result[0] = pm_attach(a, 0);
    size_t bytes = 0;
    pm_attached_bytes(0, &bytes);
    result[1] = (int)(bytes / MIB);
    int target = cpu_of_node(nodes - 1);
    result[2] = pm_move_thread(0, target);
    result[3] = sched_getcpu();
    result[4] = target;
    long counts[MAXN] = {0}, absent;
    pm_where(a, 4 * MIB, counts, MAXN, &absent);
    result[5] = (int)counts[nodes - 1];
    pm_free(a);
    return NULL;
}

int main(void)
{
    page = sysconf(_SC_PAGESIZE);
    if (pm_nodes(&nodes) != PM_OK || nodes < 1 || nodes > MAXN) {
        fprintf(stderr, "pm_nodes: %s\n", pm_last_error());
        return 1;
    }
    printf("{\"check\": \"machine\", \"nodes\": %d, \"page\": %ld}\n", nodes, page);

    for (int node = 0; node < nodes; node++) { /* bind */
        char *a;
        int rc = pm_alloc((void **)&a, 4 * MIB, PM_BIND, &node, 1);
        if (rc == PM_OK)
            memset(a, 1, 4 * MIB);
        char extra[64];
        snprintf(extra, sizeof extra, "\"node\": %d", node);
        print_where("bind", a, 4 * MIB, extra);
        pm_free(a);
    }
    char *a;
    int rc = pm_alloc((void **)&a, 4 * MIB, PM_INTERLEAVE, NULL, 0); /* interleave over every node */
    if (rc == PM_OK) {
        madvise(a, 4 * MIB, MADV_NOHUGEPAGE); /* page by page: a transparent huge page is interleaved whole */
        memset(a, 1, 4 * MIB);
    }
    print_where("interleave", a, 4 * MIB, "\"nodes\": \"all\"");
    pm_free(a);
    for (int node = 0; node < nodes; node++) { /* local: on the caller's node, touched by the call */
        pin_self(cpu_of_node(node));
        rc = pm_alloc((void **)&a, 4 * MIB, PM_LOCAL, NULL, 0);
        char extra[64];
        snprintf(extra, sizeof extra, "\"node\": %d", node);
        print_where("local", a, 4 * MIB, extra);
        pm_free(a);
        rc = pm_alloc((void **)&a, 4 * MIB, PM_FIRST_TOUCH, NULL, 0); /* first touch: untouched, then here */
        print_where("first-touch-untouched", a, 4 * MIB, extra);
        memset(a, 1, 4 * MIB);
        print_where("first-touch", a, 4 * MIB, extra);
        pm_free(a);
    }
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &all);
    sched_setaffinity(0, sizeof all, &all);

    /* migrate now, to every node in turn, contents kept */
    uint64_t *m;
    pm_alloc((void **)&m, 16 * MIB, PM_FIRST_TOUCH, NULL, 0);
    uint64_t before = fill(m, 16 * MIB / 8, 11);
    for (int node = nodes - 1; node >= 0; node--) {
        rc = pm_migrate(m, node);
        char extra[96];
        snprintf(extra, sizeof extra, "\"node\": %d, \"same\": %s", node, checksum(m, 16 * MIB / 8) == before ? "true" : "false");
        print_where("migrate", m, 16 * MIB, extra);
    }
    pm_free(m);

    /* register memory the program already has (page-aligned), then move it */
    void *mine = aligned_alloc((size_t)page, 2 * MIB);
    memset(mine, 9, 2 * MIB);
    rc = pm_register(mine, 2 * MIB);
    int rc2 = pm_migrate(mine, nodes - 1);
    char extra[96];
    snprintf(extra, sizeof extra, "\"register_rc\": %d, \"node\": %d", rc, nodes - 1);
    print_where("register-migrate", mine, 2 * MIB, extra);
    printf("{\"check\": \"register-migrate-rc\", \"rc\": %d}\n", rc2);
    pm_free(mine);
    free(mine);

    /* 1024 pages each: every page moved costs a protection change seen by every CPU, which on an
     * emulated machine whose host is busy takes milliseconds (16 MiB took minutes on 4 nodes) */
    next_touch("next-touch-page-shared", PM_TOUCH_PAGE, 0, 4 * MIB);
    next_touch("next-touch-page-disjoint", PM_TOUCH_PAGE, 1, 4 * MIB);
    next_touch_region();
    next_touch_untouched();
    pending_into_region();
    syscalls();

    int result[6] = {0};
    pthread_t thread;
    pthread_create(&thread, NULL, attached_thread, result);
    pthread_join(thread, NULL);
    printf("{\"check\": \"attach-move-thread\", \"attach_rc\": %d, \"attached_mib\": %d, \"move_rc\": %d, \"cpu\": %d, \"target_cpu\": %d, "
           "\"pages_on_target_node\": %d, \"pages\": %ld}\n", result[0], result[1], result[2], result[3], result[4], result[5],
           (long)(4 * MIB) / page);

    /* errors: the code and the message */
    char *p;
    pm_alloc((void **)&p, 4 * (size_t)page, PM_FIRST_TOUCH, NULL, 0);
    void *hole = mmap(NULL, 4 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole, 4 * (size_t)page);
    int bad_node = 99, no = 0;
    size_t sz;
    struct { const char *what; int rc; } errors[] = {
        {"alloc-size-0", pm_alloc((void **)&a, 0, PM_BIND, &no, 1)},
        {"alloc-bad-policy", pm_alloc((void **)&a, 4096, 42, NULL, 0)},
        {"alloc-bind-no-nodes", pm_alloc((void **)&a, 4096, PM_BIND, NULL, 0)},
        {"alloc-missing-node", pm_alloc((void **)&a, 4096, PM_BIND, &bad_node, 1)},
        {"alloc-first-touch-nodes", pm_alloc((void **)&a, 4096, PM_FIRST_TOUCH, &no, 1)},
        {"alloc-local-nodes", pm_alloc((void **)&a, 4096, PM_LOCAL, &no, 1)},
        {"register-unaligned", pm_register(p + 1, 100)},
        {"register-unmapped", pm_register(hole, 4 * (size_t)page)},
        {"register-overlap", pm_register(p, (size_t)page)},
        {"migrate-unregistered", pm_migrate(p + page, 0)},
        {"migrate-missing-node", pm_migrate(p, bad_node)},
        {"attach-no-thread", pm_attach(p, 999999)},
        {"free-unregistered", pm_free(hole)},
        {"where-unaligned", pm_where(p + 1, 10, (long[4]){0}, 4, NULL)},
        {"where-unmapped", pm_where(hole, 4 * (size_t)page, (long[4]){0}, 4, NULL)},
        {"size-unregistered", pm_region_size(hole, &sz)},
        {"next-touch-bad-granularity", pm_migrate_on_next_touch(p, 7)},
        {"free-memory-missing-node", pm_free_memory(bad_node, NULL, NULL)},
    };
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        printf("{\"check\": \"error\", \"what\": \"%s\", \"rc\": %d, \"name\": \"%s\"}\n", errors[i].what, errors[i].rc,
               pm_strerror(errors[i].rc));
    rc = pm_register(p + 1, 100);
    printf("{\"check\": \"error-message\", \"message\": \"%s\"}\n", pm_last_error());
    pm_free(p);

    unsigned long long free_bytes = 0, total = 0;
    rc = pm_free_memory(0, &free_bytes, &total);
    printf("{\"check\": \"free-memory\", \"rc\": %d, \"free\": %llu, \"total\": %llu}\n", rc, free_bytes, total);
    double lat = 0, rd = 0, wr = 0, far = 0, seconds = -1;
    rc = pm_access_cost(0, nodes - 1, &lat, &rd, &wr);
    int rc3 = pm_access_cost(0, 0, &far, NULL, NULL);
    int rc4 = pm_migrate_cost(1UL << 30, 0, nodes - 1, &seconds);
    printf("{\"check\": \"costs\", \"rc\": %d, \"latency_ns\": %.1f, \"read_mb_s\": %.0f, \"write_mb_s\": %.0f, \"local_latency_ns\": %.1f, "
           "\"local_rc\": %d, \"migrate_rc\": %d, \"migrate_1g_s\": %.4f, \"source\": \"%s\"}\n", rc, lat, rd, wr, far, rc3, rc4, seconds,
           pm_costs_source());
    return 0;
}
