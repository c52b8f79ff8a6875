/*
 * libpinlab-preload.so: pins every thread of a program from its first instruction.
 *
 * Loaded with LD_PRELOAD by `pinlab run`. It interposes pthread_create: each new thread
 * gets a copy of the caller's attributes with pthread_attr_setaffinity_np set to the CPU
 * the plan gives it, so the kernel applies the affinity before the thread runs any code.
 * The start routine is wrapped in a trampoline that logs an event, binds the thread's
 * memory to the node of its CPU (PINLAB_MEM_FOLLOW) and then calls the real routine.
 *
 * Per thread it costs next to nothing beyond what a program pinning its own threads the same way
 * pays (glibc's hand-over: clone, sched_setaffinity on the new thread, then its start): no
 * malloc or free (the trampoline's record comes from a fixed pool), no stdio, no loader lookup
 * after the first thread of each start routine, and one system call on the new thread
 * (sched_getaffinity for the event; its time comes from the vDSO) besides the event's copy into
 * a shared ring.
 *
 * Environment (written by pinlab.launch.runner):
 *   PINLAB_CPUS         required, "c0,c1,...": slot 0 = main thread, slot k = k-th worker
 *   PINLAB_OBSERVE      set: no plan; pin nothing, only record threads and affinity calls (the
 *                       other variables but PINLAB_EVENTS are then ignored)
 *   PINLAB_OVERFLOW     wrap (default) | unpinned | error: workers past the end of the plan
 *   PINLAB_SKIP         "i,j,...": creation indexes (1-based, all pthread_create calls) = helpers
 *   PINLAB_HELPER_CPUS  CPU list ("0-3,8") for helpers; else PINLAB_ALLOWED; else the mask
 *                       the library found at start
 *   PINLAB_ALLOWED      CPU list: the program's original allowed set
 *   PINLAB_NESTED       off (default) | inherit, with PINLAB_DOMAINS "0-3;4-7": a thread created
 *                       by a thread other than a process's main thread, or by the main thread
 *                       inside an OpenMP parallel region once the plan's slots are all taken
 *                       (the plan is the outer team's), takes no slot and goes round-robin over
 *                       its creator's domain
 *   PINLAB_MEM_FOLLOW   "n0,n1,...": NUMA node of each plan CPU (aligned with PINLAB_CPUS)
 *   PINLAB_EVENTS       file the events go to: an event ring prepared by pinlab run (a header
 *                       page, then lines appended through a shared mapping, no system call
 *                       per event), or any other file, appended to with one write() per line
 *   PINLAB_LIVE_PLAN    file holding the plan as it is now (autopin re-pins the program while it
 *                       runs): threads created later take their slot's CPU from it, not from
 *                       PINLAB_CPUS (see struct live_plan); same length as PINLAB_CPUS
 *   PINLAB_CHILDREN     next (default) | inherit | unpinned: what a process the program starts
 *                       gets (its main thread takes the plan's next slot, as a thread would;
 *                       keeps the mask it inherited; gets PINLAB_ALLOWED, threads unpinned too)
 *
 * Slots are the program's, not one process's: with an event ring, the ring's header page holds
 * the count of slots handed out and which process holds which slot, shared by every process of
 * the program (fork, vfork, posix_spawn, exec), so threads and processes take the plan's CPUs
 * in the order they appear. A process that ends gives its slot back (release_slot at exit,
 * reclaim_dead for one that left with _exit), and the lowest slot given back is taken before a
 * new one (reuse_slot). The first process's main thread starts on the union of the plan's
 * CPUs, so that runtimes sizing their pools from sched_getaffinity (OpenBLAS, libgomp without
 * OMP_NUM_THREADS, Rust, Go, Java, TBB) see the plan's CPUs, and is narrowed to its own CPU
 * (slot 0) when it creates its first thread, before that thread exists.
 *
 * Events (key=value words, first word the type; values never contain spaces):
 *   thread pid= index= tid= role=main|worker|helper|nested slot= planned= cpu= mask= creator= t= lib= [wide=]
 *                                   (t: CLOCK_MONOTONIC in ns at the thread's first instruction, so
 *                                   pinlab can tell the samples taken after it from those before;
 *                                   wide= on a main thread started on the plan's CPUs: that set)
 *   narrow pid= tid= cpu= ns=       (the main thread narrowed to its CPU; CLOCK_MONOTONIC ns)
 *   pages pid= N0= N1= ...          (at exit, from /proc/self/numa_maps)
 *   exit pid= threads=              (at exit, threads successfully created)
 *   warning pid= text=              (spaces replaced by _)
 *   affinity pid= tid= target= call= result= applied= t= old= new= lib=
 *                                   (a call of the program's that set a mask, see "the program's
 *                                   affinity calls" below: call= sched_setaffinity |
 *                                   pthread_setaffinity_np | pthread_attr_setaffinity_np; tid= the
 *                                   caller, target= the thread (0: unknown); result= 0 or errno;
 *                                   applied= 0|1; t= CLOCK_MONOTONIC ns at the call; old=, new=
 *                                   CPU lists, "-" when unknown, empty for an empty mask; lib= the
 *                                   calling object's path, last: a long one is cut)
 *
 * The program's own calls to sched_setaffinity and pthread_setaffinity_np are interposed too:
 * forwarded unchanged, each recorded as an `affinity` event (pinlab's own pinning calls the C
 * library's functions directly and is never among them).
 *
 * Whatever goes wrong, the program runs: a malformed environment gives one line on stderr and
 * a plain pass-through pthread_create; a thread that cannot be pinned is created unpinned.
 */
#define _GNU_SOURCE
#include "cpulist.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define PINLAB_MAX_DOMAINS 1024
#define PINLAB_MAX_NODES 1024 /* node numbers accepted in PINLAB_MEM_FOLLOW */
#define PINLAB_MPOL_BIND 2    /* MPOL_BIND from <linux/mempolicy.h> */
#define EVENT_LINE_MAX 16384 /* the exit-time pages line, on the main thread's stack */
#define THREAD_LINE_MAX 768   /* thread lines, written on the new thread's own stack */

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*getstackaddr_fn)(const pthread_attr_t *, void **);
typedef int (*setstackaddr_fn)(pthread_attr_t *, void *);
typedef int (*setaffinity_fn)(pid_t, size_t, const cpu_set_t *);
typedef int (*thread_setaffinity_fn)(pthread_t, size_t, const cpu_set_t *);

enum overflow_mode { OVERFLOW_WRAP, OVERFLOW_UNPINNED, OVERFLOW_ERROR };
enum children_mode { CHILDREN_NEXT, CHILDREN_INHERIT, CHILDREN_UNPINNED };
enum role { ROLE_WORKER, ROLE_HELPER, ROLE_NESTED };
static const char *const role_names[] = { "worker", "helper", "nested" };

struct domain {
    int *cpus; /* in the order written in PINLAB_DOMAINS */
    int count;
    atomic_uint next;
};

/* Configuration: written once by pinlab_init (under pthread_once), read-only afterwards. */
static struct {
    int enabled;
    int observe; /* PINLAB_OBSERVE: record threads and affinity calls, pin nothing (pinlab doctor) */
    int *cpus;   /* the plan, slot k -> cpus[k] */
    int ncpus;
    enum overflow_mode overflow;
    enum children_mode children;
    long *skip;
    int nskip;
    cpu_set_t helper_mask;
    int helper_mask_ok;
    int nested_inherit;
    struct domain *domains;
    int ndomains;
    int *node_of_cpu; /* CPU_SETSIZE entries, -1 = unknown; NULL without PINLAB_MEM_FOLLOW */
    char events[PATH_MAX];
    int has_events;
    char exe[PATH_MAX];
} cfg;

static create_fn real_create;
/* The C library's functions that change a mask (the program's calls are forwarded to them), looked
 * up once: see the affinity section below. */
static setaffinity_fn real_sched_setaffinity;
static thread_setaffinity_fn real_pthread_setaffinity;
/* The deprecated pthread_attr_{get,set}stackaddr, looked up at run time: calling them directly
 * makes the linker print glibc's deprecation warning, which no pragma silences. */
static getstackaddr_fn get_stackaddr;
static setstackaddr_fn set_stackaddr;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_long creations;     /* all pthread_create calls, the creation index */
static atomic_long next_slot = 1; /* the next worker slot (slot 0 is the main thread), without a ring */
static atomic_int main_wide;      /* the main thread still runs on the plan's CPUs (narrowed at its first create) */
static atomic_long created;       /* threads really created */
/* This process was started by the program under PINLAB_CHILDREN=unpinned: its threads take no
 * slot and run on the allowed CPUs, as its main thread does. */
static int process_unpinned;

/* The plan CPU of the calling thread, -1 if it has none (helpers, unpinned threads). */
static __thread int my_planned __attribute__((tls_model("initial-exec"))) = -1;

/* What the wrapper hands the new thread: written by the creator before the thread exists, read
 * by the trampoline first thing. Records come from a fixed pool (no malloc in the creator and,
 * above all, no free on the new thread: a thread's first free sets up its malloc cache and takes
 * an arena, and its exit gives the memory back to the creator's arena under that arena's lock,
 * so every thread paid for malloc though the program's threads may never use it). One cache line
 * each, so that creators and new threads on other CPUs do not share lines. */
struct start {
    void *(*fn)(void *);
    void *arg;
    long index;
    long slot;    /* -1 if none */
    const char *lib; /* dli_fname of the start routine (owned by the loader) or NULL */
    enum role role;
    int planned;  /* -1 if none */
    int node;     /* memory node to bind to, -1 to leave the policy alone */
    pid_t creator;
    atomic_int busy; /* pool records: 1 from the creator's claim until the new thread has read it */
} __attribute__((aligned(64)));

#ifndef START_POOL
#define START_POOL 256 /* threads created and not yet started; beyond, records are malloc'd */
#endif
static struct start start_pool[START_POOL];
static atomic_uint start_hint;
static pthread_mutex_t routines_lock = PTHREAD_MUTEX_INITIALIZER; /* the routine table, below */

/* ---------------------------------------------------------------- output */

static void put_str(char *buf, size_t size, size_t *used, const char *s)
{
    while (*s && *used + 1 < size)
        buf[(*used)++] = *s++;
    buf[*used] = '\0';
}

/* n bytes of s (a literal: PUT_LIT), cut at the end of the buffer. */
static void put_mem(char *buf, size_t size, size_t *used, const char *s, size_t n)
{
    if (*used + 1 >= size)
        return;
    if (n > size - 1 - *used)
        n = size - 1 - *used;
    memcpy(buf + *used, s, n);
    *used += n;
    buf[*used] = '\0';
}
#define PUT_LIT(buf, size, used, lit) put_mem(buf, size, used, lit, sizeof lit - 1)

static void put_fmt(char *buf, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put_fmt(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, size - *used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    *used += (size_t)n < size - *used ? (size_t)n : size - *used - 1;
}

/* A value without whitespace: spaces (and other blanks) become '_', an empty value '-'. */
static void put_word(char *buf, size_t size, size_t *used, const char *s)
{
    if (!s || !*s) {
        put_str(buf, size, used, "-");
        return;
    }
    for (; *s && *used + 1 < size; s++)
        buf[(*used)++] = (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') ? '_' : *s;
    buf[*used] = '\0';
}

/* A decimal number, without stdio (the thread event is written on every new thread). */
static void put_long(char *buf, size_t size, size_t *used, long v)
{
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        digits[n++] = '-';
    while (n > 0 && *used + 1 < size)
        buf[(*used)++] = digits[--n];
    buf[*used] = '\0';
}

/* One " name=value" field of an event line, the value a number (lit: " name=", a literal). */
#define PUT_FIELD(buf, size, used, lit, v) \
    do {                                    \
        PUT_LIT(buf, size, used, lit);      \
        put_long(buf, size, used, v);       \
    } while (0)

/* The first CPU at or after `from` that is in the set (want = 1) or not (want = 0); CPU_SETSIZE
 * if none. A word at a time: the set has CPU_SETSIZE (1024) bits, most of them 0. */
static int next_cpu(const cpu_set_t *set, int from, int want)
{
    enum { BITS = 8 * sizeof(__cpu_mask) };
    while (from < CPU_SETSIZE) {
        __cpu_mask word = set->__bits[from / BITS];
        if (!want)
            word = ~word;
        word &= ~(__cpu_mask)0 << (from % BITS);
        if (word)
            return from / BITS * BITS + __builtin_ctzl(word);
        from = (from / BITS + 1) * BITS;
    }
    return CPU_SETSIZE;
}

static void put_cpulist(char *buf, size_t size, size_t *used, const cpu_set_t *set)
{
    int any = 0;
    for (int cpu = next_cpu(set, 0, 1); cpu < CPU_SETSIZE; cpu = next_cpu(set, cpu, 1)) {
        int end = next_cpu(set, cpu, 0); /* one past the last CPU of this range */
        if (any)
            put_str(buf, size, used, ",");
        put_long(buf, size, used, cpu);
        if (end - 1 > cpu) {
            put_str(buf, size, used, "-");
            put_long(buf, size, used, end - 1);
        }
        any = 1;
        cpu = end;
    }
    if (!any)
        put_str(buf, size, used, "-");
}

/* The events file stays open on a high descriptor (close-on-exec). Before each line its identity
 * is checked with fstat, so a program that closed the descriptor or put another file on that
 * number cannot make us write elsewhere: we reopen instead. Opening the file for every line
 * cost a path lookup per thread (about 4 us); fstat is one cheap system call. */
#define EVENTS_FD_MIN 900
static int events_fd = -1;
static dev_t events_dev;
static ino_t events_ino;
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;

/* This process's pid and each thread's tid, asked of the kernel once (reset after fork). */
static pid_t cached_pid;
static __thread pid_t cached_tid __attribute__((tls_model("initial-exec")));
static int tid_from_clock; /* set by pinlab_init once checked against gettid on the main thread */

/* A thread's tid without a system call: the C library keeps it (the kernel writes it at clone,
 * CLONE_PARENT_SETTID, before the thread runs), and pthread_getcpuclockid encodes it in the
 * thread's CPU-time clock id, as the kernel defines those ids (MAKE_THREAD_CPUCLOCK:
 * ~tid << 3 | flags). A gettid() costs 0.3-0.5 us on a new thread here. It is also the only way
 * from a pthread_t to a tid before glibc 2.42 (pthread_gettid_np). 0 if it cannot. */
static pid_t clock_tid_of(pthread_t thread)
{
    clockid_t clock;
    if (pthread_getcpuclockid(thread, &clock) != 0 || clock >= 0)
        return 0;
    long tid = ~((long)clock >> 3);
    return tid > 0 && tid <= INT_MAX ? (pid_t)tid : 0;
}

static pid_t clock_tid(void)
{
    return clock_tid_of(pthread_self());
}

static pid_t my_pid(void)
{
    if (!cached_pid)
        cached_pid = getpid();
    return cached_pid;
}

static pid_t my_tid(void)
{
    if (!cached_tid) {
        pid_t tid = tid_from_clock ? clock_tid() : 0;
        cached_tid = tid > 0 ? tid : gettid();
    }
    return cached_tid;
}

static int events_fd_is_ours(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == events_dev && st.st_ino == events_ino;
}

static void events_reopen(void)
{
    if (events_fd >= 0 && !events_fd_is_ours(events_fd))
        events_fd = -1; /* not ours any more: leave that descriptor alone */
    else if (events_fd >= 0)
        return;
    /* Never created here: pinlab made the file, and a program outliving pinlab (which removed
     * it) must not leave a new one behind. */
    int fd = open(cfg.events, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, EVENTS_FD_MIN);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    events_dev = st.st_dev;
    events_ino = st.st_ino;
    events_fd = fd;
}

/* The fast path: an event ring prepared by pinlab run. The file starts with this header (one
 * page); lines are appended after it by reserving space with one atomic add on `used`, then
 * copying the line: no system call per event, no lock, shared by every process of the program
 * (MAP_SHARED survives fork; after exec the new image maps the file again). A reader stops at
 * `used` and skips any stretch a killed process reserved but never filled (zero bytes). */
#define RING_MAGIC 0x314542414c4e4950ULL /* the bytes "PINLABE1" read as a little-endian uint64 */
#define RING_HEADER 4096
#define PROCESS_TABLE 500
struct ring_header {
    uint64_t magic;
    uint64_t capacity; /* bytes of line data after the header */
    _Atomic uint64_t used;
    _Atomic uint64_t dropped; /* lines that did not fit */
    /* Shared by all the program's processes (zero as pinlab run makes the file): */
    _Atomic uint64_t slots_taken; /* slots handed out after slot 0 */
    _Atomic int32_t first_pid;    /* the process holding slot 0 (the one pinlab started) */
    _Atomic int32_t released;     /* entries of the table holding the slot of a process that ended */
    struct {
        _Atomic int32_t pid; /* 0 = free; SLOT_RELEASED: the slot of a process that ended, for the next taker */
        _Atomic int32_t slot; /* its main thread's slot, -1 if none */
    } processes[PROCESS_TABLE];
};
#define SLOT_RELEASED (-1)
_Static_assert(sizeof(struct ring_header) <= 4096, "the ring header is one page");
static struct ring_header *ring;

/* The plan as autopin changes it while the program runs (PINLAB_LIVE_PLAN): a small shared file
 * pinlab writes (the CPUs, then a new generation) and the program only reads. A thread created
 * while pinlab rewrites it may get the old plan's CPU: pinlab re-pins every worker it finds after
 * each change, so that window closes at its next look. */
#define LIVE_PLAN_MAGIC 0x315042414c4e4950ULL /* the bytes "PINLABP1" */
struct live_plan {
    uint64_t magic;
    _Atomic uint64_t generation;
    uint32_t ncpus;
    uint32_t unused;
    _Atomic int32_t cpus[]; /* ncpus entries */
};
static struct live_plan *live_plan;

static void live_plan_open(void)
{
    const char *path = getenv("PINLAB_LIVE_PLAN");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct live_plan)) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            struct live_plan *p = map;
            if (p->magic == LIVE_PLAN_MAGIC && p->ncpus == (uint32_t)cfg.ncpus &&
                sizeof(struct live_plan) + (size_t)p->ncpus * sizeof(int32_t) <= (size_t)st.st_size)
                live_plan = p;
            else
                munmap(map, (size_t)st.st_size);
        }
    }
    close(fd);
}

/* Slot k's CPU in the plan as it is now. */
static int plan_cpu(long k)
{
    if (live_plan)
        return atomic_load_explicit(&live_plan->cpus[k], memory_order_relaxed);
    return cfg.cpus[k];
}

static void ring_open(void)
{
    int fd = open(cfg.events, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > RING_HEADER) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            struct ring_header *h = map;
            if (h->magic == RING_MAGIC && h->capacity + RING_HEADER <= (uint64_t)st.st_size)
                ring = h;
            else
                munmap(map, (size_t)st.st_size);
        }
    }
    close(fd); /* the mapping stays valid without the descriptor */
}

static int ring_append(const char *line, size_t len)
{
    if (!ring)
        return 0;
    uint64_t at = atomic_fetch_add(&ring->used, len);
    if (at + len > ring->capacity) {
        atomic_fetch_add(&ring->dropped, 1);
        return 1;
    }
    memcpy((char *)ring + RING_HEADER + at, line, len);
    return 1;
}

/* A slot a process that ended gave back (see release_slot), claimed for `taker` (a pid: the entry
 * becomes that process's; 0: a thread's, the entry is freed); -1 if there is none. The lowest such
 * slot, so that a wrapper script's short commands, each ending before the next starts, leave the
 * slots after theirs to the program it starts. */
static long reuse_slot(int32_t taker)
{
    while (ring && atomic_load_explicit(&ring->released, memory_order_acquire) > 0) {
        int best = -1;
        int32_t best_slot = INT32_MAX;
        for (int i = 0; i < PROCESS_TABLE; i++)
            if (atomic_load(&ring->processes[i].pid) == SLOT_RELEASED) {
                int32_t slot = atomic_load(&ring->processes[i].slot);
                if (slot < best_slot) {
                    best = i;
                    best_slot = slot;
                }
            }
        if (best < 0)
            return -1;
        int32_t expected = SLOT_RELEASED;
        if (atomic_compare_exchange_strong(&ring->processes[best].pid, &expected, taker)) {
            atomic_fetch_sub(&ring->released, 1);
            return best_slot;
        } /* another taker won it: look again */
    }
    return -1;
}

/* The next slot of the plan: shared by all the program's processes when there is a ring (the
 * first process's main thread holds slot 0; a slot given back by a process that ended comes
 * first), else this process's own count. */
static long take_slot(void)
{
    if (ring) {
        long slot = reuse_slot(0);
        return slot >= 0 ? slot : 1 + (long)atomic_fetch_add(&ring->slots_taken, 1);
    }
    return atomic_fetch_add(&next_slot, 1);
}

/* Whether every worker slot of the plan (1 .. ncpus-1) is handed out and none was given back.
 * Under PINLAB_NESTED=inherit the plan is the outer team's: a thread the main thread creates
 * after that inside an OpenMP parallel region belongs to an inner team of its own (OpenMP creates
 * inner teams anew at each parallel region, the main thread's as well as the other masters'), so
 * it stays in the main thread's domain rather than wrapping round the plan onto other masters'
 * CPUs. */
static int plan_taken(void)
{
    if (ring)
        return atomic_load(&ring->released) == 0 && 1 + (long)atomic_load(&ring->slots_taken) >= cfg.ncpus;
    return atomic_load(&next_slot) >= cfg.ncpus;
}

/* The slot a process took (its entry in the ring's table), or -2 if it has none yet. */
static long process_slot(pid_t pid)
{
    for (int i = 0; ring && i < PROCESS_TABLE; i++)
        if (atomic_load(&ring->processes[i].pid) == pid)
            return atomic_load(&ring->processes[i].slot);
    return -2;
}

/* A process that ends (not one that execs: destructors do not run then) gives its slot back, so
 * that the next process or thread of the program takes it rather than the plan's next CPU. */
static void release_slot(pid_t pid)
{
    for (int i = 0; ring && i < PROCESS_TABLE; i++) {
        int32_t mine = (int32_t)pid;
        if (atomic_load(&ring->processes[i].pid) == mine) {
            if (atomic_load(&ring->processes[i].slot) < 0) {
                atomic_store(&ring->processes[i].pid, 0); /* no slot to give back */
                return;
            }
            if (atomic_compare_exchange_strong(&ring->processes[i].pid, &mine, SLOT_RELEASED))
                atomic_fetch_add_explicit(&ring->released, 1, memory_order_release);
            return;
        }
    }
}

/* Give back the slots of processes that ended without saying so (_exit, as shells end their
 * subshells, or a signal): checked as a process starts, when its parent has usually reaped the
 * one before (a shell waits for each command substitution). A zombie not yet reaped still counts
 * as alive. One kill(pid, 0) per process in the table, on process creation only. */
static void reclaim_dead(void)
{
    int32_t first = ring ? atomic_load(&ring->first_pid) : 0;
    for (int i = 0; ring && i < PROCESS_TABLE; i++) {
        int32_t pid = atomic_load(&ring->processes[i].pid);
        if (pid <= 0 || pid == first || atomic_load(&ring->processes[i].slot) < 0)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        if (atomic_compare_exchange_strong(&ring->processes[i].pid, &pid, SLOT_RELEASED))
            atomic_fetch_add_explicit(&ring->released, 1, memory_order_release);
    }
}

/* Remember a process's slot, so that the program it execs keeps it; a full table forgets. */
static void register_process(pid_t pid, long slot)
{
    for (int i = 0; ring && i < PROCESS_TABLE; i++) {
        int32_t free_entry = 0;
        if (atomic_compare_exchange_strong(&ring->processes[i].pid, &free_entry, (int32_t)pid)) {
            atomic_store(&ring->processes[i].slot, (int32_t)slot);
            return;
        }
    }
}

/* Append one line: to the ring when there is one, else with O_APPEND and a single write() so
 * lines from threads and processes never mix. */
static void emit_line(char *buf, size_t size, size_t used)
{
    if (!cfg.has_events)
        return;
    if (used + 1 >= size)
        used = size - 2;
    buf[used++] = '\n';
    if (ring_append(buf, used))
        return;
    int saved = errno;
    pthread_mutex_lock(&events_lock);
    if (!events_fd_is_ours(events_fd))
        events_reopen();
    if (events_fd >= 0) {
        ssize_t w = write(events_fd, buf, used);
        (void)w;
    }
    pthread_mutex_unlock(&events_lock);
    errno = saved;
}

static void warn_event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_event(const char *fmt, ...)
{
    if (!cfg.has_events)
        return;
    char text[256]; /* small: this may run on a new thread's (possibly tiny) stack */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char line[400];
    size_t used = 0;
    put_fmt(line, sizeof line, &used, "warning pid=%d text=", (int)my_pid());
    put_word(line, sizeof line, &used, text);
    emit_line(line, sizeof line, used);
}

/* The event of a thread, written by the thread itself first thing (the main thread from the
 * constructor, the others from the trampoline): its CPU and mask as the kernel gives them at its
 * first instruction, and the time it was there. One system call (sched_getaffinity); the time
 * from the vDSO (clock_gettime), the CPU from the rseq area (sched_getcpu), the tid from the C
 * library (my_tid); no stdio: the line is built by hand and copied into the ring. */
static void thread_event(long index, pid_t tid, const char *role, long slot, int planned,
                         pid_t creator, const char *lib, const cpu_set_t *wide)
{
    if (!cfg.has_events)
        return;
    /* Runs first thing on the new thread, whose stack may be as small as PTHREAD_STACK_MIN
     * (16 KiB): keep the line small; a very long mask is cut (put_* functions are bounded). */
    char line[THREAD_LINE_MAX];
    size_t used = 0;
    /* First: the affinity was applied before this thread ran, so whatever is read of it from
     * /proc at this time or later is the thread's own, not its creator's. */
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
        now.tv_sec = now.tv_nsec = 0;
    int cpu = sched_getcpu();
    cpu_set_t mask;
    CPU_ZERO(&mask);
    int mask_ok = sched_getaffinity(0, sizeof mask, &mask) == 0;
    PUT_FIELD(line, sizeof line, &used, "thread pid=", my_pid());
    PUT_FIELD(line, sizeof line, &used, " index=", index);
    PUT_FIELD(line, sizeof line, &used, " tid=", tid);
    PUT_LIT(line, sizeof line, &used, " role=");
    put_str(line, sizeof line, &used, role);
    PUT_FIELD(line, sizeof line, &used, " slot=", slot);
    PUT_FIELD(line, sizeof line, &used, " planned=", planned);
    PUT_FIELD(line, sizeof line, &used, " cpu=", cpu);
    PUT_LIT(line, sizeof line, &used, " mask=");
    if (mask_ok)
        put_cpulist(line, sizeof line, &used, &mask);
    else
        PUT_LIT(line, sizeof line, &used, "-");
    PUT_FIELD(line, sizeof line, &used, " creator=", creator);
    if (now.tv_sec > 0) { /* before lib=, whose path may be cut at the end of the line */
        PUT_LIT(line, sizeof line, &used, " t=");
        put_long(line, sizeof line, &used, (long)now.tv_sec * 1000000000L + now.tv_nsec);
    }
    PUT_LIT(line, sizeof line, &used, " lib=");
    put_word(line, sizeof line, &used, lib);
    if (wide) {
        PUT_LIT(line, sizeof line, &used, " wide=");
        put_cpulist(line, sizeof line, &used, wide);
    }
    emit_line(line, sizeof line, used);
}

/* ---------------------------------------------------------------- parsing */

/* A non-negative decimal number; advances *p. */
static int parse_number(const char **p, long max, long *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > max)
            return -1;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

/* "a,b,c": numbers only, each in [min, max]. Returns the count, or -1. */
static int parse_numbers(const char *s, long min, long max, long **out)
{
    int n = 1;
    for (const char *c = s; *c; c++)
        n += *c == ',';
    long *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return -1;
    const char *p = s;
    for (int i = 0; i < n; i++) {
        if (parse_number(&p, max, &v[i]) || v[i] < min || (*p != (i + 1 < n ? ',' : '\0'))) {
            free(v);
            return -1;
        }
        p++;
    }
    *out = v;
    return n;
}

/* Where the items of a CPU list go: the set, and (if order) the CPUs in written order. */
struct cpulist_into {
    cpu_set_t *set;
    int *order;
    int order_max;
    int n;
};

static int cpulist_item(long first, long last, void *arg)
{
    struct cpulist_into *into = arg;
    for (long c = first; c <= last; c++) {
        if (into->order && !CPU_ISSET(c, into->set)) {
            if (into->n >= into->order_max)
                return -1;
            into->order[into->n++] = (int)c;
        }
        CPU_SET(c, into->set);
    }
    return 0;
}

/* A CPU list "0-3,8" between s and end, into set and (if order) the CPUs in written order.
 * Returns the number of CPUs written in order (without order: in the set), or -1. */
static int parse_cpulist(const char *s, const char *end, cpu_set_t *set, int *order, int order_max)
{
    CPU_ZERO(set);
    struct cpulist_into into = { set, order, order_max, 0 };
    if (pinlab_cpulist_items(s, end, CPU_SETSIZE - 1, cpulist_item, &into))
        return -1;
    return order ? into.n : CPU_COUNT(set);
}

static const char *env_or_null(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Reads the environment into cfg. Returns NULL when all is well, else what is wrong. */
/* Which of ``words`` the variable ``name`` holds (0, the default, when it is unset); -1 with the
 * reason in ``why`` when it holds none of them. The enums list their values in the same order. */
static int word_index(const char *name, const char *const words[], int n, char *why, size_t why_size)
{
    const char *v = env_or_null(name);
    if (!v)
        return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, words[i]))
            return i;
    size_t used = 0;
    why[0] = '\0';
    put_fmt(why, why_size, &used, "%s=%s is not ", name, v);
    for (int i = 0; i < n; i++)
        put_fmt(why, why_size, &used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", words[i]);
    return -1;
}

static const char *read_config(char *why, size_t why_size)
{
    if (env_or_null("PINLAB_OBSERVE")) {
        /* No plan: every thread keeps the mask it would have had, and is only recorded. */
        cfg.observe = 1;
        cfg.overflow = OVERFLOW_UNPINNED;
        cfg.children = CHILDREN_INHERIT;
        return NULL;
    }
    const char *v = getenv("PINLAB_CPUS");
    long *nums = NULL;
    if (!v)
        return "PINLAB_CPUS is not set";
    int n = parse_numbers(v, 0, CPU_SETSIZE - 1, &nums);
    if (n <= 0) {
        snprintf(why, why_size, "PINLAB_CPUS=%s is not a comma list of CPU numbers (0-%d)", v, CPU_SETSIZE - 1);
        return why;
    }
    cfg.cpus = calloc((size_t)n, sizeof *cfg.cpus);
    if (!cfg.cpus)
        return "out of memory";
    for (int i = 0; i < n; i++)
        cfg.cpus[i] = (int)nums[i];
    cfg.ncpus = n;
    free(nums);

    static const char *const overflow_words[] = { "wrap", "unpinned", "error" };
    int word = word_index("PINLAB_OVERFLOW", overflow_words, 3, why, why_size);
    if (word < 0)
        return why;
    cfg.overflow = (enum overflow_mode)word;
    static const char *const children_words[] = { "next", "inherit", "unpinned" };
    if ((word = word_index("PINLAB_CHILDREN", children_words, 3, why, why_size)) < 0)
        return why;
    cfg.children = (enum children_mode)word;

    v = env_or_null("PINLAB_SKIP");
    if (v) {
        int k = parse_numbers(v, 1, LONG_MAX / 16, &cfg.skip);
        if (k <= 0) {
            snprintf(why, why_size, "PINLAB_SKIP=%s is not a comma list of creation indexes (1, 2, ...)", v);
            return why;
        }
        cfg.nskip = k;
    }

    /* Helpers' mask: PINLAB_HELPER_CPUS, else PINLAB_ALLOWED, else the mask found at start. */
    const char *names[] = { "PINLAB_HELPER_CPUS", "PINLAB_ALLOWED" };
    for (int i = 0; i < 2 && !cfg.helper_mask_ok; i++) {
        v = env_or_null(names[i]);
        if (!v)
            continue;
        if (parse_cpulist(v, v + strlen(v), &cfg.helper_mask, NULL, 0) <= 0) {
            snprintf(why, why_size, "%s=%s is not a CPU list such as 0-3,8", names[i], v);
            return why;
        }
        cfg.helper_mask_ok = 1;
    }
    if (!cfg.helper_mask_ok)
        cfg.helper_mask_ok = sched_getaffinity(0, sizeof cfg.helper_mask, &cfg.helper_mask) == 0;

    v = env_or_null("PINLAB_NESTED");
    if (!v || !strcmp(v, "off"))
        cfg.nested_inherit = 0;
    else if (!strcmp(v, "inherit"))
        cfg.nested_inherit = 1;
    else {
        snprintf(why, why_size, "PINLAB_NESTED=%s is not off or inherit", v);
        return why;
    }
    v = env_or_null("PINLAB_DOMAINS");
    if (v) {
        int nd = 1;
        for (const char *c = v; *c; c++)
            nd += *c == ';';
        if (nd > PINLAB_MAX_DOMAINS) {
            snprintf(why, why_size, "PINLAB_DOMAINS has more than %d domains", PINLAB_MAX_DOMAINS);
            return why;
        }
        cfg.domains = calloc((size_t)nd, sizeof *cfg.domains);
        if (!cfg.domains)
            return "out of memory";
        const char *p = v;
        for (int d = 0; d < nd; d++) {
            const char *end = strchr(p, ';');
            if (!end)
                end = p + strlen(p);
            cpu_set_t set;
            int *order = calloc(CPU_SETSIZE, sizeof *order);
            if (!order)
                return "out of memory";
            int count = parse_cpulist(p, end, &set, order, CPU_SETSIZE);
            if (count <= 0) {
                free(order);
                snprintf(why, why_size, "PINLAB_DOMAINS=%s is not ;-separated CPU lists such as 0-3;4-7", v);
                return why;
            }
            cfg.domains[d].cpus = order;
            cfg.domains[d].count = count;
            atomic_init(&cfg.domains[d].next, 0);
            p = *end ? end + 1 : end;
        }
        cfg.ndomains = nd;
    }

    v = env_or_null("PINLAB_MEM_FOLLOW");
    if (v) {
        long *nodes = NULL;
        int k = parse_numbers(v, 0, PINLAB_MAX_NODES - 1, &nodes);
        if (k <= 0) {
            snprintf(why, why_size, "PINLAB_MEM_FOLLOW=%s is not a comma list of NUMA node numbers", v);
            return why;
        }
        if (k != cfg.ncpus) {
            free(nodes);
            snprintf(why, why_size, "PINLAB_MEM_FOLLOW has %d nodes but PINLAB_CPUS has %d CPUs", k, cfg.ncpus);
            return why;
        }
        cfg.node_of_cpu = malloc(CPU_SETSIZE * sizeof *cfg.node_of_cpu);
        if (!cfg.node_of_cpu) {
            free(nodes);
            return "out of memory";
        }
        for (int c = 0; c < CPU_SETSIZE; c++)
            cfg.node_of_cpu[c] = -1;
        for (int i = 0; i < k; i++) {
            int c = cfg.cpus[i];
            if (cfg.node_of_cpu[c] >= 0 && cfg.node_of_cpu[c] != nodes[i]) {
                snprintf(why, why_size, "PINLAB_MEM_FOLLOW gives CPU %d two nodes (%d and %ld)", c, cfg.node_of_cpu[c], nodes[i]);
                free(nodes);
                return why;
            }
            cfg.node_of_cpu[c] = (int)nodes[i];
        }
        free(nodes);
    }
    return NULL;
}

/* ---------------------------------------------------------------- the program's affinity calls */

static void pinlab_init(void);

/* Who changed a mask. A thread pinned at its creation may be moved later by the program itself or
 * by a library it uses (an OpenMP runtime told to bind, a BLAS, an MPI library): the sampler then
 * sees the new mask (mask_changes in the run record), but not who set it. So the C library's two
 * functions that change a running thread's mask, sched_setaffinity and pthread_setaffinity_np,
 * are interposed here: each call is forwarded unchanged to the C library's own (errno and return
 * value as the program would have them without pinlab) and recorded as one `affinity` event,
 * with the object that called it (dladdr of the return address: the executable or a library).
 * A mask the program sets on the attributes of a thread it creates (pthread_attr_setaffinity_np,
 * as libgomp binds its workers) is read at pthread_create and recorded too, call=
 * pthread_attr_setaffinity_np, applied=0 when pinlab's plan replaced it.
 *
 * pinlab's own pinning never goes through these (own_setaffinity, and the attributes pinlab sets
 * on its copy are not the caller's), so the events are the program's alone. Nothing is added per
 * thread unless the creator's attributes carry a mask; a call costs its recording (one
 * sched_getaffinity for the old mask, dladdr for the caller), paid only by programs that call.
 *
 * Not seen: a change made by a raw system call, which no interposition can catch (LLVM's libomp
 * binds its threads with syscall(__NR_sched_setaffinity) on Linux, and so does Go's runtime), and
 * one made by another process (taskset -p, pinlab's autopin and --balance). Such a change still
 * shows in the sampler's mask_changes, without a caller.
 */
#define AFFINITY_MASK_BYTES 512  /* masks read for an event: 4096 CPUs */
#define AFFINITY_PRINT_BYTES 8192 /* at most this much of the program's mask is printed */
#define AFFINITY_LINE_MAX 2048

enum affinity_call { CALL_SCHED, CALL_PTHREAD, CALL_ATTR };
static const char *const call_names[] = { "sched_setaffinity", "pthread_setaffinity_np", "pthread_attr_setaffinity_np" };

static void *next_symbol(const char *name, void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    return f == self ? NULL : f;
}

static void find_real_affinity(void)
{
    real_sched_setaffinity = (setaffinity_fn)next_symbol("sched_setaffinity", (void *)sched_setaffinity);
    real_pthread_setaffinity = (thread_setaffinity_fn)next_symbol("pthread_setaffinity_np", (void *)pthread_setaffinity_np);
}

/* The path of the object (library or executable) holding `addr`; NULL if the loader knows none. */
static const char *object_of(const void *addr)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP))
        return NULL;
    /* The main program's link map has an empty name; dladdr then gives argv[0]. */
    if ((map && map->l_name && !map->l_name[0]) || !info.dli_fname || !info.dli_fname[0])
        return cfg.exe[0] ? cfg.exe : info.dli_fname;
    return info.dli_fname;
}

/* A mask of `bytes` bytes as a CPU list ("" when empty, "-" when unknown: mask NULL). */
static void put_mask(char *buf, size_t size, size_t *used, const cpu_set_t *mask, size_t bytes)
{
    if (!mask) {
        PUT_LIT(buf, size, used, "-");
        return;
    }
    if (bytes > AFFINITY_PRINT_BYTES)
        bytes = AFFINITY_PRINT_BYTES;
    long bits = (long)bytes * 8;
    int any = 0;
    for (long cpu = 0; cpu < bits; cpu++) {
        if (!CPU_ISSET_S(cpu, bytes, mask))
            continue;
        long last = cpu;
        while (last + 1 < bits && CPU_ISSET_S(last + 1, bytes, mask))
            last++;
        if (any)
            PUT_LIT(buf, size, used, ",");
        put_long(buf, size, used, cpu);
        if (last > cpu) {
            PUT_LIT(buf, size, used, "-");
            put_long(buf, size, used, last);
        }
        any = 1;
        cpu = last;
    }
}

/* One `affinity` event (see the top of this file). `target` 0: unknown. */
static void affinity_event(enum affinity_call call, pid_t target, const struct timespec *when, const cpu_set_t *old,
                           size_t old_bytes, const cpu_set_t *new_mask, size_t new_bytes, int result, int applied,
                           const void *caller)
{
    char line[AFFINITY_LINE_MAX];
    size_t used = 0;
    line[0] = '\0';
    PUT_FIELD(line, sizeof line, &used, "affinity pid=", my_pid());
    PUT_FIELD(line, sizeof line, &used, " tid=", my_tid());
    PUT_FIELD(line, sizeof line, &used, " target=", target);
    PUT_LIT(line, sizeof line, &used, " call=");
    put_str(line, sizeof line, &used, call_names[call]);
    PUT_FIELD(line, sizeof line, &used, " result=", result);
    PUT_FIELD(line, sizeof line, &used, " applied=", applied);
    PUT_FIELD(line, sizeof line, &used, " t=", (long)when->tv_sec * 1000000000L + when->tv_nsec);
    PUT_LIT(line, sizeof line, &used, " old=");
    put_mask(line, sizeof line, &used, old, old_bytes);
    PUT_LIT(line, sizeof line, &used, " new=");
    put_mask(line, sizeof line, &used, new_mask, new_bytes);
    PUT_LIT(line, sizeof line, &used, " lib="); /* last: a long path is cut at the end of the line */
    put_word(line, sizeof line, &used, object_of(caller));
    emit_line(line, sizeof line, used);
}

/* Ready to forward: pinlab set up (the program may call before pinlab's constructor ran: another
 * library's constructor) and the real functions found. */
static void affinity_setup(void)
{
    pthread_once(&init_once, pinlab_init);
    if (!real_sched_setaffinity || !real_pthread_setaffinity)
        find_real_affinity();
}

static pid_t thread_tid(pthread_t thread)
{
    if (pthread_equal(thread, pthread_self()))
        return my_tid();
    return tid_from_clock ? clock_tid_of(thread) : 0;
}

int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask)
{
    int saved = errno;
    affinity_setup();
    if (!real_sched_setaffinity) {
        errno = ENOSYS;
        return -1;
    }
    if (!cfg.has_events) {
        errno = saved;
        return real_sched_setaffinity(pid, cpusetsize, mask);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    cpu_set_t old[AFFINITY_MASK_BYTES / sizeof(cpu_set_t)];
    int old_ok = sched_getaffinity(pid, sizeof old, old) == 0;
    errno = saved;
    int rc = real_sched_setaffinity(pid, cpusetsize, mask);
    int after = errno;
    affinity_event(CALL_SCHED, pid ? pid : my_tid(), &now, old_ok ? old : NULL, sizeof old,
                   rc != 0 && after == EFAULT ? NULL : mask, cpusetsize, rc == 0 ? 0 : after, rc == 0,
                   __builtin_return_address(0));
    errno = after;
    return rc;
}

int pthread_setaffinity_np(pthread_t thread, size_t cpusetsize, const cpu_set_t *cpuset)
{
    int saved = errno;
    affinity_setup();
    if (!real_pthread_setaffinity)
        return ENOSYS;
    if (!cfg.has_events)
        return real_pthread_setaffinity(thread, cpusetsize, cpuset);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    cpu_set_t old[AFFINITY_MASK_BYTES / sizeof(cpu_set_t)];
    int old_ok = pthread_getaffinity_np(thread, sizeof old, old) == 0;
    pid_t target = thread_tid(thread); /* before: a thread may end once re-bound */
    errno = saved;
    int rc = real_pthread_setaffinity(thread, cpusetsize, cpuset);
    int after = errno;
    affinity_event(CALL_PTHREAD, target, &now, old_ok ? old : NULL, sizeof old, rc == EFAULT ? NULL : cpuset,
                   cpusetsize, rc, rc == 0, __builtin_return_address(0));
    errno = after;
    return rc;
}

/* Whether the caller's thread attributes carry a mask (pthread_attr_setaffinity_np), read into
 * `mask`: glibc gives a set of all ones for attributes without one. Asked at every pthread_create
 * with attributes: a copy of at most AFFINITY_MASK_BYTES, no system call. */
static int attr_mask(const pthread_attr_t *attr, cpu_set_t *mask, size_t bytes)
{
    if (!attr || !cfg.has_events || pthread_attr_getaffinity_np(attr, bytes, mask) != 0)
        return 0;
    const unsigned long *words = (const unsigned long *)mask;
    for (size_t i = 0; i < bytes / sizeof *words; i++)
        if (words[i] != ~0UL)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- init */

static void find_real_create(void)
{
    void *f = dlsym(RTLD_NEXT, "pthread_create");
    if (!f || f == (void *)pthread_create) {
        /* glibc 2.34+ defines pthread_create@@GLIBC_2.34 in libc; older ones in libpthread. */
        static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.1", "GLIBC_2.0" };
        f = NULL;
        for (size_t i = 0; !f && i < sizeof versions / sizeof *versions; i++) {
            f = dlvsym(RTLD_NEXT, "pthread_create", versions[i]);
            if (f == (void *)pthread_create)
                f = NULL;
        }
    }
    real_create = (create_fn)f;
    get_stackaddr = (getstackaddr_fn)dlsym(RTLD_DEFAULT, "pthread_attr_getstackaddr");
    set_stackaddr = (setstackaddr_fn)dlsym(RTLD_DEFAULT, "pthread_attr_setstackaddr");
    find_real_affinity();
}

/* pinlab's own pinning of a process's main thread: the real function, never the interposed one,
 * so that it is not recorded as a call of the program's (see affinity_event). */
static int own_setaffinity(const cpu_set_t *set)
{
    if (real_sched_setaffinity)
        return real_sched_setaffinity(0, sizeof *set, set);
    return (int)syscall(SYS_sched_setaffinity, 0, sizeof *set, set) < 0 ? -1 : 0;
}

static int bind_memory(int node)
{
    unsigned long mask[PINLAB_MAX_NODES / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof mask);
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    /* maxnode: the kernel reads maxnode - 1 bits, as libnuma passes it. */
    return (int)syscall(SYS_set_mempolicy, PINLAB_MPOL_BIND, mask, (unsigned long)PINLAB_MAX_NODES + 1);
}

static int node_of(int cpu)
{
    return cfg.node_of_cpu && cpu >= 0 && cpu < CPU_SETSIZE ? cfg.node_of_cpu[cpu] : -1;
}

/* The CPU a slot gets: the plan's, round-robin past its end with --overflow wrap; -1 past the
 * end otherwise. */
static int slot_cpu(long slot)
{
    if (slot < 0)
        return -1;
    if (slot < cfg.ncpus || cfg.overflow == OVERFLOW_WRAP)
        return plan_cpu(slot % cfg.ncpus);
    return -1;
}

/* Place this process's main thread and record it (from the constructor, and in a child right
 * after fork). The first process, the one pinlab started, holds slot 0: its main thread runs on
 * the union of the plan's CPUs, so that runtimes sizing their pools from the mask see them, until
 * it creates its first thread (narrow_main). A process the program starts takes the plan's next
 * slot and runs on its CPU (PINLAB_CHILDREN=next), keeps what it inherited (inherit), or gets
 * PINLAB_ALLOWED (unpinned). An exec keeps the process's slot (the ring's process table). */
static void place_main_thread(void)
{
    pid_t me = my_pid();
    if (cfg.observe) {
        my_planned = -1;
        process_unpinned = 1; /* its threads take no slot, and no mask of pinlab's */
        atomic_store(&main_wide, 0);
        thread_event(0, my_tid(), "main", -1, -1, 0, cfg.exe, NULL);
        return;
    }
    int first = 1;
    long slot = 0;
    if (ring) {
        int32_t nobody = 0;
        if (!atomic_compare_exchange_strong(&ring->first_pid, &nobody, (int32_t)me) && nobody != (int32_t)me) {
            first = 0;
            slot = process_slot(me);
            long reused = -1;
            if (slot == -2 && cfg.children == CHILDREN_NEXT) {
                int saved = errno;
                reclaim_dead();
                errno = saved;
                reused = reuse_slot((int32_t)me);
            }
            if (reused >= 0) {
                slot = reused; /* a slot given back, and its table entry with it */
            } else if (slot == -2) {
                slot = cfg.children == CHILDREN_NEXT ? take_slot() : -1;
                register_process(me, slot);
            }
        }
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    int planned = -1, wide = 0;
    if (first) {
        planned = plan_cpu(0);
        for (int i = 0; i < cfg.ncpus; i++)
            CPU_SET(cfg.cpus[i], &set);
        wide = CPU_COUNT(&set) > 1;
    } else if (cfg.children == CHILDREN_NEXT && (planned = slot_cpu(slot)) >= 0) {
        CPU_SET(planned, &set);
    } else if (cfg.children != CHILDREN_INHERIT && cfg.helper_mask_ok) {
        set = cfg.helper_mask; /* unpinned, or a process past the end of the plan */
    }
    if (CPU_COUNT(&set) > 0 && own_setaffinity(&set) != 0) {
        warn_event("cannot set the CPUs of the main thread of process %d: %s", (int)me, strerror(errno));
        planned = -1;
        wide = 0;
    }
    my_planned = planned;
    process_unpinned = !first && cfg.children == CHILDREN_UNPINNED;
    if (planned >= 0) {
        int node = node_of(planned);
        if (node >= 0 && bind_memory(node) != 0)
            warn_event("cannot bind the memory of the main thread to node %d: %s", node, strerror(errno));
    }
    atomic_store(&main_wide, wide);
    thread_event(0, my_tid(), "main", slot, planned, 0, cfg.exe, wide ? &set : NULL);
}

/* The first process's main thread, on the plan's CPUs until now, onto its own CPU (slot 0):
 * called as it creates its first thread, before that thread exists. */
static void narrow_main(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpu = plan_cpu(0);
    CPU_SET(cpu, &set);
    if (own_setaffinity(&set) != 0) {
        warn_event("cannot narrow the main thread to CPU %d: %s", cpu, strerror(errno));
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char line[256];
    size_t used = 0;
    line[0] = '\0';
    PUT_FIELD(line, sizeof line, &used, "narrow pid=", my_pid());
    PUT_FIELD(line, sizeof line, &used, " tid=", my_tid());
    PUT_FIELD(line, sizeof line, &used, " cpu=", cpu);
    PUT_FIELD(line, sizeof line, &used, " ns=", (long)now.tv_sec * 1000000000L + now.tv_nsec);
    emit_line(line, sizeof line, used);
}

static void after_fork_child(void)
{
    /* A new process: its own pid and tid, creation indexes and slots. The events descriptor is
     * inherited and stays valid; the lock may have been held by a thread that is gone. */
    cached_pid = 0;
    cached_tid = 0;
    pthread_mutex_init(&events_lock, NULL);
    pthread_mutex_init(&routines_lock, NULL);
    /* Records in use belonged to threads the parent was creating: none of them exists here. */
    for (int i = 0; i < START_POOL; i++)
        atomic_store_explicit(&start_pool[i].busy, 0, memory_order_relaxed);
    atomic_store(&creations, 0);
    atomic_store(&next_slot, 1);
    atomic_store(&created, 0);
    atomic_store(&main_wide, 0);
    if (cfg.enabled)
        place_main_thread(); /* a process of the program's: the next slot, as PINLAB_CHILDREN says */
}

static void pinlab_init(void)
{
    find_real_create();
    pid_t tid = gettid();
    tid_from_clock = clock_tid() == tid;
    cached_tid = tid;
    const char *events = env_or_null("PINLAB_EVENTS");
    if (events && strlen(events) < sizeof cfg.events) {
        strcpy(cfg.events, events);
        cfg.has_events = 1;
        ring_open();
    }
    ssize_t n = readlink("/proc/self/exe", cfg.exe, sizeof cfg.exe - 1);
    cfg.exe[n > 0 ? n : 0] = '\0';

    char why[512];
    const char *wrong = read_config(why, sizeof why);
    if (!real_create)
        wrong = "cannot find the real pthread_create";
    if (wrong) {
        char line[1024];
        int len = snprintf(line, sizeof line, "pinlab: warning: %s; running unpinned\n", wrong);
        if (len > (int)sizeof line - 1) {
            len = (int)sizeof line - 1;
            line[len - 1] = '\n';
        }
        ssize_t w = write(2, line, (size_t)len);
        (void)w;
        warn_event("%s; running unpinned", wrong);
        return;
    }
    cfg.enabled = 1;
    live_plan_open();
    pthread_atfork(NULL, NULL, after_fork_child);
    if (cfg.nested_inherit && !cfg.ndomains)
        warn_event("PINLAB_NESTED=inherit without PINLAB_DOMAINS: nested threads take plan slots");

    place_main_thread();
}

__attribute__((constructor)) static void pinlab_constructor(void)
{
    pthread_once(&init_once, pinlab_init);
}

static void pages_event(void)
{
    int fd = open("/proc/self/numa_maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    enum { MAXN = 1024 };
    static unsigned long long pages[MAXN];
    memset(pages, 0, sizeof pages);
    int highest = -1;
    static char buf[65536];
    size_t have = 0;
    int ok = 1;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ok = 0;
            break;
        }
        have += (size_t)r;
        buf[have] = '\0';
        /* Scan the complete words; keep a partial last word for the next read. */
        size_t keep_from = have;
        if (r > 0) {
            while (keep_from > 0 && buf[keep_from - 1] != ' ' && buf[keep_from - 1] != '\n')
                keep_from--;
        }
        char saved = buf[keep_from];
        buf[keep_from] = '\0';
        for (char *p = buf; *p;) {
            while (*p == ' ' || *p == '\n')
                p++;
            char *w = p;
            while (*p && *p != ' ' && *p != '\n')
                p++;
            if (w[0] == 'N' && w[1] >= '0' && w[1] <= '9') {
                char *eq;
                long node = strtol(w + 1, &eq, 10);
                if (*eq == '=' && node >= 0 && node < MAXN) {
                    pages[node] += strtoull(eq + 1, NULL, 10);
                    if (node > highest)
                        highest = (int)node;
                }
            }
        }
        buf[keep_from] = saved;
        memmove(buf, buf + keep_from, have - keep_from);
        have -= keep_from;
        if (r == 0)
            break;
        if (have >= sizeof buf - 1)
            have = 0; /* an absurdly long word: drop it */
    }
    close(fd);
    if (!ok || highest < 0)
        return;
    char line[EVENT_LINE_MAX];
    size_t used = 0;
    put_fmt(line, sizeof line, &used, "pages pid=%d", (int)my_pid());
    for (int n = 0; n <= highest; n++)
        put_fmt(line, sizeof line, &used, " N%d=%llu", n, pages[n]);
    emit_line(line, sizeof line, used);
}

__attribute__((destructor)) static void pinlab_destructor(void)
{
    if (!cfg.enabled || !cfg.has_events)
        return;
    pages_event();
    char line[128];
    size_t used = 0;
    put_fmt(line, sizeof line, &used, "exit pid=%d threads=%ld", (int)my_pid(), atomic_load(&created));
    emit_line(line, sizeof line, used);
    if (ring && atomic_load(&ring->first_pid) != (int32_t)my_pid())
        release_slot(my_pid()); /* last: the line above is written before another process reuses the slot */
}

/* ---------------------------------------------------------------- helpers */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A helper thread, by where its start routine lives. */
static int is_helper_routine(const char *file, const char *sym)
{
    static const char *const helper_libs[] = {
        "libmpi", "libopen-pal", "libopen-rte", "libpmix", "libfabric", "libucs", "libucp", "libuct",
        "libpsm", "libhcoll", "libibverbs", "librdmacm", "libcuda", "libnvidia", "libmlx",
    };
    const char *base = file ? base_name(file) : "";
    for (size_t i = 0; i < sizeof helper_libs / sizeof *helper_libs; i++)
        if (starts_with(base, helper_libs[i]))
            return 1;
    if (sym) {
        if (!strcmp(sym, "__kmp_launch_monitor") || !strcmp(sym, "__kmp_reap_monitor"))
            return 1;
        if ((starts_with(base, "libomp") || starts_with(base, "libiomp5") || starts_with(base, "libgomp"))
            && strstr(sym, "monitor"))
            return 1;
    }
    return 0;
}

static int is_skipped(long index)
{
    for (int i = 0; i < cfg.nskip; i++)
        if (cfg.skip[i] == index)
            return 1;
    return 0;
}

/* The domain containing cpu and its position there, or -1. */
static int find_domain(int cpu, int *pos)
{
    for (int d = 0; d < cfg.ndomains; d++)
        for (int i = 0; i < cfg.domains[d].count; i++)
            if (cfg.domains[d].cpus[i] == cpu) {
                *pos = i;
                return d;
            }
    return -1;
}

/* Where a start routine lives (its library, and whether that makes the thread a helper), asked
 * of the loader once per routine: dladdr scans the whole symbol table of the library to name the
 * symbol (about 3 ns a symbol: 9 us for a routine in libc, more in libstdc++, where std::thread
 * starts its threads), on every pthread_create. The answers are kept in a small table, valid as
 * long as no library was loaded or unloaded (dl_iterate_phdr's counters, read from its first
 * object, 40 ns): an unloaded library's name, kept by pointer, is never used after its dlclose. */
#define ROUTINES 64
static struct routine {
    void *fn;
    const char *lib;
    int helper;
    unsigned long long generation;
} routines[ROUTINES];

static int loader_generation_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = (unsigned long long)info->dlpi_adds + ((unsigned long long)info->dlpi_subs << 32);
    return 1; /* the first object is enough */
}

static unsigned long long loader_generation(void)
{
    unsigned long long generation = 0;
    dl_iterate_phdr(loader_generation_cb, &generation);
    return generation + 1; /* never 0: 0 marks an empty entry */
}

static const char *routine_lookup(void *(*start_routine)(void *), int *helper)
{
    void *fn = (void *)start_routine;
    unsigned long long generation = loader_generation();
    struct routine *r = &routines[((uintptr_t)fn >> 4) % ROUTINES];
    pthread_mutex_lock(&routines_lock);
    if (r->fn == fn && r->generation == generation) {
        const char *lib = r->lib;
        *helper = r->helper;
        pthread_mutex_unlock(&routines_lock);
        return lib;
    }
    pthread_mutex_unlock(&routines_lock);

    Dl_info info;
    struct link_map *map = NULL;
    const char *lib = NULL, *sym = NULL;
    if (dladdr1(fn, &info, (void **)&map, RTLD_DL_LINKMAP)) {
        lib = info.dli_fname;
        sym = info.dli_sname;
        /* The main program's link map has an empty name; dladdr then gives argv[0]. */
        if ((map && map->l_name && !map->l_name[0]) || (lib && !lib[0]))
            lib = cfg.exe[0] ? cfg.exe : lib;
    }
    *helper = is_helper_routine(lib, sym);
    pthread_mutex_lock(&routines_lock);
    *r = (struct routine){ .fn = fn, .lib = lib, .helper = *helper, .generation = generation };
    pthread_mutex_unlock(&routines_lock);
    return lib;
}

/* The OpenMP nesting level of the calling thread as the runtime owning a start routine counts it
 * (omp_get_level of that library: libgomp's gomp_thread_start, libomp's worker launch), 0 when
 * the library has none or the thread is in no parallel region. Asked only under
 * PINLAB_NESTED=inherit, of the main thread's creations once the plan is taken: it tells an inner
 * team the main thread starts inside a parallel region from plain threads past the plan. */
static int openmp_level(const char *lib)
{
    int (*level)(void) = NULL;
    void *handle = lib ? dlopen(lib, RTLD_NOLOAD | RTLD_LAZY) : NULL;
    if (handle)
        *(void **)&level = dlsym(handle, "omp_get_level");
    else
        *(void **)&level = dlsym(RTLD_DEFAULT, "omp_get_level");
    int answer = level ? level() : 0;
    if (handle)
        dlclose(handle);
    return answer;
}

/* A start record: from the pool, else (more than START_POOL threads created and not yet
 * started) from malloc. NULL if neither. */
static struct start *start_claim(void)
{
    unsigned hint = atomic_fetch_add_explicit(&start_hint, 1, memory_order_relaxed);
    for (unsigned i = 0; i < START_POOL; i++) {
        struct start *s = &start_pool[(hint + i) % START_POOL];
        if (!atomic_load_explicit(&s->busy, memory_order_relaxed)
            && !atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
            return s;
    }
    return aligned_alloc(_Alignof(struct start), sizeof(struct start));
}

static void start_release(struct start *s)
{
    if (s >= start_pool && s < start_pool + START_POOL)
        atomic_store_explicit(&s->busy, 0, memory_order_release);
    else
        free(s);
}

static void *trampoline(void *p)
{
    struct start *s = p;
    void *(*fn)(void *) = s->fn;
    void *arg = s->arg;
    long index = s->index, slot = s->slot;
    const char *lib = s->lib;
    enum role role = s->role;
    int planned = s->planned, node = s->node;
    pid_t creator = s->creator;
    start_release(s); /* first: the record is free for the next thread at once */
    thread_event(index, my_tid(), role_names[role], slot, planned, creator, lib, NULL);
    my_planned = planned;
    if (node >= 0 && bind_memory(node) != 0)
        warn_event("cannot bind the memory of thread %ld to node %d: %s", index, node, strerror(errno));
    return fn(arg);
}

/* A copy of the caller's attributes, which are const and may be shared. */
static int copy_attr(pthread_attr_t *dst, const pthread_attr_t *src)
{
    int rc = pthread_attr_init(dst);
    if (rc || !src)
        return rc;
    int i;
    size_t z;
    struct sched_param sp;
    sigset_t sigmask;
    void *stackaddr = NULL;
    if ((rc = pthread_attr_getdetachstate(src, &i)) || (rc = pthread_attr_setdetachstate(dst, i)))
        goto fail;
    if ((rc = pthread_attr_getguardsize(src, &z)) || (rc = pthread_attr_setguardsize(dst, z)))
        goto fail;
    if ((rc = pthread_attr_getinheritsched(src, &i)) || (rc = pthread_attr_setinheritsched(dst, i)))
        goto fail;
    if (i == PTHREAD_EXPLICIT_SCHED) {
        if ((rc = pthread_attr_getschedpolicy(src, &i)) || (rc = pthread_attr_setschedpolicy(dst, i)))
            goto fail;
        if ((rc = pthread_attr_getschedparam(src, &sp)) || (rc = pthread_attr_setschedparam(dst, &sp)))
            goto fail;
    }
    if ((rc = pthread_attr_getscope(src, &i)) || (rc = pthread_attr_setscope(dst, i)))
        goto fail;
    if ((rc = pthread_attr_getstacksize(src, &z)) || (rc = pthread_attr_setstacksize(dst, z)))
        goto fail;
    /* pthread_attr_getstack cannot tell "no stack given" from a stack at a computed address
     * (it returns top - size even when only a size was set); getstackaddr gives the address
     * the caller set (the top of the stack), NULL if none. */
    if (!get_stackaddr || !set_stackaddr) {
        rc = ENOSYS;
        goto fail;
    }
    if ((rc = get_stackaddr(src, &stackaddr)))
        goto fail;
    if (stackaddr && (rc = set_stackaddr(dst, stackaddr)))
        goto fail;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    rc = pthread_attr_getsigmask_np(src, &sigmask);
    if (rc == 0) {
        if ((rc = pthread_attr_setsigmask_np(dst, &sigmask)))
            goto fail;
    } else if (rc == PTHREAD_ATTR_NO_SIGMASK_NP) {
        rc = 0;
    } else {
        goto fail;
    }
#else
    (void)sigmask;
#endif
    return 0;
fail:
    pthread_attr_destroy(dst);
    return rc;
}

/* ---------------------------------------------------------------- pthread_create */

/* A thread of the program's, pinned as the plan says; *kept (when not NULL) is set when the
 * caller's own attributes made it (it could not be pinned, or needs no mask of pinlab's). */
static int create_pinned(pthread_t *thread, const pthread_attr_t *attr, void *(*start_routine)(void *), void *arg, int *kept)
{
    long index = atomic_fetch_add(&creations, 1) + 1;
    pid_t creator = my_tid();
    if (atomic_load_explicit(&main_wide, memory_order_relaxed) && creator == my_pid() && atomic_exchange(&main_wide, 0))
        narrow_main();

    int helper_routine;
    const char *lib = routine_lookup(start_routine, &helper_routine);

    enum role role;
    long slot = -1;
    int planned = -1;
    int use_helper_mask = 0;
    if (is_skipped(index) || helper_routine) {
        role = ROLE_HELPER;
        use_helper_mask = 1;
    } else if (process_unpinned) {
        role = ROLE_WORKER; /* a worker of a process left unpinned: no slot, the allowed CPUs */
        use_helper_mask = 1;
    } else {
        role = ROLE_WORKER;
        int d = -1, pos = 0;
        if (cfg.nested_inherit && my_planned >= 0 && (creator != my_pid() || (plan_taken() && openmp_level(lib) > 0)))
            d = find_domain(my_planned, &pos);
        if (d >= 0) {
            struct domain *dom = &cfg.domains[d];
            unsigned step = atomic_fetch_add(&dom->next, 1);
            role = ROLE_NESTED;
            planned = dom->cpus[(unsigned)(pos + 1 + (int)(step % (unsigned)dom->count)) % (unsigned)dom->count];
        } else {
            slot = take_slot();
            if ((planned = slot_cpu(slot)) >= 0) {
                /* on its plan CPU (round-robin past the end with --overflow wrap) */
            } else if (cfg.overflow == OVERFLOW_UNPINNED) {
                use_helper_mask = 1;
            } else {
                char line[256];
                int len = snprintf(line, sizeof line,
                                   "pinlab: thread %ld is past the end of the plan (%d CPUs) and --overflow error is set\n",
                                   slot, cfg.ncpus);
                ssize_t w = write(2, line, (size_t)len);
                (void)w;
                warn_event("thread %ld is past the end of the plan (%d CPUs) and --overflow error is set", slot, cfg.ncpus);
                return EAGAIN;
            }
        }
    }

    struct start *s = start_claim();
    if (!s) {
        if (kept)
            *kept = 1;
        warn_event("out of memory: thread %ld created unpinned", index);
        int rc = real_create(thread, attr, start_routine, arg);
        if (rc == 0)
            atomic_fetch_add(&created, 1);
        return rc;
    }
    s->fn = start_routine;
    s->arg = arg;
    s->index = index;
    s->slot = slot;
    s->lib = lib;
    s->role = role;
    s->planned = planned;
    s->node = node_of(planned);
    s->creator = creator;

    cpu_set_t set;
    CPU_ZERO(&set);
    const cpu_set_t *want = NULL;
    if (planned >= 0) {
        CPU_SET(planned, &set);
        want = &set;
    } else if (use_helper_mask && cfg.helper_mask_ok) {
        want = &cfg.helper_mask;
    }

    pthread_attr_t copy;
    int rc = want ? copy_attr(&copy, attr) : -1;
    if (rc == 0) {
        rc = pthread_attr_setaffinity_np(&copy, sizeof *want, want);
        if (rc == 0)
            rc = real_create(thread, &copy, trampoline, s);
        pthread_attr_destroy(&copy);
        if (rc == 0) {
            atomic_fetch_add(&created, 1);
            return 0;
        }
        char where[64];
        if (planned >= 0)
            snprintf(where, sizeof where, "CPU %d", planned);
        else
            snprintf(where, sizeof where, "the helper CPUs");
        warn_event("cannot pin thread %ld to %s: %s; created unpinned", index, where, strerror(rc));
    } else if (want) {
        warn_event("cannot copy the attributes of thread %ld: %s; created unpinned", index, strerror(rc));
    }
    /* Unpinned: the caller's own attributes; the thread inherits its creator's mask. */
    if (want) {
        s->planned = -1;
        s->node = -1;
    }
    if (kept)
        *kept = 1;
    rc = real_create(thread, attr, trampoline, s);
    if (rc == 0)
        atomic_fetch_add(&created, 1);
    else
        start_release(s);
    return rc;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start_routine)(void *), void *arg)
{
    pthread_once(&init_once, pinlab_init);
    if (!real_create) {
        find_real_create();
        if (!real_create)
            return EAGAIN;
    }
    if (!cfg.enabled)
        return real_create(thread, attr, start_routine, arg);
    cpu_set_t asked[AFFINITY_MASK_BYTES / sizeof(cpu_set_t)];
    if (!attr_mask(attr, asked, sizeof asked))
        return create_pinned(thread, attr, start_routine, arg, NULL);

    /* The program asked for a mask on the new thread (libgomp binding its workers): recorded as its
     * call, with the mask a thread created without it would have had (its creator's) as old. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int kept = 0;
    int rc = create_pinned(thread, attr, start_routine, arg, &kept);
    int saved = errno;
    cpu_set_t inherited[AFFINITY_MASK_BYTES / sizeof(cpu_set_t)];
    int inherited_ok = sched_getaffinity(0, sizeof inherited, inherited) == 0;
    affinity_event(CALL_ATTR, rc == 0 ? thread_tid(*thread) : 0, &now, inherited_ok ? inherited : NULL, sizeof inherited,
                   asked, sizeof asked, rc, rc == 0 && kept, __builtin_return_address(0));
    errno = saved;
    return rc;
}
