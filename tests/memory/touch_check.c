/* Next touch at its limits, one case per run (argv[1]), printed as one JSON line; asserted on by
 * tests/memory/test_next_touch_limits.py here and tests/vm/test_vm_memory_nodes.py on several
 * nodes; the data starts on node argv[2] (0 by default):
 *   refused   the kernel refuses every move (move_pages answers EPERM under a seccomp filter):
 *             the statistics name the errno;
 *   maplimit  the process is a few mappings short of vm.max_map_count when page granularity
 *             starts unprotecting page by page: the region falls back and says so, every page
 *             ends on the toucher's node;
 *   fork      a child process arms memory it shares copy-on-write with its parent, region and
 *             page granularity, and memory shared with it (MAP_SHARED), then touches it from a
 *             CPU of the last node; pm_migrate of the shared memory says why it cannot;
 *   cpu-only HOME  PM_LOCAL, and next touch of memory on node HOME, from a CPU of each node
 *             without memory;
 *   hold      a process holding memory bound to given nodes (for pinlab migrate);
 *   where-armed  pm_where of an armed region, half of it touched, before any access;
 *   attached-exited  a region attached to a thread that has exited.
 * Built with the flags `pinlab cflags --mem` and `pinlab ldflags --mem` print. */
#define _GNU_SOURCE
#include <pinlab_mem.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXN 64

static long page;
static int home; /* the node the data starts on (argv[2], 0 by default) */

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

/* The last node with CPUs and memory (the toucher's node), and pin the caller to its first CPU. */
static int pin_to_last_node(void)
{
    for (int node = MAXN - 1; node >= 0; node--) {
        int cpu = cpu_of_node(node);
        if (cpu >= 0 && pm_free_memory(node, NULL, NULL) == PM_OK) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            sched_setaffinity(0, sizeof set, &set);
            return node;
        }
    }
    return 0;
}

static void print_where(const void *addr, size_t size)
{
    long counts[MAXN], absent = 0;
    int rc = pm_where(addr, size, counts, MAXN, &absent);
    printf("\"where_rc\": %d, \"absent\": %ld, \"where\": {", rc, absent);
    for (int n = 0, first = 1; n < MAXN && rc == PM_OK; n++)
        if (counts[n]) {
            printf("%s\"%d\": %ld", first ? "" : ", ", n, counts[n]);
            first = 0;
        }
    printf("}");
}

static void print_stats(void)
{
    long moved = -1, failed = -1, regions = -1, pages = -1;
    int err = -1;
    pm_next_touch_stats(&moved, &failed, &err);
    pm_next_touch_fallbacks(&regions, &pages);
    printf("\"moved\": %ld, \"failed\": %ld, \"errno\": %d, \"fallback_regions\": %ld, \"fallback_pages\": %ld", moved, failed, err,
           regions, pages);
}

static int refused(void)
{
    char *a;
    if (pm_alloc((void **)&a, 4 * (size_t)page, PM_FIRST_TOUCH, NULL, 0) != PM_OK)
        return 1;
    memset(a, 1, 4 * (size_t)page);
    pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_move_pages, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("seccomp");
        return 1;
    }
    for (int i = 0; i < 4; i++)
        ((volatile char *)a)[i * page] += 1;
    long pending = -1;
    pm_next_touch_pending(a, &pending);
    printf("{\"case\": \"refused\", \"pending\": %ld, \"same\": %s, ", pending, a[0] == 2 && a[3 * page] == 2 ? "true" : "false");
    print_stats();
    printf("}\n");
    return 0;
}

/* Split a reserve of pages into as many mappings as the kernel allows (every other page read
 * only), then merge `headroom` of them back: the process is that many mappings short of the limit. */
static int use_up_mappings(int headroom)
{
    size_t pages = 70000;
    char *reserve = mmap(NULL, 2 * pages * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve == MAP_FAILED)
        return -1;
    size_t split = 0;
    while (split < pages && mprotect(reserve + 2 * split * (size_t)page, (size_t)page, PROT_READ) == 0)
        split++;
    if (split == pages || errno != ENOMEM)
        return -1; /* the limit is higher than this test can reach */
    for (int i = 0; i < headroom / 2 + 1; i++)
        mprotect(reserve + 2 * (split - 1 - (size_t)i) * (size_t)page, (size_t)page, PROT_READ | PROT_WRITE);
    return (int)split;
}

static int maplimit(void)
{
    const size_t pages = 2048;
    char *a;
    int toucher = pin_to_last_node();
    if (pm_alloc((void **)&a, pages * (size_t)page, PM_BIND, &home, 1) != PM_OK)
        return 1;
    madvise(a, pages * (size_t)page, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < pages; i++)
        a[i * (size_t)page] = (char)i;
    int rc = pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);
    printf("{\"case\": \"maplimit\", \"pages\": %zu, \"toucher_node\": %d, \"arm_rc\": %d, ", pages, toucher, rc);
    fflush(stdout);
    int split = use_up_mappings(40);
    if (split < 0) {
        printf("\"split\": -1}\n");
        return 0;
    }
    int same = 1;
    for (size_t i = 0; i < pages; i += 2) /* every other page: each unprotect splits the region further */
        same &= a[i * (size_t)page] == (char)i;
    for (size_t i = 1; i < pages; i += 2)
        same &= a[i * (size_t)page] == (char)i;
    long pending = -1;
    pm_next_touch_pending(a, &pending);
    printf("\"split\": %d, \"pending\": %ld, \"same\": %s, ", split, pending, same ? "true" : "false");
    print_stats();
    printf(", ");
    print_where(a, pages * (size_t)page);
    printf("}\n");
    return 0;
}

/* In a forked child: arm `a`, touch every page from the last node, report. */
static void child_touch(const char *name, char *a, size_t pages, int granularity, int migrate_to)
{
    pid_t child = fork();
    if (child == 0) {
        int toucher = pin_to_last_node();
        int rc = pm_migrate_on_next_touch(a, granularity);
        int same = 1;
        for (size_t i = 0; i < pages; i++)
            same &= ((volatile char *)a)[i * (size_t)page] == (char)(i + 1);
        printf("{\"case\": \"%s\", \"pages\": %zu, \"toucher_node\": %d, \"arm_rc\": %d, \"same\": %s, ", name, pages, toucher, rc,
               same ? "true" : "false");
        print_stats();
        printf(", ");
        print_where(a, pages * (size_t)page);
        if (migrate_to >= 0) {
            void *first = a;
            int where = -1, nodes = 1;
            syscall(SYS_move_pages, 0, 1UL, &first, NULL, &where, 0);
            pm_nodes(&nodes);
            for (int n = 0; n < nodes; n++) /* a node with memory other than the pages' */
                if (n != where && pm_free_memory(n, NULL, NULL) == PM_OK) {
                    migrate_to = n;
                    break;
                }
            int mrc = pm_migrate(a, migrate_to);
            char message[400];
            snprintf(message, sizeof message, "%s", pm_last_error());
            for (char *c = message; *c; c++)
                if (*c == '"' || *c == '\\')
                    *c = '\'';
            printf(", \"migrate_to\": %d, \"migrate_rc\": %d, \"migrate_error\": \"%s\"", migrate_to, mrc, message);
        }
        printf("}\n");
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
}

static int forked(void)
{
    const size_t pages = 64;
    char *a, *b;
    pm_alloc((void **)&a, pages * (size_t)page, PM_BIND, &home, 1);
    pm_alloc((void **)&b, pages * (size_t)page, PM_BIND, &home, 1);
    char *shared = mmap(NULL, pages * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < pages; i++)
        a[i * (size_t)page] = b[i * (size_t)page] = shared[i * (size_t)page] = (char)(i + 1);
    pm_register(shared, pages * (size_t)page);
    fflush(stdout);
    child_touch("fork-region", a, pages, PM_TOUCH_REGION, -1);
    child_touch("fork-page", b, pages, PM_TOUCH_PAGE, -1);
    child_touch("fork-shared", shared, pages, PM_TOUCH_PAGE, 0);
    printf("{\"case\": \"fork-parent\", ");
    print_where(a, pages * (size_t)page);
    printf("}\n");
    return 0;
}

/* From a CPU of every node without memory: PM_LOCAL, and next touch by page and by region, of
 * memory bound to node `home`. */
static int cpu_only_nodes(void)
{
    for (int node = 0; node < MAXN; node++) {
        int cpu = cpu_of_node(node);
        if (cpu < 0 || pm_free_memory(node, NULL, NULL) == PM_OK)
            continue; /* no CPUs, or memory of its own */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
        char *a;
        int rc = pm_alloc((void **)&a, 64 * (size_t)page, PM_LOCAL, NULL, 0);
        printf("{\"case\": \"local\", \"node\": %d, \"cpu\": %d, \"rc\": %d, ", node, cpu, rc);
        if (rc == PM_OK) {
            print_where(a, 64 * (size_t)page);
            pm_free(a);
        } else {
            printf("\"error\": \"%s\"", pm_last_error());
        }
        printf("}\n");
        for (int granularity = PM_TOUCH_PAGE; granularity <= PM_TOUCH_REGION; granularity++) {
            pm_alloc((void **)&a, 64 * (size_t)page, PM_BIND, &home, 1);
            for (size_t i = 0; i < 64; i++)
                a[i * (size_t)page] = (char)(i + 1);
            long before_moved = 0;
            pm_next_touch_stats(&before_moved, NULL, NULL);
            int arm = pm_migrate_on_next_touch(a, granularity);
            int same = 1;
            for (size_t i = 0; i < 64; i++)
                same &= ((volatile char *)a)[i * (size_t)page] == (char)(i + 1);
            long pending = -1, moved = 0, failed = 0;
            pm_next_touch_pending(a, &pending);
            pm_next_touch_stats(&moved, &failed, NULL);
            printf("{\"case\": \"next-touch\", \"node\": %d, \"granularity\": %d, \"home\": %d, \"arm_rc\": %d, \"same\": %s, "
                   "\"pending\": %ld, \"moved\": %ld, \"failed\": %ld, ", node, granularity, home, arm, same ? "true" : "false", pending,
                   moved - before_moved, failed);
            print_where(a, 64 * (size_t)page);
            printf("}\n");
            pm_free(a);
        }
    }
    return 0;
}

/* Hold NODE:MIB,... (each bound to its node, touched), print "ready", wait for stdin to close. */
static int hold(int count, char **specs)
{
    for (int i = 0; i < count; i++) {
        int node = atoi(specs[i]);
        size_t size = (size_t)atol(strchr(specs[i], ':') + 1) << 20;
        char *a;
        if (pm_alloc((void **)&a, size, PM_BIND, &node, 1) != PM_OK) {
            fprintf(stderr, "%s: %s\n", specs[i], pm_last_error());
            return 1;
        }
        memset(a, 1, size);
    }
    printf("ready\n");
    fflush(stdout);
    char c;
    return read(0, &c, 1) < 0;
}

static void *attach_and_exit(void *arg)
{
    pm_attach(arg, 0);
    return NULL;
}

/* A region attached to a thread that has exited. */
static int attached_exited(void)
{
    char *a;
    pm_alloc((void **)&a, 4 * (size_t)page, PM_FIRST_TOUCH, NULL, 0);
    pthread_t thread;
    pthread_create(&thread, NULL, attach_and_exit, a);
    pthread_join(thread, NULL);
    usleep(10000); /* the kernel reaps the thread's task right after the join returns */
    pid_t tid = -1;
    int rc = pm_attached(a, &tid);
    size_t mine = 1;
    pm_attached_bytes(0, &mine);
    printf("{\"case\": \"attached-exited\", \"rc\": %d, \"tid\": %d, \"mine\": %zu}\n", rc, (int)tid, mine);
    return 0;
}

/* Where the pages of an armed region are, asked before any touch: there, not "never touched". */
static int where_armed(void)
{
    const size_t pages = 64;
    char *a;
    if (pm_alloc((void **)&a, pages * (size_t)page, PM_BIND, &home, 1) != PM_OK)
        return 1;
    for (size_t i = 0; i < pages / 2; i++) /* half of it touched */
        a[i * (size_t)page] = 1;
    printf("{\"case\": \"where-armed\", \"home\": %d, \"pages\": %zu, \"arm_rc\": %d, ", home, pages, pm_migrate_on_next_touch(a, PM_TOUCH_PAGE));
    print_where(a, pages * (size_t)page);
    long pending = -1;
    pm_next_touch_pending(a, &pending);
    printf(", \"pending\": %ld}\n", pending);
    return 0;
}

int main(int argc, char **argv)
{
    page = sysconf(_SC_PAGESIZE);
    const char *what = argc > 1 ? argv[1] : "";
    home = argc > 2 && strcmp(what, "hold") != 0 ? atoi(argv[2]) : 0;
    if (strcmp(what, "refused") == 0)
        return refused();
    if (strcmp(what, "maplimit") == 0)
        return maplimit();
    if (strcmp(what, "fork") == 0)
        return forked();
    if (strcmp(what, "where-armed") == 0)
        return where_armed();
    if (strcmp(what, "cpu-only") == 0)
        return cpu_only_nodes();
    if (strcmp(what, "hold") == 0)
        return hold(argc - 2, argv + 2);
    if (strcmp(what, "attached-exited") == 0)
        return attached_exited();
    fprintf(stderr, "usage: touch_check refused|maplimit|fork|where-armed|cpu-only|hold NODE:MIB...|attached-exited\n");
    return 2;
}
