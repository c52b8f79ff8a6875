/*
 * pinlab-calibrate: measure the machine's distances for `pinlab calibrate`.
 *
 *   pinlab-calibrate latency --pairs A:B,C:D,... [--budget-ms MS] [--batch K]
 *       Core-to-core latency. One thread is started per CPU named in the pairs and pinned there
 *       for the whole run (thread start-up and pinning are paid once, not once per pair); the
 *       pairs are then measured one at a time, the other threads asleep on a semaphore so they
 *       take no CPU time from the pair being measured. The two threads of a pair bounce one
 *       cache line: the first writes an odd sequence number and waits for the second to answer
 *       with the next even one (a round trip: two one-way transfers of the line). Samples of
 *       K round trips are timed until the pair's time budget is spent; the median one-way
 *       time of the samples (robust to a vCPU being descheduled for a sample) is reported.
 *       One JSON object per pair on standard output.
 *
 *   pinlab-calibrate memory --cpu C --node N --bytes B [--passes P] [--chase-ms MS]
 *       From a thread pinned on CPU C, memory on NUMA node N (bound there with mbind): read
 *       bandwidth (best of P passes of a sequential read of B bytes, B several times the last-level
 *       cache, so the reads come from memory) and latency (a random cyclic pointer chase over the
 *       same buffer, one cache line per step, so each load misses the caches and depends on the
 *       one before). One JSON object on standard output.
 *
 * Exit status 0, 2 for bad arguments or a CPU/node that cannot be used (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() do { } while (0)
#endif

#define LINE 64
#define STOP UINT64_MAX
#define MAX_SAMPLES 4096

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "pinlab-calibrate: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(2);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- latency -------------------------------------------------------------------------------- */

/* The line the two threads of a pair bounce, alone in its cache line. */
static struct { _Alignas(LINE) _Atomic uint64_t value; char pad[LINE - sizeof(uint64_t)]; } line;

enum role { IDLE, PING, PONG, QUIT };

struct worker {
    int cpu;
    pthread_t thread;
    sem_t go;           /* posted by main: a role was given */
    int pin_error;
    enum role role;
};

static sem_t done;      /* posted by a worker when its part of the pair is over */
static double budget_ns = 8e6;
static int batch = 50;  /* round trips per timed sample */
static double samples[MAX_SAMPLES];
static int sample_count;

static void ping(void) {
    uint64_t seq = 1;
    double deadline = now_ns() + budget_ns;
    /* Warm-up: a few round trips bring the line and both threads' code into a steady state. */
    for (int i = 0; i < batch; i++, seq += 2) {
        atomic_store_explicit(&line.value, seq, memory_order_release);
        while (atomic_load_explicit(&line.value, memory_order_acquire) != seq + 1) CPU_RELAX();
    }
    sample_count = 0;
    while (sample_count < MAX_SAMPLES) {
        double start = now_ns();
        for (int i = 0; i < batch; i++, seq += 2) {
            atomic_store_explicit(&line.value, seq, memory_order_release);
            while (atomic_load_explicit(&line.value, memory_order_acquire) != seq + 1) CPU_RELAX();
        }
        double end = now_ns();
        samples[sample_count++] = (end - start) / (2.0 * batch);
        if (end >= deadline && sample_count >= 3) break;  /* a median of at least 3 samples */
    }
    atomic_store_explicit(&line.value, STOP, memory_order_release);
}

static void pong(void) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t v;
        while ((v = atomic_load_explicit(&line.value, memory_order_acquire)) == seen || !(v & 1)) CPU_RELAX();
        if (v == STOP) return;
        seen = v + 1;
        atomic_store_explicit(&line.value, seen, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    w->pin_error = pin_to(w->cpu);
    sem_post(&done);
    if (w->pin_error) return NULL;
    for (;;) {
        sem_wait(&w->go);
        if (w->role == QUIT) return NULL;
        if (w->role == PING) ping();
        else pong();
        w->role = IDLE;
        sem_post(&done);
    }
}

static int parse_pairs(const char *text, int **out) {
    int cap = 64, n = 0;
    int *pairs = malloc(sizeof(int) * 2 * cap);
    const char *p = text;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || *end != ':') die("malformed --pairs %s: expected A:B,C:D,...", text);
        p = end + 1;
        long b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) die("malformed --pairs %s: expected A:B,C:D,...", text);
        if (a < 0 || b < 0 || a >= CPU_SETSIZE || b >= CPU_SETSIZE || a == b) die("bad pair in --pairs %s: two different CPU numbers", text);
        if (n == cap) pairs = realloc(pairs, sizeof(int) * 2 * (cap *= 2));
        pairs[2 * n] = (int)a;
        pairs[2 * n + 1] = (int)b;
        n++;
        p = *end ? end + 1 : end;
    }
    if (n == 0) die("empty --pairs %s", text);
    *out = pairs;
    return n;
}

static int latency(const char *pair_text) {
    int *pairs;
    int npairs = parse_pairs(pair_text, &pairs);
    /* One worker per distinct CPU, indexed by CPU number. */
    static struct worker *by_cpu[CPU_SETSIZE];
    struct worker *workers = calloc((size_t)npairs * 2, sizeof(*workers));
    int nworkers = 0;
    sem_init(&done, 0, 0);
    for (int i = 0; i < 2 * npairs; i++) {
        int cpu = pairs[i];
        if (by_cpu[cpu]) continue;
        struct worker *w = &workers[nworkers++];
        w->cpu = cpu;
        sem_init(&w->go, 0, 0);
        by_cpu[cpu] = w;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) die("cannot start a thread%s", "");
    }
    for (int i = 0; i < nworkers; i++) sem_wait(&done);
    for (int i = 0; i < nworkers; i++) {
        if (workers[i].pin_error) {
            char cpu[16];
            snprintf(cpu, sizeof cpu, "%d", workers[i].cpu);
            die("cannot run a thread on CPU %s (not allowed or offline)", cpu);
        }
    }
    for (int i = 0; i < npairs; i++) {
        struct worker *a = by_cpu[pairs[2 * i]], *b = by_cpu[pairs[2 * i + 1]];
        atomic_store(&line.value, 0);
        a->role = PING;
        b->role = PONG;
        sem_post(&b->go);
        sem_post(&a->go);
        sem_wait(&done);
        sem_wait(&done);
        qsort(samples, (size_t)sample_count, sizeof(double), compare_double);
        double median = sample_count % 2 ? samples[sample_count / 2]
                                         : 0.5 * (samples[sample_count / 2 - 1] + samples[sample_count / 2]);
        printf("{\"a\": %d, \"b\": %d, \"one_way_ns\": %.3f, \"min_ns\": %.3f, \"samples\": %d, \"round_trips\": %d}\n",
               a->cpu, b->cpu, median, samples[0], sample_count, sample_count * batch);
        fflush(stdout);
    }
    for (int i = 0; i < nworkers; i++) {
        workers[i].role = QUIT;
        sem_post(&workers[i].go);
        pthread_join(workers[i].thread, NULL);
    }
    free(workers);
    free(pairs);
    return 0;
}

/* ---- memory --------------------------------------------------------------------------------- */

#ifndef MPOL_BIND
#define MPOL_BIND 2
#endif
#ifndef MPOL_MF_STRICT
#define MPOL_MF_STRICT 1
#endif

/* Bind [addr, addr+len) to one NUMA node (mbind(2) called directly: no libnuma needed). */
static int bind_to_node(void *addr, size_t len, int node) {
    unsigned long mask[16] = {0};
    if (node < 0 || node >= (int)(sizeof(mask) * 8)) return EINVAL;
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_mbind, addr, len, MPOL_BIND, mask, sizeof(mask) * 8 + 1, MPOL_MF_STRICT) != 0) return errno;
    return 0;
}

/* A sequential read of the whole buffer; several accumulators so the loads are independent. */
static uint64_t read_all(const uint64_t *buf, size_t words) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= words; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
    }
    for (; i < words; i++) s0 += buf[i];
    return s0 + s1 + s2 + s3;
}

static int memory(int cpu, int node, size_t bytes, int passes, double chase_ms) {
    if (pin_to(cpu) != 0) {
        char text[16];
        snprintf(text, sizeof text, "%d", cpu);
        die("cannot run on CPU %s (not allowed or offline)", text);
    }
    size_t lines = bytes / LINE;
    bytes = lines * LINE;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) die("cannot map the buffer: %s", strerror(errno));
    int err = bind_to_node(buf, bytes, node);
    if (err) {
        char text[96];
        snprintf(text, sizeof text, "%d (%s)", node, strerror(err));
        die("cannot bind memory to NUMA node %s", text);
    }
    /* Huge pages where the kernel gives them: fewer TLB misses, so the chase times memory, not page walks. */
    madvise(buf, bytes, MADV_HUGEPAGE);
    /* The chase: a random cyclic permutation of the lines (Sattolo), each line holding the next
     * line's address in its first word. Writing it also touches (allocates) every page on the node. */
    size_t *order = malloc(lines * sizeof(size_t));
    if (!order) die("out of memory for %s", "the chase order");
    for (size_t i = 0; i < lines; i++) order[i] = i;
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)cpu ^ ((uint64_t)node << 32);
    for (size_t i = lines - 1; i > 0; i--) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        size_t j = (size_t)(rng % i);
        size_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (size_t i = 0; i < lines; i++) {
        size_t from = order[i], to = order[(i + 1) % lines];
        *(char **)(buf + from * LINE) = buf + to * LINE;
    }
    free(order);
    /* Bandwidth: best of the passes (the first one also warms the TLB and page tables). */
    volatile uint64_t sink = 0;
    double best = 1e300;
    for (int p = 0; p < passes; p++) {
        double start = now_ns();
        sink += read_all((const uint64_t *)buf, bytes / sizeof(uint64_t));
        double t = now_ns() - start;
        if (t < best) best = t;
    }
    /* Latency: chase pointers in blocks until the time is spent. */
    char *p = buf;
    for (size_t i = 0; i < 10000; i++) p = *(char **)p;   /* warm-up */
    size_t steps = 0;
    double start = now_ns(), deadline = start + chase_ms * 1e6, end;
    do {
        for (int i = 0; i < 100000; i++) p = *(char **)p;
        steps += 100000;
        end = now_ns();
    } while (end < deadline);
    sink += (uint64_t)(uintptr_t)p;
    (void)sink;
    printf("{\"cpu\": %d, \"node\": %d, \"bytes\": %zu, \"bandwidth_mbps\": %.1f, \"latency_ns\": %.2f, \"chase_steps\": %zu}\n",
           cpu, node, bytes, (double)bytes / best * 1e9 / 1e6, (end - start) / (double)steps, steps);
    munmap(buf, bytes);
    return 0;
}

/* ---- arguments ------------------------------------------------------------------------------ */

static double number(const char *text, const char *option, double lo, double hi) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || v < lo || v > hi) die("bad value for %s", option);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: pinlab-calibrate latency|memory OPTIONS%s", "");
    const char *pairs = NULL;
    int cpu = -1, node = -1, passes = 3;
    double bytes = 0, chase_ms = 200;
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i];
        if (i + 1 >= argc) die("option %s needs a value", opt);
        const char *val = argv[++i];
        if (!strcmp(opt, "--pairs")) pairs = val;
        else if (!strcmp(opt, "--budget-ms")) budget_ns = number(val, opt, 0.01, 60000) * 1e6;
        else if (!strcmp(opt, "--batch")) batch = (int)number(val, opt, 1, 1e6);
        else if (!strcmp(opt, "--cpu")) cpu = (int)number(val, opt, 0, CPU_SETSIZE - 1);
        else if (!strcmp(opt, "--node")) node = (int)number(val, opt, 0, 1023);
        else if (!strcmp(opt, "--bytes")) bytes = number(val, opt, 1 << 20, 1e12);
        else if (!strcmp(opt, "--passes")) passes = (int)number(val, opt, 1, 1000);
        else if (!strcmp(opt, "--chase-ms")) chase_ms = number(val, opt, 1, 60000);
        else die("unknown option %s", opt);
    }
    if (!strcmp(argv[1], "latency")) {
        if (!pairs) die("latency needs --pairs A:B,...%s", "");
        return latency(pairs);
    }
    if (!strcmp(argv[1], "memory")) {
        if (cpu < 0 || node < 0 || bytes <= 0) die("memory needs --cpu, --node and --bytes%s", "");
        return memory(cpu, node, (size_t)bytes, passes, chase_ms);
    }
    die("unknown mode %s: latency or memory", argv[1]);
    return 2;
}
