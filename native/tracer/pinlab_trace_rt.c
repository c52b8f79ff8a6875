/*
 * libpinlab-trace.so: the runtime of pinlab's exact tracer (`pinlab trace --method exact`).
 *
 * A program compiled with -fsanitize=thread (gcc or clang; `pinlab cc` does it) calls a
 * __tsan_* function before every load, store and atomic operation of its own code. This library
 * defines those functions instead of ThreadSanitizer's runtime: each access adds one to the
 * calling thread's count for the cache line (address / 64) it touches, and nothing else. The
 * counts are the input of the affinity graph ([mazouz2011hpcs]: the accesses to lines that two threads
 * both touched); no race detection, no shadow memory.
 *
 * What the program computes never changes: plain accesses are performed by the program itself
 * (the hooks only look at the address), atomic operations are performed here with the __atomic
 * builtins and the memory order the compiler passed (read-modify-write operations with a memory
 * order only known at run time are done sequentially consistent, which is at least as strong),
 * and the library writes nothing on the program's stdout or stderr.
 *
 * Environment:
 *   PINLAB_TRACE_DIR  directory the counts go to; unset or empty: accesses only pass through
 *                     (one predictable branch each), nothing is allocated and nothing written.
 *   PINLAB_TRACE_START  when counting starts (unset: at once): SECONDS after the library's
 *                     constructor (a one-shot timer signal, PINLAB_TRACE_SIGNAL, default SIGRTMAX - 2),
 *                     "parallel" (the first access of a thread other than the main thread: an
 *                     OpenMP program's first parallel region) or "mark" (the program's call to
 *                     pinlab_trace_start(), which it can declare weak so that it builds without
 *                     pinlab too). Until then accesses pass through as when not tracing.
 *
 * Per thread: an open-addressing hash table (line -> count) private to the thread, found through
 * an initial-exec TLS pointer: no lock and no atomic instruction on the hot path. It starts at
 * 4096 entries (64 KiB) and doubles at half full; the arrays a thread outgrew are kept until the
 * thread's table is written (another thread may be reading them at exit), so a thread's memory is
 * at most twice its current array, 16 bytes per entry. The last RECENT lines touched are
 * remembered with their counters: a loop walking a few arrays at once (STREAM's triad: three)
 * finds its lines there, without a probe of a table far larger than the caches.
 *
 * Output: when a thread ends (a pthread key destructor) and, for the threads still alive, at
 * process exit (a library destructor, after the program's own), each thread's table goes to
 * $PINLAB_TRACE_DIR/<tid>.lines, written once:
 *
 *   header, 8 little-endian uint64:  magic "PLTRACE1" (as 8 bytes), pid, tid, line bytes (64),
 *                                    entries, accesses (sum of counts), table bytes (memory the
 *                                    thread's tables used), accesses missed (see below)
 *   then `entries` pairs of uint64:  line number (address / line bytes), count
 *
 * Not counted: accesses before the library's constructor, in uninstrumented code (libc, the
 * OpenMP runtime), after a thread's table was written, and accesses a thread made while its
 * table could not grow (out of memory: counted as missed). A signal handler of instrumented code
 * that runs while its thread is inside the tracer may lose its counts (never the program's data).
 * A program that ends with _exit or is
 * killed by a signal writes only the tables of the threads that already ended. A child process
 * (fork) starts with empty tables and writes its own files (its tids differ).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define HOT static inline __attribute__((always_inline))
#define LINE_SHIFT 6
#define FIRST_CAPACITY 4096u
#define EMPTY 0u /* keys are line + 1, so line 0 can be counted */
#define RECENT 4

struct slot {
    uint64_t key;   /* line + 1; EMPTY when free */
    uint64_t count;
};

/* One array of a thread's table; a new one replaces it when it is half full. */
struct array {
    struct array *retired; /* the array this one replaced (kept, see the header comment) */
    size_t capacity;       /* a power of two */
    size_t bytes;          /* of the mapping */
    struct slot slots[];
};

struct table {
    struct array *_Atomic current;
    size_t used;
    uint64_t recent_key[RECENT];     /* lines counted lately (+1) and their counters: the fast path */
    uint64_t *recent_count[RECENT];
    unsigned recent_next;            /* the entry replaced next (round robin) */
    uint64_t missed;
    size_t bytes_peak;    /* all arrays held at once, at most */
    pid_t tid;
    int written;          /* under registry_lock */
    struct table *next;   /* the registry */
};

static int enabled;                          /* counting: PINLAB_TRACE_DIR was set, and the window is open */
static int ready;                            /* PINLAB_TRACE_DIR was set at start */
enum { WINDOW_NOW, WINDOW_SECONDS, WINDOW_PARALLEL, WINDOW_MARK };
static int window;                           /* what opens it (PINLAB_TRACE_START) */
static pid_t main_pid;
static __thread int thread_checked __attribute__((tls_model("initial-exec"))); /* WINDOW_PARALLEL: this thread was looked at */
static char trace_dir[PATH_MAX];
static pthread_key_t flush_key;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table *registry;

/* The calling thread's table; DONE once written (later accesses are not counted). */
static __thread struct table *mine __attribute__((tls_model("initial-exec")));
static struct table done_marker;
#define DONE (&done_marker)

static void *map_bytes(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static struct array *new_array(size_t capacity)
{
    size_t bytes = sizeof(struct array) + capacity * sizeof(struct slot);
    struct array *a = map_bytes(bytes); /* zero-filled: every slot EMPTY */
    if (a) {
        a->capacity = capacity;
        a->bytes = bytes;
    }
    return a;
}

static void free_arrays(struct array *a)
{
    while (a) {
        struct array *older = a->retired;
        munmap(a, a->bytes);
        a = older;
    }
}

/* The home slot of a line. Lines come in aligned blocks of 8 (512 bytes) that share 8 adjacent
 * slots (two cache lines of the table): a sweep over an array then misses the caches once per 8
 * lines it counts instead of once per line (a scattering hash made the table's misses 3/4 of the
 * tracer's time on STREAM). Blocks are scattered by a multiplicative hash. */
static size_t hash(uint64_t key, size_t capacity)
{
    uint64_t block = ((key >> 3) * 0x9E3779B97F4A7C15ull) >> 17;
    return (size_t)((block << 3) | (key & 7)) & (capacity - 1);
}

/* The slot of `key` in `a`, inserted when absent (the caller makes sure there is room). */
static struct slot *find_or_insert(struct array *a, uint64_t key, int *inserted)
{
    size_t mask = a->capacity - 1;
    for (size_t i = hash(key, a->capacity);; i = (i + 1) & mask) {
        struct slot *s = &a->slots[i];
        if (s->key == key)
            return s;
        if (s->key == EMPTY) {
            s->key = key;
            *inserted = 1;
            return s;
        }
    }
}

static int grow(struct table *t)
{
    struct array *old = atomic_load_explicit(&t->current, memory_order_relaxed);
    struct array *a = new_array(old->capacity * 2);
    if (!a)
        return 0;
    for (size_t i = 0; i < old->capacity; i++) {
        if (old->slots[i].key != EMPTY) {
            int inserted = 0;
            find_or_insert(a, old->slots[i].key, &inserted)->count = old->slots[i].count;
        }
    }
    a->retired = old;
    size_t held = 0;
    for (struct array *x = a; x; x = x->retired)
        held += x->bytes;
    if (held > t->bytes_peak)
        t->bytes_peak = held;
    memset(t->recent_key, 0, sizeof t->recent_key); /* their counters were in the old array */
    atomic_store_explicit(&t->current, a, memory_order_release);
    return 1;
}

static void flush_at_thread_exit(void *value);

/* The calling thread's first counted access: its table, registered for the exit. */
static struct table *new_table(void)
{
    struct table *t = map_bytes(sizeof *t);
    struct array *a = t ? new_array(FIRST_CAPACITY) : NULL;
    if (!a) {
        if (t)
            munmap(t, sizeof *t);
        return DONE; /* no memory: this thread is not counted (said nowhere: stderr is the program's) */
    }
    atomic_store_explicit(&t->current, a, memory_order_relaxed);
    t->bytes_peak = a->bytes;
    t->tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&registry_lock);
    t->next = registry;
    registry = t;
    pthread_mutex_unlock(&registry_lock);
    pthread_setspecific(flush_key, t);
    return t;
}

HOT void remember(struct table *t, uint64_t key, uint64_t *counter)
{
    unsigned r = t->recent_next;
    t->recent_key[r] = key;
    t->recent_count[r] = counter;
    t->recent_next = (r + 1) % RECENT;
}

static __attribute__((noinline)) void count_slow(struct table *t, uint64_t key)
{
    if (t == NULL) {
        t = mine = new_table();
    }
    if (t == DONE)
        return;
    struct array *a = atomic_load_explicit(&t->current, memory_order_relaxed);
    if (2 * (t->used + 1) > a->capacity) {
        if (!grow(t)) {
            /* full and no memory for more: count lines already present, miss the new ones */
            size_t mask = a->capacity - 1;
            for (size_t i = hash(key, a->capacity);; i = (i + 1) & mask) {
                if (a->slots[i].key == key) {
                    a->slots[i].count++;
                    return;
                }
                if (a->slots[i].key == EMPTY) {
                    t->missed++;
                    return;
                }
            }
        }
        a = atomic_load_explicit(&t->current, memory_order_relaxed);
    }
    int inserted = 0;
    struct slot *s = find_or_insert(a, key, &inserted);
    t->used += (size_t)inserted;
    s->count++;
    remember(t, key, &s->count);
}

/* WINDOW_PARALLEL: a thread's first access while counting is off opens the window when the
 * thread is not the main thread. */
static __attribute__((noinline)) int opens_window(void)
{
    thread_checked = 1;
    if ((pid_t)syscall(SYS_gettid) == main_pid)
        return 0;
    __atomic_store_n(&enabled, 1, __ATOMIC_RELAXED);
    return 1;
}

/* One access to the line holding `addr`: the hot path. */
HOT void count(const volatile void *addr)
{
    if (__builtin_expect(!__atomic_load_n(&enabled, __ATOMIC_RELAXED), 1)) {
        if (__builtin_expect(window != WINDOW_PARALLEL || thread_checked, 1) || !opens_window())
            return;
    }
    uint64_t key = ((uint64_t)(uintptr_t)addr >> LINE_SHIFT) + 1;
    struct table *t = mine;
    if (__builtin_expect(t == NULL, 0)) {
        count_slow(t, key);
        return;
    }
    for (unsigned r = 0; r < RECENT; r++) {
        if (t->recent_key[r] == key) {
            (*t->recent_count[r])++;
            return;
        }
    }
    if (t != DONE) {
        struct array *a = atomic_load_explicit(&t->current, memory_order_relaxed);
        size_t mask = a->capacity - 1;
        for (size_t i = hash(key, a->capacity);; i = (i + 1) & mask) {
            struct slot *s = &a->slots[i];
            if (s->key == key) {
                s->count++;
                remember(t, key, &s->count);
                return;
            }
            if (s->key == EMPTY)
                break;
        }
    }
    count_slow(t, key);
}

/* Every line of [addr, addr + size), once each. */
HOT void count_range(const volatile void *addr, size_t size)
{
    if (size == 0)
        return;
    if (__builtin_expect(!__atomic_load_n(&enabled, __ATOMIC_RELAXED), 1)) {
        count(addr); /* may open the window (WINDOW_PARALLEL) */
        if (!__atomic_load_n(&enabled, __ATOMIC_RELAXED))
            return;
    }
    uintptr_t first = (uintptr_t)addr >> LINE_SHIFT, last = ((uintptr_t)addr + size - 1) >> LINE_SHIFT;
    for (uintptr_t line = first; line <= last; line++)
        count((const void *)(line << LINE_SHIFT));
}

/* ---- writing the counts ---- */

static int write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        p += n;
        size -= (size_t)n;
    }
    return 1;
}

/* $PINLAB_TRACE_DIR/<tid>.lines; written to a temporary name first, so a reader never sees half a file. */
static void write_table(struct table *t)
{
    char path[PATH_MAX + 32], temp[PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/%d.lines", trace_dir, (int)t->tid);
    snprintf(temp, sizeof temp, "%s/.%d.lines.part", trace_dir, (int)t->tid);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    struct array *a = atomic_load_explicit(&t->current, memory_order_acquire);
    uint64_t entries = 0, accesses = 0;
    for (size_t i = 0; i < a->capacity; i++) {
        if (a->slots[i].key != EMPTY) {
            entries++;
            accesses += a->slots[i].count;
        }
    }
    uint64_t header[8];
    memcpy(&header[0], "PLTRACE1", 8);
    header[1] = (uint64_t)getpid();
    header[2] = (uint64_t)t->tid;
    header[3] = 1u << LINE_SHIFT;
    header[4] = entries;
    header[5] = accesses;
    header[6] = t->bytes_peak + sizeof *t;
    header[7] = t->missed;
    int ok = write_all(fd, header, sizeof header);
    uint64_t buffer[1024];
    size_t fill = 0, seen = 0;
    for (size_t i = 0; ok && i < a->capacity && seen < entries; i++) {
        if (a->slots[i].key == EMPTY)
            continue;
        seen++;
        buffer[fill++] = a->slots[i].key - 1;
        buffer[fill++] = a->slots[i].count;
        if (fill == sizeof buffer / sizeof buffer[0]) {
            ok = write_all(fd, buffer, fill * sizeof buffer[0]);
            fill = 0;
        }
    }
    /* entries counted above: the pairs written must match the header, even if the table moved on */
    while (ok && seen < entries) {
        buffer[fill++] = UINT64_MAX;
        buffer[fill++] = 0;
        seen++;
        if (fill == sizeof buffer / sizeof buffer[0]) {
            ok = write_all(fd, buffer, fill * sizeof buffer[0]);
            fill = 0;
        }
    }
    if (ok && fill)
        ok = write_all(fd, buffer, fill * sizeof buffer[0]);
    if (close(fd) != 0)
        ok = 0;
    if (ok)
        rename(temp, path);
    else
        unlink(temp);
}

static void flush_at_thread_exit(void *value)
{
    struct table *t = value;
    mine = DONE;
    pthread_mutex_lock(&registry_lock);
    int already = t->written;
    t->written = 1;
    for (struct table **p = &registry; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (!already) {
        write_table(t);
        free_arrays(atomic_load_explicit(&t->current, memory_order_relaxed));
        munmap(t, sizeof *t);
    }
}

/* A forked child's tables are the parent's counts: it starts afresh. */
static void forget_after_fork(void)
{
    struct table *t = registry;
    registry = NULL;
    pthread_mutex_init(&registry_lock, NULL);
    while (t) {
        struct table *next = t->next;
        free_arrays(atomic_load_explicit(&t->current, memory_order_relaxed));
        munmap(t, sizeof *t);
        t = next;
    }
    mine = NULL;
    pthread_setspecific(flush_key, NULL);
}

static void window_timer(int sig)
{
    (void)sig;
    __atomic_store_n(&enabled, 1, __ATOMIC_RELAXED);
}

/* WINDOW_SECONDS: one timer signal, `seconds` from now, opens the window. */
static int start_timer(double seconds)
{
    int signo = SIGRTMAX - 2;
    const char *chosen = getenv("PINLAB_TRACE_SIGNAL");
    if (chosen && *chosen)
        signo = atoi(chosen);
    if (signo < SIGRTMIN || signo > SIGRTMAX)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = window_timer;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL) != 0)
        return 0;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = signo;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
        return 0;
    struct itimerspec it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = (time_t)seconds;
    it.it_value.tv_nsec = (long)((seconds - (double)it.it_value.tv_sec) * 1e9);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_nsec == 0)
        it.it_value.tv_nsec = 1; /* zero would disarm it */
    return timer_settime(timer, 0, &it, NULL) == 0;
}

__attribute__((constructor)) static void start(void)
{
    const char *dir = getenv("PINLAB_TRACE_DIR");
    if (!dir || !*dir || strlen(dir) >= sizeof trace_dir)
        return;
    strcpy(trace_dir, dir);
    if (pthread_key_create(&flush_key, flush_at_thread_exit) != 0)
        return;
    pthread_atfork(NULL, NULL, forget_after_fork);
    main_pid = getpid();
    ready = 1;
    const char *start_at = getenv("PINLAB_TRACE_START");
    if (!start_at || !*start_at) {
        enabled = 1;
    } else if (!strcmp(start_at, "parallel")) {
        window = WINDOW_PARALLEL;
    } else if (!strcmp(start_at, "mark")) {
        window = WINDOW_MARK;
    } else {
        window = WINDOW_SECONDS;
        char *end;
        double seconds = strtod(start_at, &end);
        if (*end || !(seconds >= 0) || !start_timer(seconds))
            enabled = 1; /* pinlab checks the setting; a timer that cannot be set: count it all */
    }
}

/* The program's phase mark: counting starts here (with PINLAB_TRACE_START=mark; a no-op otherwise). */
EXPORT void pinlab_trace_start(void)
{
    if (ready && window == WINDOW_MARK)
        __atomic_store_n(&enabled, 1, __ATOMIC_RELAXED);
}

/* After the program's own destructors (this library is a dependency of the program): every
 * table not yet written, the exiting thread's and those of threads still alive (an OpenMP pool). */
__attribute__((destructor)) static void finish(void)
{
    if (!ready)
        return;
    mine = DONE; /* the exiting thread counts nothing more */
    pthread_mutex_lock(&registry_lock);
    for (struct table *t = registry; t; t = t->next) {
        if (!t->written) {
            t->written = 1;
            write_table(t); /* not freed: its thread may still be running */
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ---- the compiler's interface ---- */

EXPORT void __tsan_init(void) {}
EXPORT void __tsan_func_entry(void *pc) { (void)pc; }
EXPORT void __tsan_func_exit(void) {}

#define PLAIN(size)                                                                          \
    EXPORT void __tsan_read##size(void *a) { count(a); }                                      \
    EXPORT void __tsan_write##size(void *a) { count(a); }                                     \
    EXPORT void __tsan_read##size##_pc(void *a, void *pc) { (void)pc; count(a); }             \
    EXPORT void __tsan_write##size##_pc(void *a, void *pc) { (void)pc; count(a); }            \
    EXPORT void __tsan_volatile_read##size(void *a) { count(a); }                             \
    EXPORT void __tsan_volatile_write##size(void *a) { count(a); }
PLAIN(1)
PLAIN(2)
PLAIN(4)
PLAIN(8)
PLAIN(16)

/* Unaligned accesses may straddle two lines: both are counted. */
#define UNALIGNED(size)                                                                      \
    EXPORT void __tsan_unaligned_read##size(void *a) { count_range(a, size); }               \
    EXPORT void __tsan_unaligned_write##size(void *a) { count_range(a, size); }              \
    EXPORT void __tsan_unaligned_read##size##_pc(void *a, void *pc) { (void)pc; count_range(a, size); } \
    EXPORT void __tsan_unaligned_write##size##_pc(void *a, void *pc) { (void)pc; count_range(a, size); }
UNALIGNED(2)
UNALIGNED(4)
UNALIGNED(8)
UNALIGNED(16)

EXPORT void __tsan_read_range(void *a, unsigned long size) { count_range(a, size); }
EXPORT void __tsan_write_range(void *a, unsigned long size) { count_range(a, size); }
EXPORT void __tsan_vptr_read(void **vptr) { count(vptr); }
EXPORT void __tsan_vptr_update(void **vptr, void *value) { (void)value; count(vptr); }

/* clang replaces the memory intrinsics of instrumented code by these: they must do the work. */
EXPORT void *__tsan_memcpy(void *dst, const void *src, unsigned long size)
{
    count_range(src, size);
    count_range(dst, size);
    return memcpy(dst, src, size);
}
EXPORT void *__tsan_memmove(void *dst, const void *src, unsigned long size)
{
    count_range(src, size);
    count_range(dst, size);
    return memmove(dst, src, size);
}
EXPORT void *__tsan_memset(void *dst, int c, unsigned long size)
{
    count_range(dst, size);
    return memset(dst, c, size);
}

/* Memory orders as ThreadSanitizer's interface numbers them: the same as the __ATOMIC_* values. */
typedef int morder;

/* Loads and stores with a constant order for each valid value (an order given at run time
 * would make gcc fall back to seq_cst, a locked instruction for a store on x86). */
#define LOAD_ORDERED(p, mo)                                                                 \
    ((mo) == __ATOMIC_RELAXED   ? __atomic_load_n(p, __ATOMIC_RELAXED)                      \
     : (mo) == __ATOMIC_CONSUME ? __atomic_load_n(p, __ATOMIC_CONSUME)                      \
     : (mo) == __ATOMIC_ACQUIRE ? __atomic_load_n(p, __ATOMIC_ACQUIRE)                      \
                                : __atomic_load_n(p, __ATOMIC_SEQ_CST))
#define STORE_ORDERED(p, v, mo)                                                             \
    do {                                                                                    \
        if ((mo) == __ATOMIC_RELAXED)                                                       \
            __atomic_store_n(p, v, __ATOMIC_RELAXED);                                       \
        else if ((mo) == __ATOMIC_RELEASE)                                                  \
            __atomic_store_n(p, v, __ATOMIC_RELEASE);                                       \
        else                                                                                \
            __atomic_store_n(p, v, __ATOMIC_SEQ_CST);                                       \
    } while (0)

#define ATOMICS(bits, type)                                                                                       \
    EXPORT type __tsan_atomic##bits##_load(const volatile type *a, morder mo)                                      \
    {                                                                                                             \
        count(a);                                                                                                 \
        return LOAD_ORDERED(a, mo);                                                                               \
    }                                                                                                             \
    EXPORT void __tsan_atomic##bits##_store(volatile type *a, type v, morder mo)                                   \
    {                                                                                                             \
        count(a);                                                                                                 \
        STORE_ORDERED(a, v, mo);                                                                                  \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_exchange(volatile type *a, type v, morder mo)                                \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_exchange_n(a, v, mo);                                                                     \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_add(volatile type *a, type v, morder mo)                               \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_add(a, v, mo);                                                                      \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_sub(volatile type *a, type v, morder mo)                               \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_sub(a, v, mo);                                                                      \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_and(volatile type *a, type v, morder mo)                               \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_and(a, v, mo);                                                                      \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_or(volatile type *a, type v, morder mo)                                \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_or(a, v, mo);                                                                       \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_xor(volatile type *a, type v, morder mo)                               \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_xor(a, v, mo);                                                                      \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_fetch_nand(volatile type *a, type v, morder mo)                              \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_fetch_nand(a, v, mo);                                                                     \
    }                                                                                                             \
    EXPORT int __tsan_atomic##bits##_compare_exchange_strong(volatile type *a, type *c, type v, morder mo,         \
                                                             morder fmo)                                          \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_compare_exchange_n(a, c, v, 0, mo, fmo);                                                  \
    }                                                                                                             \
    EXPORT int __tsan_atomic##bits##_compare_exchange_weak(volatile type *a, type *c, type v, morder mo,           \
                                                           morder fmo)                                            \
    {                                                                                                             \
        count(a);                                                                                                 \
        return __atomic_compare_exchange_n(a, c, v, 1, mo, fmo);                                                  \
    }                                                                                                             \
    EXPORT type __tsan_atomic##bits##_compare_exchange_val(volatile type *a, type c, type v, morder mo,            \
                                                           morder fmo)                                            \
    {                                                                                                             \
        count(a);                                                                                                 \
        __atomic_compare_exchange_n(a, &c, v, 0, mo, fmo);                                                        \
        return c; /* the value found: the expected one when the exchange happened */                              \
    }

ATOMICS(8, uint8_t)
ATOMICS(16, uint16_t)
ATOMICS(32, uint32_t)
ATOMICS(64, uint64_t)
#ifdef __SIZEOF_INT128__
ATOMICS(128, unsigned __int128)
#endif

EXPORT void __tsan_atomic_thread_fence(morder mo)
{
    if (mo == __ATOMIC_RELAXED)
        return;
    if (mo == __ATOMIC_SEQ_CST)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    else
        __atomic_thread_fence(__ATOMIC_ACQ_REL); /* acquire, release, acq_rel: no instruction on x86 */
}

EXPORT void __tsan_atomic_signal_fence(morder mo)
{
    (void)mo;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
