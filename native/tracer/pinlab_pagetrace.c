/*
 * libpinlab-pagetrace.so: which threads touch which pages, for unmodified binaries, in software.
 *
 * Loaded with LD_PRELOAD (next to libpinlab-preload.so) by `pinlab trace --method pages`. The idea
 * of the kernel page-sharing detectors (SPCD), in user space: every PINLAB_PAGETRACE_PERIOD_MS a
 * POSIX timer signal starts a round that removes all access (mprotect PROT_NONE) from the
 * program's large private anonymous read-write mappings; the first access of a thread to such a
 * page then faults, and the SIGSEGV handler records (thread id, page), gives the page back its
 * read-write protection and returns, so the access is replayed. Over many rounds each page is
 * attributed to the threads that use it. No thread is added (pinlab's preload pins threads by
 * creation order), no malloc and no stdio in the handlers.
 *
 * What is protected: unnamed rw-p mappings of at least PINLAB_PAGETRACE_MIN_BYTES (default 64 KiB),
 * and malloc's main heap ([heap]) with PINLAB_PAGETRACE_HEAP=1 (less the pages of the standard
 * streams' buffers, which libc writes and reads with system calls the tracer cannot interpose),
 * never [stack] or other named ones, never one that directly follows a PROT_NONE mapping
 * that is not ours (glibc's guard page under each thread stack), never one that directly follows
 * a file mapping (a library's .bss), never the tracer's own memory, never the range holding the
 * round's own stack. At most PINLAB_PAGETRACE_MAX_PAGES pages a round (a cursor moves on through
 * the address space, so a large program is covered over several rounds and the fault count per
 * round stays bounded).
 *
 * Keeping the program's behaviour:
 *   - a fault outside our protected ranges, or one that is not a protection fault, goes to the
 *     program's own SIGSEGV handler (sigaction and signal are interposed: the program's handler
 *     is remembered, ours stays installed) or to the default action (the program dies of SIGSEGV
 *     as it would have). A protection fault in our ranges on a page already given back is
 *     replayed once (another thread gave it back in the meantime); a second fault at the same
 *     address is the program's.
 *   - system calls given user buffers (read, write, pread, pwrite, readv, writev, recv, recvfrom,
 *     recvmsg, send, sendto, sendmsg, fread, fwrite) touch every page of their buffers first, so the
 *     kernel never meets a protected page (EFAULT); no round starts while such a call is in flight.
 *     pthread_create reads its attributes first in the same way (glibc reads them with signals blocked).
 *   - the program's mprotect, munmap, mremap, madvise and mmap end the round first (every range we
 *     protected gets read-write back), so they act on the protection the program set.
 *
 * Limits: page granularity (4 KiB: threads using different lines of one page look like sharers);
 * only the first thread to touch a page in a round is seen (the page is open to all afterwards);
 * system calls made inside libc (printf flushing its buffer, getaddrinfo...) or by other
 * libraries are not interposed: if the kernel meets a page protected by a round in them, the call
 * fails with EFAULT (a buffer touched just before is open, so this needs a round in between).
 * Futex waits inside glibc on a protected page are the same hazard.
 *
 * Environment: PINLAB_TRACE_DIR (required: where the counts go), PINLAB_PAGETRACE_LIVE (a file of
 * the table's size, 16 MiB, and one page more: the counts are kept in it, shared, so that pinlab
 * can read them while the program runs: key = (page number << 22 | tid) + 1 and count, two uint64
 * a slot, key 0 for an empty slot; then the control words, see struct control), PINLAB_PAGETRACE_PERIOD_MS
 * (default 10), PINLAB_PAGETRACE_MIN_BYTES (default 65536), PINLAB_PAGETRACE_MAX_PAGES (default
 * 65536), PINLAB_PAGETRACE_SIGNAL (the timer's signal number, default SIGRTMAX - 2),
 * PINLAB_TRACE_START (when the rounds start; unset: at once): SECONDS after the constructor,
 * "parallel" (the program's first pthread_create: an OpenMP program's first parallel region) or
 * "mark" (the program's call to pinlab_trace_start()).
 *
 * Output, at exit, $PINLAB_TRACE_DIR/pagetrace-PID.txt (text, one record a line):
 *   pinlab-pagetrace 1 pid=P page=BYTES period_ms=MS rounds=R handed=H skipped_busy=B skipped_in_flight=I faults=F lost=L ns=TRACED_NS opened_ns=NS
 *   (handed: the rounds a timer expiry handed on to another thread and that thread ran;
 *   skipped_busy, skipped_in_flight: expiries that ran no round, a round or a mapping change under
 *   way, or an interposed call in flight that holds every round back (one with several buffers,
 *   thread creation); opened_ns:
 *   when the rounds started, after the constructor; absent when they never did)
 *   TID PAGE_NUMBER_HEX COUNT       (COUNT rounds in which thread TID touched the page first)
 * lost counts faults not recorded because the table was full.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- state ---- */

#define MAX_RANGES 4096
#define TABLE_BITS 20 /* (thread, page) counters: 1 Mi slots of 16 bytes, mapped lazily */

struct range {
    _Atomic uintptr_t start, end;
};

struct slot {
    _Atomic uint64_t key; /* (page << 22 | tid) + 1; 0 = empty */
    _Atomic uint64_t count;
};

static int enabled;
static long page_size = 4096;
static long period_ms = 10, max_pages = 65536;
static unsigned long min_bytes = 65536;
static int trace_heap; /* PINLAB_PAGETRACE_HEAP=1: [heap] is protected too */
static int timer_signal;
static timer_t timer;
static pid_t owner_pid;
static char out_dir[512];
static struct timespec start_time;

static struct range *ranges; /* every range protected since the round ended; only appended to */
static _Atomic int nranges;
static struct slot *table;

/* With PINLAB_PAGETRACE_LIVE, the page after the table: pinlab asks for a pause (pause = a new
 * nonzero number) before it moves pages with move_pages(2), which cannot move pages a round keeps
 * protected; the next round gives every page its access back, answers (paused = that number)
 * and protects nothing until pause is 0 again. */
struct control {
    _Atomic uint64_t pause, paused;
};
static struct control *control;
static size_t table_bytes, ranges_bytes;
static atomic_long rounds, faults, lost;
static atomic_int busy;      /* a round (or ending one) is under way */
static atomic_int window_open = 1; /* rounds run (PINLAB_TRACE_START: once the window opens) */
static atomic_llong opened_ns = -1; /* when it opened, after start_time */
static int window_by_mark;
static atomic_int in_flight; /* interposed calls touching their buffers */
static uintptr_t cursor;     /* where the next round starts protecting */

static __thread uintptr_t replayed; /* the address of a fault replayed once (see the handler) */

static struct sigaction program_segv; /* the program's own SIGSEGV action (SIG_DFL at first) */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;

/* ---- small async-signal-safe helpers ---- */

static pid_t my_tid(void) { return (pid_t)syscall(SYS_gettid); }

static int raw_mprotect(void *addr, size_t len, int prot)
{
    return (int)syscall(SYS_mprotect, addr, len, prot);
}

static int in_ranges(uintptr_t addr)
{
    int n = atomic_load(&nranges);
    for (int i = 0; i < n; i++)
        if (addr >= atomic_load(&ranges[i].start) && addr < atomic_load(&ranges[i].end))
            return 1;
    return 0;
}

static void count_access(pid_t tid, uintptr_t page)
{
    uint64_t key = (((uint64_t)page << 22) | ((uint64_t)tid & 0x3fffff)) + 1;
    size_t mask = ((size_t)1 << TABLE_BITS) - 1;
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS));
    for (size_t probe = 0; probe <= mask; probe++) {
        struct slot *s = &table[(h + probe) & mask];
        uint64_t seen = atomic_load(&s->key);
        if (seen == 0) {
            uint64_t empty = 0;
            if (atomic_compare_exchange_strong(&s->key, &empty, key))
                seen = key;
            else
                seen = empty; /* another thread took it: is it ours? */
        }
        if (seen == key) {
            atomic_fetch_add(&s->count, 1);
            return;
        }
    }
    atomic_fetch_add(&lost, 1);
}

static void end_round(void); /* below, with the reading of /proc/self/maps */

static void lock_rounds(void)
{
    int idle = 0;
    while (!atomic_compare_exchange_weak(&busy, &idle, 1)) {
        idle = 0;
        sched_yield();
    }
}

/* ---- reading /proc/self/maps without stdio ---- */

static uintptr_t parse_hex(const char **p)
{
    uintptr_t v = 0;
    for (;;) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return v;
        v = v * 16 + (uintptr_t)d;
        (*p)++;
    }
}

struct mapping {
    uintptr_t start, end;
    char perms[5];
    int anonymous; /* no inode and no name */
};

/* Parses one line "start-end perms offset dev inode [name]"; returns 0 when malformed. */
static int parse_mapping(const char *line, struct mapping *m)
{
    const char *p = line;
    m->start = parse_hex(&p);
    if (*p++ != '-')
        return 0;
    m->end = parse_hex(&p);
    if (*p++ != ' ')
        return 0;
    for (int i = 0; i < 4; i++)
        m->perms[i] = *p ? *p++ : '?';
    m->perms[4] = 0;
    for (int field = 0; field < 3; field++) { /* offset, dev, inode */
        while (*p == ' ')
            p++;
        const char *begin = p;
        while (*p && *p != ' ' && *p != '\n')
            p++;
        if (field == 2 && !(p - begin == 1 && *begin == '0'))
            return m->anonymous = 0, 1;
    }
    while (*p == ' ')
        p++;
    m->anonymous = *p == 0 || *p == '\n';
    return 1;
}

/* Protects [s, e) (page aligned) up to the round's budget; returns the pages protected. */
static long protect(uintptr_t s, uintptr_t e, long budget)
{
    if (budget <= 0 || s >= e)
        return 0;
    long pages = (long)((e - s) / (uintptr_t)page_size);
    if (pages > budget) {
        pages = budget;
        e = s + (uintptr_t)pages * (uintptr_t)page_size;
    }
    int n = atomic_load(&nranges);
    if (n >= MAX_RANGES)
        return 0;
    atomic_store(&ranges[n].start, s);
    atomic_store(&ranges[n].end, e);
    atomic_store(&nranges, n + 1); /* known before any fault it causes */
    if (raw_mprotect((void *)s, e - s, PROT_NONE) != 0) {
        atomic_store(&nranges, n);
        return 0;
    }
    cursor = e;
    return pages;
}

/* Never protected: the tracer's own memory and every anonymous mapping that existed before the
 * program's code ran (the loader's memory, the main thread's TLS and thread control block, which
 * the handlers themselves use). The kernel may merge them with the program's later mappings, so
 * they are cut out of a candidate rather than excluding it. Sorted by start. */
#define MAX_EXCLUDED 128
static uintptr_t excluded[MAX_EXCLUDED][2];
static int nexcluded;

static void exclude(uintptr_t s, uintptr_t e)
{
    if (nexcluded >= MAX_EXCLUDED || s >= e)
        return;
    int i = nexcluded++;
    while (i > 0 && excluded[i - 1][0] > s) {
        excluded[i][0] = excluded[i - 1][0], excluded[i][1] = excluded[i - 1][1];
        i--;
    }
    excluded[i][0] = s, excluded[i][1] = e;
}

/* The buffers of the interposed calls in flight, page-rounded: a round leaves them open, as the
 * kernel would fail the call with EFAULT on a protected page. A slot is free while its start is 0.
 * A call that finds no free slot, or passes several buffers, holds every round back instead. */
#define MAX_OPEN 64
static _Atomic uintptr_t open_start[MAX_OPEN], open_end[MAX_OPEN];

/* What a round leaves alone: the excluded ranges and the open buffers when it started, by start. */
static uintptr_t cut[MAX_EXCLUDED + MAX_OPEN][2];
static int ncut;

static void take_cuts(void)
{
    ncut = 0;
    for (int i = 0; i < nexcluded; i++)
        cut[ncut][0] = excluded[i][0], cut[ncut][1] = excluded[i][1], ncut++;
    for (int i = 0; i < MAX_OPEN; i++) {
        uintptr_t s = atomic_load(&open_start[i]), e = atomic_load(&open_end[i]);
        if (!s || s >= e)
            continue; /* free, or being claimed: that call waits for this round to end */
        int j = ncut++;
        for (; j > 0 && cut[j - 1][0] > s; j--)
            cut[j][0] = cut[j - 1][0], cut[j][1] = cut[j - 1][1];
        cut[j][0] = s, cut[j][1] = e;
    }
}

/* Protects [s, e) without what the round leaves alone; returns the pages protected. */
static long protect_outside_excluded(uintptr_t s, uintptr_t e, long budget)
{
    long done = 0;
    for (int i = 0; i < ncut && s < e; i++) {
        if (cut[i][1] <= s || cut[i][0] >= e)
            continue;
        if (cut[i][0] > s)
            done += protect(s, cut[i][0], budget - done);
        if (cut[i][1] > s)
            s = cut[i][1];
    }
    if (s < e)
        done += protect(s, e, budget - done);
    return done;
}

/* Calls fn on every line of /proc/self/maps (no stdio, no malloc); stops when fn returns 0. */
static void each_mapping(int (*fn)(const struct mapping *, const char *, void *), void *arg)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096], line[512];
    size_t used = 0;
    struct mapping m;
    for (;;) {
        ssize_t got = syscall(SYS_read, fd, buf, sizeof buf);
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (used < sizeof line - 1)
                line[used++] = c;
            if (c != '\n')
                continue;
            line[used] = 0;
            used = 0;
            if (parse_mapping(line, &m) && !fn(&m, line, arg))
                goto done;
        }
    }
done:
    syscall(SYS_close, fd);
}

/* The part of a mapping still protected by a round: given read-write back. Only anonymous
 * mappings without access are touched: a range may have been unmapped since (free() calls munmap
 * inside libc, which is not interposed) and something else mapped there, such as a library's
 * code by dlopen, which read-write protection would make unexecutable. */
static int give_back(const struct mapping *m, const char *line, void *arg)
{
    (void)line, (void)arg;
    if (!m->anonymous || m->perms[0] != '-' || m->perms[1] != '-' || m->perms[2] != '-')
        return 1;
    int n = atomic_load(&nranges);
    for (int i = 0; i < n; i++) {
        uintptr_t s = atomic_load(&ranges[i].start), e = atomic_load(&ranges[i].end);
        s = s > m->start ? s : m->start;
        e = e < m->end ? e : m->end;
        if (s < e)
            raw_mprotect((void *)s, e - s, PROT_READ | PROT_WRITE);
    }
    return 1;
}

/* Gives every range protected since the last end read-write back, and forgets them. */
static void end_round(void)
{
    if (atomic_load(&nranges) > 0)
        each_mapping(give_back, NULL);
    atomic_store(&nranges, 0);
}

/* Protects part of the heap, [s, e), less the pages holding stdin's, stdout's and stderr's
 * buffers: libc fills them in user space (a fault there is harmless) but flushes them with its
 * own write(2), which would fail with EFAULT on a protected page and lose the program's output. */
static long protect_heap(uintptr_t s, uintptr_t e, long budget)
{
    uintptr_t skip[3][2];
    int n = 0;
#ifdef __GLIBC__
    FILE *streams[3] = {stdin, stdout, stderr};
    uintptr_t mask = ~((uintptr_t)page_size - 1);
    for (int i = 0; i < 3; i++) {
        uintptr_t b = (uintptr_t)streams[i]->_IO_buf_base, t = (uintptr_t)streams[i]->_IO_buf_end;
        if (!b || t <= b)
            continue;
        int j = n++;
        for (; j > 0 && skip[j - 1][0] > (b & mask); j--)
            skip[j][0] = skip[j - 1][0], skip[j][1] = skip[j - 1][1];
        skip[j][0] = b & mask, skip[j][1] = (t + (uintptr_t)page_size - 1) & mask;
    }
#endif
    long done = 0;
    for (int i = 0; i < n && s < e; i++) {
        if (skip[i][1] <= s || skip[i][0] >= e)
            continue;
        if (skip[i][0] > s)
            done += protect_outside_excluded(s, skip[i][0], budget - done);
        if (skip[i][1] > s)
            s = skip[i][1];
    }
    if (s < e)
        done += protect_outside_excluded(s, e, budget - done);
    return done;
}

static int exclude_startup(const struct mapping *m, const char *line, void *arg)
{
    (void)line, (void)arg;
    if (m->anonymous)
        exclude(m->start, m->end);
    return 1;
}

struct round {
    struct mapping prev;
    int prev_ours, prev_file;
    long budget;
    uintptr_t from, to; /* the part of the address space this pass covers */
    uintptr_t stack_here;
};

static int round_mapping(const struct mapping *m, const char *line, void *arg)
{
    struct round *r = arg;
    int adjacent = r->prev.end == m->start;
    int heap = trace_heap && strstr(line, " [heap]") != NULL;
    int eligible = (m->anonymous || heap) && m->perms[0] == 'r' && m->perms[1] == 'w' && m->perms[3] == 'p';
    int after_guard = adjacent && r->prev.perms[0] == '-' && r->prev.perms[1] == '-' && r->prev.perms[2] == '-' && !r->prev_ours;
    int after_file = adjacent && r->prev_file && !heap; /* the heap follows the program's .bss when ASLR is off */
    uintptr_t s = m->start > r->from ? m->start : r->from, e = m->end < r->to ? m->end : r->to;
    /* The heap is watched whole: the pieces a round's faults cut it into are smaller than min_bytes. */
    if (eligible && !after_guard && !after_file && (heap || m->end - m->start >= min_bytes) && s < e
        && !(r->stack_here >= m->start && r->stack_here < m->end))
        r->budget -= heap ? protect_heap(s, e, r->budget) : protect_outside_excluded(s, e, r->budget);
    r->prev = *m;
    /* The guard page is the top of a PROT_NONE mapping that a round's protection of the mapping
     * below it can merge into (the kernel joins neighbours of equal protection): whether the
     * mapping is ours is read from its last page, the one that touches the next mapping. */
    r->prev_ours = m->perms[0] == '-' && m->perms[1] == '-' && in_ranges(m->end - 1);
    r->prev_file = !m->anonymous && strchr(line, '/') != NULL;
    return r->budget > 0;
}

/* Whose turn it is to run a round. The thread that runs a round is on a CPU when it returns, so
 * where threads share CPUs (more threads than CPUs, a busy machine) it touches every page it
 * reaches before the others are scheduled again and would be first in every round. The kernel
 * gives a process's timer signal to the main thread whenever it can, so the rounds go to the
 * process's threads in turn instead: a timer expiry hands its round on (tgkill) to the next
 * thread of /proc/self/task. A thread that does not take it (the signal blocked) costs one period:
 * the next expiry runs its round where it lands and hands on the one after. */
static atomic_long turn, handed;
/* Timer expiries that ran no round: a round (or the end of one) under way, or an interposed call
 * in flight (its buffer must stay open), or a mapping change under way. */
static atomic_long skipped_busy, skipped_in_flight;
static _Atomic pid_t handed_to; /* the thread the last expiry handed its round to, until it runs it */

/* The thread numbered N (modulo their number) in /proc/self/task, or 0 if it cannot be read. */
static pid_t nth_thread(long n)
{
    enum { MAX_TIDS = 1024 };
    pid_t tids[MAX_TIDS];
    int count = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0)
            break;
        for (long at = 0; at < got;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, buf + at + 16, sizeof reclen);
            const char *name = buf + at + 19;
            long tid = 0;
            for (; *name >= '0' && *name <= '9'; name++)
                tid = tid * 10 + (*name - '0');
            if (tid > 0 && *name == '\0' && count < MAX_TIDS)
                tids[count++] = (pid_t)tid;
            at += reclen;
        }
    }
    syscall(SYS_close, fd);
    return count ? tids[n % count] : 0;
}

/* A timer expiry: 1 if its round was handed on to another thread, 0 if it is to run here. */
static int hand_on(int sig)
{
    if (atomic_exchange(&handed_to, 0) != 0)
        return 0; /* the last one was not taken: run this one here */
    pid_t next = nth_thread(atomic_fetch_add(&turn, 1));
    if (next <= 0 || next == my_tid())
        return 0;
    atomic_store(&handed_to, next);
    if (syscall(SYS_tgkill, getpid(), next, sig) == 0)
        return 1;
    atomic_store(&handed_to, 0); /* it has just ended */
    return 0;
}

/* One round: protect up to max_pages pages, from the cursor up, then from the bottom to it. */
static void round_handler(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    int saved_errno = errno;
    int was_handed = info && info->si_code == SI_TKILL && info->si_pid == getpid();
    if (was_handed)
        atomic_store(&handed_to, 0);
    else if (hand_on(sig))
        goto out;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&busy, &idle, 1)) {
        atomic_fetch_add(&skipped_busy, 1);
        goto out;
    }
    if (!atomic_load(&window_open))
        goto unlock;
    if (atomic_load(&in_flight) > 0) {
        atomic_fetch_add(&skipped_in_flight, 1);
        goto unlock;
    }
    if (atomic_load(&opened_ns) < 0) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        atomic_store(&opened_ns, (now.tv_sec - start_time.tv_sec) * 1000000000LL + (now.tv_nsec - start_time.tv_nsec));
    }
    uint64_t pause = control ? atomic_load(&control->pause) : 0;
    if (pause) {
        end_round();
        atomic_store(&control->paused, pause);
        goto unlock;
    }
    struct round r;
    memset(&r, 0, sizeof r);
    r.budget = max_pages;
    r.stack_here = (uintptr_t)&r;
    uintptr_t start_cursor = cursor;
    take_cuts();
    r.from = start_cursor, r.to = UINTPTR_MAX;
    each_mapping(round_mapping, &r);
    if (r.budget > 0 && start_cursor > 0) {
        memset(&r.prev, 0, sizeof r.prev);
        r.prev_ours = r.prev_file = 0;
        r.from = 0, r.to = start_cursor;
        each_mapping(round_mapping, &r);
    }
    if (r.budget > 0)
        cursor = 0; /* everything was covered: start from the bottom next time */
    atomic_fetch_add(&rounds, 1);
    if (was_handed)
        atomic_fetch_add(&handed, 1);
unlock:
    atomic_store(&busy, 0);
out:
    errno = saved_errno;
}

/* ---- the program's SIGSEGV, chained ---- */

static void to_program(int sig, siginfo_t *info, void *ctx)
{
    struct sigaction pa = program_segv;
    int sent = info->si_code <= 0; /* kill, tgkill, raise: not a fault */
    if (pa.sa_handler == SIG_IGN && sent)
        return;
    if (pa.sa_handler == SIG_DFL || pa.sa_handler == SIG_IGN) {
        /* The default action: a fault replays and the kernel kills; a sent signal is sent again. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        real_sigaction(SIGSEGV, &dfl, NULL);
        if (sent)
            syscall(SYS_tgkill, getpid(), my_tid(), SIGSEGV);
        return;
    }
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &pa.sa_mask, &old);
    if (pa.sa_flags & SA_RESETHAND)
        program_segv.sa_handler = SIG_DFL;
    if (pa.sa_flags & SA_SIGINFO)
        pa.sa_sigaction(sig, info, ctx);
    else
        pa.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void segv_handler(int sig, siginfo_t *info, void *ctx)
{
    int saved_errno = errno;
    uintptr_t addr = (uintptr_t)info->si_addr;
    if (enabled && info->si_code == SEGV_ACCERR && in_ranges(addr)) {
        uintptr_t page = addr & ~((uintptr_t)page_size - 1);
        raw_mprotect((void *)page, (size_t)page_size, PROT_READ | PROT_WRITE);
        count_access(my_tid(), page / (uintptr_t)page_size);
        atomic_fetch_add(&faults, 1);
        replayed = 0;
        errno = saved_errno;
        return;
    }
    if (enabled && info->si_code == SEGV_ACCERR && replayed != addr) {
        replayed = addr; /* a range another thread gave back in between: replay once */
        errno = saved_errno;
        return;
    }
    replayed = 0;
    errno = saved_errno;
    to_program(sig, info, ctx);
}

/* ---- interposed calls ---- */

static void touch(const void *buf, size_t len)
{
    if (!enabled || !buf || len == 0)
        return;
    uintptr_t p = (uintptr_t)buf & ~((uintptr_t)page_size - 1), end = (uintptr_t)buf + len;
    if (p < (uintptr_t)buf) {
        (void)*(volatile const char *)buf;
        p += (uintptr_t)page_size;
    }
    for (; p < end; p += (uintptr_t)page_size)
        (void)*(volatile const char *)p;
}

/* Enter: no round may start (or be running) until leave(). */
static void enter(void)
{
    atomic_fetch_add(&in_flight, 1);
    while (atomic_load(&busy))
        sched_yield();
}

static void leave(void) { atomic_fetch_sub(&in_flight, 1); }

/* Opens [buf, buf + len) for a call that passes it to the kernel: a round starting from now on
 * leaves its pages alone, one under way is waited for, and the pages an earlier round protected
 * are brought back. Returns the slot for close_buffer(); -1: every round is held back instead
 * (no free slot, or the tracer not started). Rounds go on elsewhere while the call waits, in a
 * read on a pipe or a socket for instance. */
static int open_buffer(const void *buf, size_t len)
{
    if (!buf || len == 0)
        return -2; /* nothing to keep open */
    if (enabled) {
        uintptr_t mask = ~((uintptr_t)page_size - 1), s = (uintptr_t)buf & mask;
        uintptr_t last = (uintptr_t)buf + (len - 1) < (uintptr_t)buf ? UINTPTR_MAX : (uintptr_t)buf + (len - 1);
        uintptr_t e = (last & mask) + (uintptr_t)page_size;
        if (e < s)
            e = UINTPTR_MAX & mask; /* the top page of the address space */
        for (int i = 0; s && i < MAX_OPEN; i++) {
            uintptr_t free_slot = 0;
            if (atomic_compare_exchange_strong(&open_start[i], &free_slot, s)) {
                atomic_store(&open_end[i], e);
                while (atomic_load(&busy))
                    sched_yield();
                touch(buf, len);
                return i;
            }
        }
    }
    enter();
    touch(buf, len);
    return -1;
}

static void close_buffer(int slot)
{
    if (slot >= 0) {
        atomic_store(&open_end[slot], 0);
        atomic_store(&open_start[slot], 0);
    } else if (slot == -1) {
        leave();
    }
}

/* The next definition of a function (libc's), looked up once. */
#define REAL(name)                                                                                  \
    static __typeof__(&name) real_##name;                                                           \
    if (!real_##name)                                                                               \
        real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name);

/* An interposed call that passes several pieces of user memory to the kernel: TOUCHING brings
 * their pages back first (the kernel would get EFAULT from a protected page), no round starts
 * until it returns, and the call's errno is the program's. */
#define INTERPOSE(type, name, params, touching, args)                                               \
    type name params                                                                                \
    {                                                                                               \
        REAL(name);                                                                                 \
        enter();                                                                                    \
        touching;                                                                                   \
        type r = real_##name args;                                                                  \
        int e = errno;                                                                              \
        leave();                                                                                    \
        errno = e;                                                                                  \
        return r;                                                                                   \
    }

/* A call with one buffer: that buffer stays open while it is in flight (see open_buffer). */
#define OPEN_BUFFER(type, name, params, buf, len, args)                                             \
    type name params                                                                                \
    {                                                                                               \
        REAL(name);                                                                                 \
        int slot = open_buffer(buf, len);                                                           \
        type r = real_##name args;                                                                  \
        int e = errno;                                                                              \
        close_buffer(slot);                                                                         \
        errno = e;                                                                                  \
        return r;                                                                                   \
    }

static void touch_iov(const struct iovec *iov, int n)
{
    if (!iov || n <= 0)
        return;
    touch(iov, sizeof *iov * (size_t)n);
    for (int i = 0; i < n; i++)
        touch(iov[i].iov_base, iov[i].iov_len);
}

static void touch_msg(const struct msghdr *msg)
{
    if (!msg)
        return;
    touch(msg, sizeof *msg);
    touch(msg->msg_name, msg->msg_namelen);
    touch_iov(msg->msg_iov, (int)msg->msg_iovlen);
    touch(msg->msg_control, msg->msg_controllen);
}

OPEN_BUFFER(ssize_t, read, (int fd, void *buf, size_t n), buf, n, (fd, buf, n))
OPEN_BUFFER(ssize_t, write, (int fd, const void *buf, size_t n), buf, n, (fd, buf, n))
OPEN_BUFFER(ssize_t, pread, (int fd, void *buf, size_t n, off_t off), buf, n, (fd, buf, n, off))
OPEN_BUFFER(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off), buf, n, (fd, buf, n, off))
INTERPOSE(ssize_t, readv, (int fd, const struct iovec *iov, int n), touch_iov(iov, n), (fd, iov, n))
INTERPOSE(ssize_t, writev, (int fd, const struct iovec *iov, int n), touch_iov(iov, n), (fd, iov, n))
OPEN_BUFFER(ssize_t, recv, (int fd, void *buf, size_t n, int flags), buf, n, (fd, buf, n, flags))
INTERPOSE(ssize_t, recvfrom, (int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *len),
          touch(buf, n); if (len) { touch(len, sizeof *len); touch(from, *len); }, (fd, buf, n, flags, from, len))
INTERPOSE(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags), touch_msg(msg), (fd, msg, flags))
OPEN_BUFFER(ssize_t, send, (int fd, const void *buf, size_t n, int flags), buf, n, (fd, buf, n, flags))
INTERPOSE(ssize_t, sendto, (int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t len),
          touch(buf, n); touch(to, len), (fd, buf, n, flags, to, len))
INTERPOSE(ssize_t, sendmsg, (int fd, const struct msghdr *msg, int flags), touch_msg(msg), (fd, msg, flags))
OPEN_BUFFER(size_t, fread, (void *buf, size_t size, size_t n, FILE *f), buf, size * n, (buf, size, n, f))
OPEN_BUFFER(size_t, fwrite, (const void *buf, size_t size, size_t n, FILE *f), buf, size * n, (buf, size, n, f))

/* glibc's pthread_create reads the attributes' CPU set (malloc'd: on the heap, which rounds protect
 * with PINLAB_PAGETRACE_HEAP; pinlab's preload library pins threads that way) while every signal
 * is blocked, where a fault on a protected page kills the program: it is read here first, and no
 * round starts until the thread is created. */
static void touch_attr(const pthread_attr_t *attr)
{
    cpu_set_t set;
    if (attr)
        (void)pthread_attr_getaffinity_np(attr, sizeof set, &set);
}

INTERPOSE(int, pthread_create, (pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg),
          touch_attr(attr); atomic_store(&window_open, window_open || !window_by_mark), (thread, attr, fn, arg))

/* The program's phase mark: the rounds start here (with PINLAB_TRACE_START=mark; a no-op otherwise). */
__attribute__((visibility("default"))) void pinlab_trace_start(void)
{
    if (window_by_mark)
        atomic_store(&window_open, 1);
}

/* The program changes its own mappings: end the round first, so that it acts on its protection. */
static void before_mapping_change(void)
{
    if (!enabled)
        return;
    atomic_fetch_add(&in_flight, 1);
    lock_rounds();
    end_round();
    atomic_store(&busy, 0);
}

#define MAPPING_CALL(ret, name, params, args)                                                 \
    ret name params                                                                                 \
    {                                                                                               \
        REAL(name);                                                                           \
        before_mapping_change();                                                                    \
        ret r = real_##name args;                                                                   \
        int e = errno;                                                                              \
        if (enabled)                                                                                \
            leave();                                                                                \
        errno = e;                                                                                  \
        return r;                                                                                   \
    }

MAPPING_CALL(int, mprotect, (void *a, size_t n, int prot), (a, n, prot))
MAPPING_CALL(int, munmap, (void *a, size_t n), (a, n))
MAPPING_CALL(int, madvise, (void *a, size_t n, int advice), (a, n, advice))

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    REAL(mremap);
    va_list ap;
    va_start(ap, flags);
    void *new_address = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
    va_end(ap);
    before_mapping_change();
    void *r = real_mremap(old, old_size, new_size, flags, new_address);
    int e = errno;
    if (enabled)
        leave();
    errno = e;
    return r;
}

void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    REAL(mmap);
    if (!(flags & MAP_FIXED))
        return real_mmap(a, n, prot, flags, fd, off); /* a new range: nothing of ours in it */
    before_mapping_change();
    void *r = real_mmap(a, n, prot, flags, fd, off);
    int e = errno;
    if (enabled)
        leave();
    errno = e;
    return r;
}

/* The program's SIGSEGV handler is remembered and called from ours. */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!real_sigaction)
        real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || !enabled)
        return real_sigaction(sig, act, old);
    if (old)
        *old = program_segv;
    if (act)
        program_segv = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* ---- start and end ---- */

static long env_long(const char *name, long fallback, long low, long high)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < low || x > high) {
        static const char msg[] = "pinlab-pagetrace: ignoring a malformed setting\n";
        syscall(SYS_write, 2, msg, sizeof msg - 1);
        return fallback;
    }
    return x;
}

__attribute__((constructor)) static void pagetrace_start(void)
{
    const char *dir = getenv("PINLAB_TRACE_DIR");
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (!dir || !*dir || strlen(dir) >= sizeof out_dir - 64 || !real_sigaction)
        return;
    strcpy(out_dir, dir);
    page_size = sysconf(_SC_PAGESIZE);
    period_ms = env_long("PINLAB_PAGETRACE_PERIOD_MS", 10, 1, 3600000);
    min_bytes = (unsigned long)env_long("PINLAB_PAGETRACE_MIN_BYTES", 65536, 1, 1L << 40);
    max_pages = env_long("PINLAB_PAGETRACE_MAX_PAGES", 65536, 1, 1L << 30);
    trace_heap = (int)env_long("PINLAB_PAGETRACE_HEAP", 0, 0, 1);
    timer_signal = (int)env_long("PINLAB_PAGETRACE_SIGNAL", SIGRTMAX - 2, SIGRTMIN, SIGRTMAX);
    table_bytes = sizeof(struct slot) << TABLE_BITS;
    ranges_bytes = sizeof(struct range) * MAX_RANGES;
    table = MAP_FAILED;
    const char *live = getenv("PINLAB_PAGETRACE_LIVE");
    if (live && *live) { /* pinlab reads the counts while the program runs (pinlab run --balance-data accessed) */
        int fd = (int)syscall(SYS_openat, AT_FDCWD, live, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == table_bytes + 4096) {
            table = (struct slot *)syscall(SYS_mmap, NULL, table_bytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (table != MAP_FAILED) {
                control = (struct control *)((char *)table + table_bytes);
                table_bytes += 4096; /* excluded from the rounds with the table */
            }
        }
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    if (table == MAP_FAILED)
        table = (struct slot *)syscall(SYS_mmap, NULL, table_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ranges = (struct range *)syscall(SYS_mmap, NULL, ranges_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED || ranges == MAP_FAILED)
        return;
    owner_pid = getpid();
    each_mapping(exclude_startup, NULL);
    exclude((uintptr_t)table, (uintptr_t)table + table_bytes);
    exclude((uintptr_t)ranges, (uintptr_t)ranges + ranges_bytes);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (real_sigaction(SIGSEGV, &sa, &program_segv) != 0)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = round_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (real_sigaction(timer_signal, &sa, NULL) != 0)
        return;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = timer_signal;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &start_time);
    long long first_ns = period_ms * 1000000LL;
    const char *start_at = getenv("PINLAB_TRACE_START");
    if (start_at && *start_at) {
        char *end;
        double seconds = strtod(start_at, &end);
        if (!strcmp(start_at, "mark"))
            window_by_mark = 1, window_open = 0;
        else if (!strcmp(start_at, "parallel"))
            window_open = 0; /* opened by the first pthread_create */
        else if (!*end && seconds >= 0 && seconds < 1e9)
            first_ns = (long long)(seconds * 1e9) > 0 ? (long long)(seconds * 1e9) : 1;
    }
    enabled = 1;
    struct itimerspec it;
    it.it_interval.tv_sec = period_ms / 1000;
    it.it_interval.tv_nsec = (period_ms % 1000) * 1000000L;
    it.it_value.tv_sec = (time_t)(first_ns / 1000000000LL);
    it.it_value.tv_nsec = (long)(first_ns % 1000000000LL);
    timer_settime(timer, 0, &it, NULL);
}

static void put(char *buf, size_t *used, size_t size, const char *s)
{
    while (*s && *used < size)
        buf[(*used)++] = *s++;
}

static void put_num(char *buf, size_t *used, size_t size, unsigned long long x, int base)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[x % (unsigned)base];
        x /= (unsigned)base;
    } while (x);
    while (n && *used < size)
        buf[(*used)++] = tmp[--n];
}

__attribute__((destructor)) static void pagetrace_end(void)
{
    if (!enabled || getpid() != owner_pid)
        return;
    timer_delete(timer);
    atomic_fetch_add(&in_flight, 1); /* no round from now on */
    lock_rounds();
    end_round();
    atomic_store(&busy, 0);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ns = (now.tv_sec - start_time.tv_sec) * 1000000000LL + (now.tv_nsec - start_time.tv_nsec);
    char path[sizeof out_dir + 64];
    size_t used = 0;
    put(path, &used, sizeof path - 1, out_dir);
    put(path, &used, sizeof path - 1, "/pagetrace-");
    put_num(path, &used, sizeof path - 1, (unsigned long long)owner_pid, 10);
    put(path, &used, sizeof path - 1, ".txt");
    path[used] = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char buf[65536];
    used = 0;
    size_t room = sizeof buf - 64;
    put(buf, &used, room, "pinlab-pagetrace 1 pid=");
    put_num(buf, &used, room, (unsigned long long)owner_pid, 10);
    put(buf, &used, room, " page=");
    put_num(buf, &used, room, (unsigned long long)page_size, 10);
    put(buf, &used, room, " period_ms=");
    put_num(buf, &used, room, (unsigned long long)period_ms, 10);
    put(buf, &used, room, " rounds=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&rounds), 10);
    put(buf, &used, room, " handed=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&handed), 10);
    put(buf, &used, room, " skipped_busy=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&skipped_busy), 10);
    put(buf, &used, room, " skipped_in_flight=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&skipped_in_flight), 10);
    put(buf, &used, room, " faults=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&faults), 10);
    put(buf, &used, room, " lost=");
    put_num(buf, &used, room, (unsigned long long)atomic_load(&lost), 10);
    put(buf, &used, room, " ns=");
    put_num(buf, &used, room, (unsigned long long)(ns > 0 ? ns : 0), 10);
    if (atomic_load(&opened_ns) >= 0) {
        put(buf, &used, room, " opened_ns=");
        put_num(buf, &used, room, (unsigned long long)atomic_load(&opened_ns), 10);
    }
    put(buf, &used, room, "\n");
    for (size_t i = 0; i < ((size_t)1 << TABLE_BITS); i++) {
        uint64_t key = atomic_load(&table[i].key);
        if (!key)
            continue;
        key -= 1;
        put_num(buf, &used, room, key & 0x3fffff, 10);
        put(buf, &used, room, " ");
        put_num(buf, &used, room, key >> 22, 16);
        put(buf, &used, room, " ");
        put_num(buf, &used, room, atomic_load(&table[i].count), 10);
        put(buf, &used, room, "\n");
        if (used > room - 128) {
            syscall(SYS_write, fd, buf, used);
            used = 0;
        }
    }
    if (used)
        syscall(SYS_write, fd, buf, used);
    syscall(SYS_close, fd);
}
