/*
 * pinlab-threads-probe: a plain pthreads program whose threads report where they start.
 *
 * Usage: pinlab-threads-probe [--threads N] [--nested M] [--spin-ms X] [--mempolicy]
 *                             [--stack-kb K] [--user-stack] [--detached]
 *
 * The main thread (number 0) creates N threads (numbers 1..N, default 3). Each thread, as its
 * very first statement, records sched_getcpu() and its sched_getaffinity mask; then, with
 * --nested M, it creates M threads of its own, which do the same; then it spins X ms (default
 * 10). Nested threads are numbered after main's children: the j-th child (j = 1..M) of thread
 * p is thread N + (p - 1) * M + j, so the numbering does not depend on timing.
 *
 * Output, one line per thread in thread-number order, main first:
 *     thread=<i> parent=<parent number, -1 for main> tid=<tid> cpu=<cpu at start> mask=<cpu list>
 * with --mempolicy, " policy=<mode> nodes=<node list>" appended (get_mempolicy at the start;
 * nodes "-" when the node mask is empty, as for the default policy).
 *
 * The attribute options make the threads be created with a non-NULL attribute, to check that a
 * preload library that copies attributes keeps them:
 *   --stack-kb K    pthread_attr_setstacksize(K KiB); each line gets " stack=<bytes>" (the size
 *                   the running thread really has, from pthread_getattr_np)
 *   --user-stack    a stack the program allocates itself (pthread_attr_setstack); with
 *                   --stack-kb its size, else 256 KiB; each line gets " userstack=yes|no"
 *                   (whether the thread runs on that stack)
 *   --detached      threads are created detached (completion is waited for with a counter);
 *                   each line gets " detached=<0|1>" from pthread_getattr_np
 * Exit status 0, or 1 when a thread cannot be created or a thread's attributes are not the
 * ones asked for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TEXT_MAX 4096
#define MAX_NODES 1024

struct probe {
    int number;
    int parent;
    pid_t tid;
    int cpu;
    char mask[TEXT_MAX];
    int policy;
    char nodes[TEXT_MAX];
    size_t stack;
    int user_stack; /* 1 if running on the stack given with --user-stack */
    int detached;
    int attr_ok;
    void *stack_base; /* the --user-stack memory of this thread */
    size_t stack_len;
};

static struct {
    int threads, nested;
    double spin_ms;
    int mempolicy, detached, user_stack;
    long stack_kb;
} opt = { 3, 0, 10.0, 0, 0, 0, 0 };

static struct probe *probes;
static int total;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_count;  /* threads that finished (under done_lock) */
static int live_count;  /* threads created or being created (under done_lock) */
static int failures;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void format_list(const unsigned char *bits, int nbits, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < nbits; i++) {
        if (!(bits[i / 8] & (1u << (i % 8))))
            continue;
        int last = i;
        while (last + 1 < nbits && (bits[(last + 1) / 8] & (1u << ((last + 1) % 8))))
            last++;
        int n = last == i ? snprintf(out + used, size - used, "%s%d", used ? "," : "", i)
                          : snprintf(out + used, size - used, "%s%d-%d", used ? "," : "", i, last);
        if (n < 0 || (size_t)n >= size - used)
            return;
        used += (size_t)n;
        i = last;
    }
    if (!used)
        snprintf(out, size, "-");
}

/* Where the calling thread is, right now. */
static void record_start(struct probe *p)
{
    p->cpu = sched_getcpu();
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        unsigned char bits[CPU_SETSIZE / 8];
        memset(bits, 0, sizeof bits);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                bits[c / 8] |= (unsigned char)(1u << (c % 8));
        format_list(bits, CPU_SETSIZE, p->mask, sizeof p->mask);
    } else {
        snprintf(p->mask, sizeof p->mask, "?");
    }
    if (opt.mempolicy) {
        int mode = -1;
        unsigned long nodes[MAX_NODES / (8 * sizeof(unsigned long))];
        memset(nodes, 0, sizeof nodes);
        if (syscall(SYS_get_mempolicy, &mode, nodes, (unsigned long)MAX_NODES, NULL, 0UL) == 0) {
            p->policy = mode;
            unsigned char bits[MAX_NODES / 8];
            for (int i = 0; i < MAX_NODES; i++) {
                if (i % 8 == 0)
                    bits[i / 8] = 0;
                if (nodes[i / (8 * sizeof(unsigned long))] & (1UL << (i % (8 * sizeof(unsigned long)))))
                    bits[i / 8] |= (unsigned char)(1u << (i % 8));
            }
            format_list(bits, MAX_NODES, p->nodes, sizeof p->nodes);
        } else {
            p->policy = -1;
            snprintf(p->nodes, sizeof p->nodes, "?");
        }
    }
    p->tid = gettid();
}

static void record_attrs(struct probe *p)
{
    pthread_attr_t a;
    p->attr_ok = 1;
    if (pthread_getattr_np(pthread_self(), &a) != 0) {
        p->attr_ok = 0;
        return;
    }
    void *addr;
    size_t size;
    pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_getdetachstate(&a, &p->detached);
    p->stack = size;
    pthread_attr_destroy(&a);
    if (opt.user_stack) {
        char here;
        uintptr_t h = (uintptr_t)&here, base = (uintptr_t)p->stack_base;
        p->user_stack = h >= base && h < base + p->stack_len;
        if (!p->user_stack)
            p->attr_ok = 0;
    }
    if (opt.detached && p->detached != PTHREAD_CREATE_DETACHED)
        p->attr_ok = 0;
    if (opt.stack_kb && p->stack < (size_t)opt.stack_kb * 1024)
        p->attr_ok = 0;
}

static void *run_thread(void *arg);

static int start_thread(pthread_t *t, struct probe *p)
{
    int rc;
    /* Counted before it exists, so "all done" can never be seen while a creator is still running. */
    pthread_mutex_lock(&done_lock);
    live_count++;
    pthread_mutex_unlock(&done_lock);
    if (!opt.stack_kb && !opt.user_stack && !opt.detached) {
        rc = pthread_create(t, NULL, run_thread, p);
    } else {
        pthread_attr_t a;
        pthread_attr_init(&a);
        if (opt.detached)
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        size_t size = opt.stack_kb ? (size_t)opt.stack_kb * 1024 : 256 * 1024;
        if (opt.user_stack) {
            p->stack_len = size;
            if (posix_memalign(&p->stack_base, 65536, size) != 0)
                p->stack_base = NULL;
            else
                pthread_attr_setstack(&a, p->stack_base, size);
        } else if (opt.stack_kb) {
            pthread_attr_setstacksize(&a, size);
        }
        rc = (opt.user_stack && !p->stack_base) ? ENOMEM : pthread_create(t, &a, run_thread, p);
        pthread_attr_destroy(&a);
    }
    if (rc != 0) {
        pthread_mutex_lock(&done_lock);
        live_count--;
        pthread_cond_broadcast(&done_cond);
        pthread_mutex_unlock(&done_lock);
        fprintf(stderr, "pinlab-threads-probe: cannot create thread %d: %s\n", p->number, strerror(rc));
        __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    }
    return rc;
}

static void wait_threads(pthread_t *t, int *ok, int n)
{
    if (opt.detached)
        return;
    for (int i = 0; i < n; i++)
        if (ok[i])
            pthread_join(t[i], NULL);
}

static void *run_thread(void *arg)
{
    struct probe *p = arg;
    record_start(p);
    record_attrs(p);
    if (p->parent == 0 && opt.nested > 0) {
        pthread_t kids[opt.nested];
        int ok[opt.nested];
        for (int j = 0; j < opt.nested; j++) {
            struct probe *k = &probes[opt.threads + (p->number - 1) * opt.nested + j + 1];
            ok[j] = start_thread(&kids[j], k) == 0;
        }
        wait_threads(kids, ok, opt.nested);
    }
    volatile double sink = 0;
    double end = now_ms() + opt.spin_ms;
    while (now_ms() < end)
        sink += 1.0;
    pthread_mutex_lock(&done_lock);
    done_count++;
    pthread_cond_broadcast(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

static int usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--threads N] [--nested M] [--spin-ms X] [--mempolicy] [--stack-kb K] [--user-stack] [--detached]\n", prog);
    return 2;
}

static int read_int(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 100000)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct probe main_probe;
    memset(&main_probe, 0, sizeof main_probe);
    /* Command-line options decide whether the policy is read: look for it first. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--mempolicy"))
            opt.mempolicy = 1;
    record_start(&main_probe);

    for (int i = 1; i < argc; i++) {
        long v;
        if (!strcmp(argv[i], "--mempolicy")) {
            continue;
        } else if (!strcmp(argv[i], "--detached")) {
            opt.detached = 1;
        } else if (!strcmp(argv[i], "--user-stack")) {
            opt.user_stack = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--threads") && !read_int(argv[i + 1], &v)) {
            opt.threads = (int)v;
            i++;
        } else if (i + 1 < argc && !strcmp(argv[i], "--nested") && !read_int(argv[i + 1], &v)) {
            opt.nested = (int)v;
            i++;
        } else if (i + 1 < argc && !strcmp(argv[i], "--stack-kb") && !read_int(argv[i + 1], &v)) {
            opt.stack_kb = v;
            i++;
        } else if (i + 1 < argc && !strcmp(argv[i], "--spin-ms")) {
            char *end;
            opt.spin_ms = strtod(argv[i + 1], &end);
            if (end == argv[i + 1] || *end || opt.spin_ms < 0)
                return usage(argv[0]);
            i++;
        } else {
            return usage(argv[0]);
        }
    }

    total = 1 + opt.threads + opt.threads * opt.nested;
    probes = calloc((size_t)total, sizeof *probes);
    pthread_t *threads = calloc((size_t)opt.threads + 1, sizeof *threads);
    int *ok = calloc((size_t)opt.threads + 1, sizeof *ok);
    if (!probes || !threads || !ok) {
        perror("pinlab-threads-probe");
        return 1;
    }
    probes[0] = main_probe;
    probes[0].number = 0;
    probes[0].parent = -1;
    for (int i = 1; i <= opt.threads; i++) {
        probes[i].number = i;
        probes[i].parent = 0;
        for (int j = 1; j <= opt.nested; j++) {
            int k = opt.threads + (i - 1) * opt.nested + j;
            probes[k].number = k;
            probes[k].parent = i;
        }
    }
    for (int i = 1; i <= opt.threads; i++)
        ok[i - 1] = start_thread(&threads[i - 1], &probes[i]) == 0;
    wait_threads(threads, ok, opt.threads);
    if (opt.detached) {
        /* Every created thread, nested ones included, reports done. */
        pthread_mutex_lock(&done_lock);
        while (done_count < live_count)
            pthread_cond_wait(&done_cond, &done_lock);
        pthread_mutex_unlock(&done_lock);
    }

    int bad = failures > 0;
    for (int i = 0; i < total; i++) {
        struct probe *p = &probes[i];
        if (i > 0 && !p->tid)
            continue; /* never created */
        printf("thread=%d parent=%d tid=%d cpu=%d mask=%s", p->number, p->parent, (int)p->tid, p->cpu, p->mask);
        if (opt.mempolicy)
            printf(" policy=%d nodes=%s", p->policy, p->nodes);
        if (i > 0 && opt.stack_kb)
            printf(" stack=%zu", p->stack);
        if (i > 0 && opt.user_stack)
            printf(" userstack=%s", p->user_stack ? "yes" : "no");
        if (i > 0 && opt.detached)
            printf(" detached=%d", p->detached == PTHREAD_CREATE_DETACHED);
        putchar('\n');
        if (i > 0 && (opt.stack_kb || opt.user_stack || opt.detached) && !p->attr_ok)
            bad = 1;
    }
    fflush(stdout);
    /* The user stacks only when the threads were joined: a detached one may still be returning. */
    for (int i = 0; i < total && !opt.detached; i++)
        free(probes[i].stack_base);
    free(ok);
    free(threads);
    free(probes);
    return bad;
}
