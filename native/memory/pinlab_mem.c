/* libpinlab-mem: pinlab's memory API (see native/include/pinlab_mem.h).
 *
 * Regions live in a fixed table (no allocation in the signal handler, lookups without locks):
 * API calls that change the table hold `registry`; the SIGSEGV handler only reads slots that are
 * in use and takes the region's own spin lock, since a pthread mutex may not be taken in a
 * signal handler.
 *
 * Next touch, in user space as MAMI does it: the region is protected (PROT_NONE); the first
 * access faults; the handler finds the node of the CPU it runs on (getcpu), gives the page (or
 * the whole region) its protection back and moves it there with move_pages(2) (in that order:
 * the kernel silently leaves PROT_NONE pages where they are); the access is then retried by the
 * hardware. Threads faulting at once on the same page wait on the region's lock
 * and find it already moved. System calls reading or writing an armed region would fail with
 * EFAULT instead of faulting, so the usual I/O calls are interposed: the pages they pass are
 * first moved as if the calling thread had touched them.
 */
#define _GNU_SOURCE
#include "cpulist.h"
#include "pinlab_mem.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_REGIONS 4096
#define MAX_NODES 1024
#define NODE_WORDS (MAX_NODES / (8 * sizeof(unsigned long)))
#define CHUNK 128

/* The kernel's memory policy numbers (linux/mempolicy.h), without depending on libnuma. */
#define MPOL_PREFERRED_ 1
#define MPOL_BIND_ 2
#define MPOL_INTERLEAVE_ 3
#define MPOL_MF_MOVE_ (1 << 1)

struct region {
    _Atomic int used;       /* 1 while the slot names a region */
    uintptr_t start;
    size_t size;
    int allocated;          /* pm_alloc'd (unmapped by pm_free) or registered */
    int prot;
    _Atomic pid_t owner;    /* attached thread, 0 for none */
    _Atomic int armed;      /* 0, or 1 + the next-touch granularity */
    atomic_flag lock;
    unsigned char *pending; /* PM_TOUCH_PAGE: 1 for each page still protected */
    long pending_count;
};

static struct region regions[MAX_REGIONS];
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int armed_regions;
static long page_size;
static unsigned long memory_nodes[NODE_WORDS]; /* nodes with memory */
static short memory_near[MAX_NODES];           /* nearest node with memory of each node (itself when it has memory) */
static int numa_kernel = 1;                    /* 0: mbind & co. answer ENOSYS */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct sigaction previous_segv;

static __thread char last_error[320] __attribute__((tls_model("initial-exec")));

/* ---- errors ---------------------------------------------------------------------------- */

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

static int ok(void)
{
    last_error[0] = 0;
    return PM_OK;
}

const char *pm_strerror(int code)
{
    switch (code) {
    case PM_OK: return "success";
    case PM_EINVAL: return "invalid argument";
    case PM_ENODE: return "no such NUMA node with memory";
    case PM_EALIGN: return "address not page-aligned";
    case PM_ENOTMAPPED: return "memory not mapped";
    case PM_ENOREGION: return "not the start of a region";
    case PM_EEXIST: return "region overlaps a registered one";
    case PM_ENOMEM: return "out of memory";
    case PM_EPERM: return "not permitted";
    case PM_ENOSYS: return "no NUMA support in this kernel";
    case PM_EBUSY: return "some pages could not be moved";
    case PM_ESRCH: return "no such thread";
    case PM_ESYS: return "system error";
    default: return "unknown error code";
    }
}

const char *pm_last_error(void)
{
    return last_error[0] ? last_error : "no error";
}

static int from_errno(int err, const char *what)
{
    int code = err == ENOSYS ? PM_ENOSYS : err == EPERM || err == EACCES ? PM_EPERM : err == ENOMEM ? PM_ENOMEM
             : err == EFAULT ? PM_ENOTMAPPED : err == ESRCH ? PM_ESRCH : PM_ESYS;
    return fail(code, "%s: %s", what, strerror(err));
}

/* ---- machine ---------------------------------------------------------------------------- */

/* One item of a node list into the mask; nodes past MAX_NODES are not pinlab's to place. */
static int list_item(long first, long last, void *arg)
{
    unsigned long *mask = arg;
    for (long n = first; n <= last && n < MAX_NODES; n++)
        mask[n / (8 * sizeof(unsigned long))] |= 1UL << (n % (8 * sizeof(unsigned long)));
    return 0;
}

/* A node list of /sys ("0-1,3\n") into mask: the items before the newline (or anything else that
 * is not a list) count. */
static void parse_list(const char *text, unsigned long *mask)
{
    pinlab_cpulist_items(text, NULL, LONG_MAX, list_item, mask);
}

static int read_text(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return (int)n;
}

static void open_published(void);
static int has_memory(int node);

/* For a node without memory (CPUs only), the node with memory at the least distance (the lowest
 * numbered of equals), where the kernel's local allocation from its CPUs goes too; a table, so
 * that the signal handler may look it up. */
static void find_nearest_memory(void)
{
    for (int node = 0; node < MAX_NODES; node++) {
        memory_near[node] = (short)node;
        if (has_memory(node))
            continue;
        char path[96], text[8192];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/distance", node);
        if (read_text(path, text, sizeof text) <= 0)
            continue;
        long best = -1;
        char *p = text, *end;
        for (int other = 0; other < MAX_NODES; other++, p = end) {
            long d = strtol(p, &end, 10);
            if (end == p)
                break;
            if (has_memory(other) && (best < 0 || d < best)) {
                best = d;
                memory_near[node] = (short)other;
            }
        }
    }
}

static int nearest_memory(int node)
{
    return node >= 0 && node < MAX_NODES ? memory_near[node] : node;
}

static void initialise(void)
{
    page_size = sysconf(_SC_PAGESIZE);
    char text[4096];
    if (read_text("/sys/devices/system/node/has_memory", text, sizeof text) > 0 ||
        read_text("/sys/devices/system/node/online", text, sizeof text) > 0)
        parse_list(text, memory_nodes);
    else
        memory_nodes[0] = 1; /* no NUMA in the kernel: everything is node 0 */
    if (syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0) != 0 && errno == ENOSYS)
        numa_kernel = 0;
    find_nearest_memory();
    open_published();
}

static void init(void)
{
    pthread_once(&once, initialise);
}

/* ---- the region table, published to pinlab ------------------------------------------------ */

/* When PINLAB_MEM_ATTACH names a file pinlab made (pinlab run --balance, pinlab autopin
 * --migrate-pages attached), the library keeps in it where each region is and which thread it is
 * attached to, so that pinlab can move a thread's data along with the thread from outside.
 * Layout, in the host's byte order (read by pinlab.memory.attached):
 *   header, 16 bytes: "PLMATT1" and a NUL; int32 pid of the process that claimed the file (the
 *     first to load the library: later processes, forked or exec'ed, leave it alone); int32 slots
 *   slot i, 32 bytes, mirrors regions[i]: uint64 seq (odd while the slot is being written),
 *     uint64 start, uint64 size, int32 tid attached (0: none), int32 used (1: a region) */
#define ATTACH_MAGIC "PLMATT1"

struct attach_slot {
    _Atomic uint64_t seq;
    uint64_t start, size;
    int32_t tid, used;
};

struct attach_table {
    char magic[8];
    _Atomic int32_t pid;
    int32_t slots;
    struct attach_slot slot[MAX_REGIONS];
};

static struct attach_table *published;
static pid_t published_pid;
static atomic_flag publish_lock = ATOMIC_FLAG_INIT;

static void open_published(void)
{
    const char *path = getenv("PINLAB_MEM_ATTACH");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size == (off_t)sizeof(struct attach_table))
        p = mmap(NULL, sizeof(struct attach_table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    struct attach_table *t = p;
    int32_t unclaimed = 0;
    if (memcmp(t->magic, ATTACH_MAGIC, 8) != 0 || t->slots != MAX_REGIONS
        || !atomic_compare_exchange_strong(&t->pid, &unclaimed, (int32_t)getpid())) {
        munmap(p, sizeof(struct attach_table));
        return;
    }
    published_pid = getpid();
    published = t;
}

/* Copies regions[i] to the published table (no-op without one, or in a forked child). */
static void publish(int i)
{
    if (!published || getpid() != published_pid)
        return;
    struct region *r = &regions[i];
    struct attach_slot *s = &published->slot[i];
    while (atomic_flag_test_and_set_explicit(&publish_lock, memory_order_acquire))
        sched_yield();
    atomic_fetch_add(&s->seq, 1);
    s->used = atomic_load(&r->used);
    s->start = r->start;
    s->size = r->size;
    s->tid = atomic_load(&r->owner);
    atomic_fetch_add(&s->seq, 1);
    atomic_flag_clear_explicit(&publish_lock, memory_order_release);
}

static int has_memory(int node)
{
    return node >= 0 && node < MAX_NODES && (memory_nodes[node / (8 * sizeof(unsigned long))] >> (node % (8 * sizeof(unsigned long)))) & 1;
}

static int check_node(int node)
{
    if (has_memory(node))
        return PM_OK;
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d", node);
    struct stat st;
    if (node >= 0 && stat(path, &st) == 0)
        return fail(PM_ENODE, "node %d has no memory (a CPU-only node); choose a node with memory", node);
    return fail(PM_ENODE, "node %d does not exist", node);
}

int pm_nodes(int *count)
{
    init();
    if (!count)
        return fail(PM_EINVAL, "pm_nodes: count is NULL");
    int top = -1;
    for (int n = 0; n < MAX_NODES; n++)
        if (has_memory(n))
            top = n;
    *count = top + 1;
    return ok();
}

int pm_node_of_cpu(int cpu, int *node)
{
    init();
    if (!node)
        return fail(PM_EINVAL, "pm_node_of_cpu: node is NULL");
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d", cpu);
    DIR *dir = cpu >= 0 ? opendir(path) : NULL;
    if (!dir)
        return fail(PM_EINVAL, "CPU %d does not exist", cpu);
    *node = 0; /* a kernel without NUMA lists no node directory: node 0 */
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (strncmp(entry->d_name, "node", 4) == 0 && entry->d_name[4] >= '0' && entry->d_name[4] <= '9')
            *node = atoi(entry->d_name + 4);
    closedir(dir);
    return ok();
}

int pm_current_node(int *node)
{
    init();
    unsigned cpu = 0, n = 0;
    if (!node)
        return fail(PM_EINVAL, "pm_current_node: node is NULL");
    if (syscall(SYS_getcpu, &cpu, &n, NULL) != 0)
        return from_errno(errno, "getcpu");
    *node = (int)n;
    return ok();
}

int pm_free_memory(int node, unsigned long long *free_bytes, unsigned long long *total_bytes)
{
    init();
    int rc = check_node(node);
    if (rc)
        return rc;
    char path[96], text[8192];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", node);
    if (read_text(path, text, sizeof text) <= 0) {
        if (node != 0)
            return fail(PM_ENODE, "node %d: %s is unreadable", node, path);
        if (read_text("/proc/meminfo", text, sizeof text) <= 0) /* no NUMA: the machine's memory */
            return fail(PM_ESYS, "neither %s nor /proc/meminfo is readable", path);
    }
    unsigned long long free_kb = 0, total_kb = 0;
    char *p;
    if ((p = strstr(text, "MemFree:")))
        free_kb = strtoull(p + 8, NULL, 10);
    if ((p = strstr(text, "MemTotal:")))
        total_kb = strtoull(p + 9, NULL, 10);
    if (free_bytes)
        *free_bytes = free_kb * 1024;
    if (total_bytes)
        *total_bytes = total_kb * 1024;
    return ok();
}

/* ---- system calls ------------------------------------------------------------------------ */

static long sys_mbind(void *addr, size_t len, int mode, const unsigned long *mask, unsigned flags)
{
    return syscall(SYS_mbind, addr, len, mode, mask, mask ? (unsigned long)MAX_NODES + 1 : 0UL, flags);
}

/* Move the n pages listed (n <= CHUNK; the list is reused) to node; pages not yet touched are
 * skipped (they are not anywhere). The kernel may leave a page where it is for the moment (one
 * just faulted in and not yet on the LRU lists, one locked by another thread): such pages are
 * tried again, twice. Pages must be accessible: the kernel does not move PROT_NONE pages and says
 * nothing. move_pages(2) without MPOL_MF_MOVE_ALL moves only pages no other process maps (EACCES
 * otherwise, even for root): with `private_copy`, a page refused so is written (an atomic add of
 * nothing, contents unchanged), which gives this process its own copy when the sharing is
 * copy-on-write after fork, and tried again; shared memory stays shared and is refused.
 * Async-signal-safe: stack arrays and the raw system call. Returns the pages left behind, the
 * last reason in *err. */
static long move_list(void **pages, size_t n, int node, int *err, int private_copy)
{
    int nodes[CHUNK], status[CHUNK];
    for (size_t i = 0; i < n; i++)
        nodes[i] = node;
    for (int attempt = 0; n > 0; attempt++) {
        long left = syscall(SYS_move_pages, 0, n, pages, nodes, status, MPOL_MF_MOVE_);
        if (left < 0) {
            *err = errno;
            return (long)n;
        }
        /* A positive answer counts pages not moved, whose status may still name the target. */
        if (left > 0 && syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) {
            *err = errno;
            return left;
        }
        size_t again = 0;
        for (size_t i = 0; i < n; i++) {
            int stuck = status[i] >= 0 ? status[i] != node : status[i] != -ENOENT && status[i] != -EFAULT;
            if (stuck) {
                *err = status[i] < 0 ? -status[i] : EBUSY;
                if (status[i] == -EACCES && private_copy)
                    __atomic_fetch_add((volatile char *)pages[i], (char)0, __ATOMIC_RELAXED);
                pages[again++] = pages[i];
            }
        }
        if (again == 0 || attempt == 2)
            return (long)again;
        n = again;
    }
    return 0;
}

/* move_list over [start, start+len). */
static long move_range(uintptr_t start, size_t len, int node, int *err, int private_copy)
{
    void *pages[CHUNK];
    long failed = 0;
    size_t count = len / (size_t)page_size;
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        for (size_t i = 0; i < n; i++)
            pages[i] = (void *)(start + (done + i) * (size_t)page_size);
        failed += move_list(pages, n, node, err, private_copy);
    }
    return failed;
}

/* ---- the region table --------------------------------------------------------------------- */

static struct region *find_start(const void *addr)
{
    for (int i = 0; i < MAX_REGIONS; i++)
        if (atomic_load(&regions[i].used) && regions[i].start == (uintptr_t)addr)
            return &regions[i];
    return NULL;
}

static struct region *find_containing(uintptr_t addr)
{
    for (int i = 0; i < MAX_REGIONS; i++)
        if (atomic_load(&regions[i].used) && addr - regions[i].start < regions[i].size)
            return &regions[i];
    return NULL;
}

static int add_region(uintptr_t start, size_t size, int allocated, int prot)
{
    for (int i = 0; i < MAX_REGIONS; i++)
        if (atomic_load(&regions[i].used) && start < regions[i].start + regions[i].size && regions[i].start < start + size)
            return fail(PM_EEXIST, "%#lx-%#lx overlaps the region at %#lx", (unsigned long)start, (unsigned long)(start + size),
                        (unsigned long)regions[i].start);
    for (int i = 0; i < MAX_REGIONS; i++) {
        struct region *r = &regions[i];
        if (!atomic_load(&r->used)) {
            r->start = start;
            r->size = size;
            r->allocated = allocated;
            r->prot = prot;
            atomic_store(&r->owner, 0);
            atomic_store(&r->armed, 0);
            atomic_flag_clear(&r->lock);
            r->pending = NULL;
            r->pending_count = 0;
            atomic_store(&r->used, 1);
            publish(i);
            return PM_OK;
        }
    }
    return fail(PM_ENOMEM, "more than %d regions at once", MAX_REGIONS);
}

static void region_lock(struct region *r)
{
    while (atomic_flag_test_and_set_explicit(&r->lock, memory_order_acquire))
        sched_yield();
}

static void region_unlock(struct region *r)
{
    atomic_flag_clear_explicit(&r->lock, memory_order_release);
}

/* Give an armed region its protection back without moving anything (held: registry). */
static void disarm(struct region *r)
{
    region_lock(r);
    if (atomic_load(&r->armed)) {
        mprotect((void *)r->start, r->size, r->prot);
        atomic_store(&r->armed, 0);
        atomic_fetch_sub(&armed_regions, 1);
    }
    unsigned char *pending = r->pending;
    r->pending = NULL;
    r->pending_count = 0;
    region_unlock(r);
    free(pending); /* after the lock: a thread faulting inside malloc may be waiting for it */
}

/* ---- allocation ----------------------------------------------------------------------------- */

static int node_mask(const int *nodes, int nnodes, unsigned long *mask, int all_if_none)
{
    memset(mask, 0, NODE_WORDS * sizeof(unsigned long));
    if (nnodes == 0 && all_if_none) {
        memcpy(mask, memory_nodes, NODE_WORDS * sizeof(unsigned long));
        return PM_OK;
    }
    if (nnodes < 1 || !nodes)
        return fail(PM_EINVAL, "this policy needs at least one node");
    for (int i = 0; i < nnodes; i++) {
        int rc = check_node(nodes[i]);
        if (rc)
            return rc;
        mask[nodes[i] / (8 * sizeof(unsigned long))] |= 1UL << (nodes[i] % (8 * sizeof(unsigned long)));
    }
    return PM_OK;
}

/* Apply a policy to [p, p+len); on a kernel without NUMA, node 0 alone is no policy at all. */
static int apply_policy(void *p, size_t len, int mode, const unsigned long *mask)
{
    if (!numa_kernel) {
        for (size_t w = 0; w < NODE_WORDS; w++)
            if (mask[w] & ~(w == 0 ? 1UL : 0UL))
                return fail(PM_ENOSYS, "this kernel has no NUMA support: only node 0 exists");
        return PM_OK;
    }
    if (sys_mbind(p, len, mode, mask, 0) != 0)
        return from_errno(errno, "mbind");
    return PM_OK;
}

int pm_alloc(void **out, size_t size, int policy, const int *nodes, int nnodes)
{
    init();
    if (!out)
        return fail(PM_EINVAL, "pm_alloc: out is NULL");
    *out = NULL;
    if (size == 0)
        return fail(PM_EINVAL, "pm_alloc: size 0");
    if (policy < PM_FIRST_TOUCH || policy > PM_LOCAL)
        return fail(PM_EINVAL, "pm_alloc: unknown policy %d (PM_FIRST_TOUCH, PM_BIND, PM_INTERLEAVE or PM_LOCAL)", policy);
    if (nnodes < 0)
        return fail(PM_EINVAL, "pm_alloc: nnodes %d < 0", nnodes);
    if (nnodes > 0 && (policy == PM_FIRST_TOUCH || policy == PM_LOCAL))
        return fail(PM_EINVAL, "pm_alloc: %s takes no nodes (%d given): use PM_BIND or PM_INTERLEAVE to choose nodes, or pass NULL, 0",
                    policy == PM_LOCAL ? "PM_LOCAL" : "PM_FIRST_TOUCH", nnodes);
    unsigned long mask[NODE_WORDS];
    int rc = PM_OK, local = -1;
    if (policy == PM_BIND)
        rc = node_mask(nodes, nnodes, mask, 0);
    else if (policy == PM_INTERLEAVE)
        rc = node_mask(nodes, nnodes, mask, 1);
    else if (policy == PM_LOCAL && (rc = pm_current_node(&local)) == PM_OK) {
        local = nearest_memory(local); /* from a CPU-only node: the nearest memory, as the kernel's local allocation */
        rc = node_mask(&local, 1, mask, 0);
    }
    if (rc)
        return rc;
    size_t len = (size + (size_t)page_size - 1) / (size_t)page_size * (size_t)page_size;
    if (len < size)
        return fail(PM_ENOMEM, "pm_alloc: %zu bytes cannot be mapped", size);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return from_errno(errno, "mmap");
    if (policy != PM_FIRST_TOUCH && (rc = apply_policy(p, len, policy == PM_INTERLEAVE ? MPOL_INTERLEAVE_ : MPOL_BIND_, mask))) {
        munmap(p, len);
        return rc;
    }
    if (policy == PM_LOCAL)
        for (size_t off = 0; off < len; off += (size_t)page_size)
            ((volatile char *)p)[off] = 0; /* placed now, by this thread */
    pthread_mutex_lock(&registry);
    rc = add_region((uintptr_t)p, len, 1, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&registry);
    if (rc) {
        munmap(p, len);
        return rc;
    }
    *out = p;
    return ok();
}

/* The protection of [start, end) from /proc/self/maps: PM_ENOTMAPPED for a hole, -1 in *prot
 * when the mappings differ. */
static int mapped_prot(uintptr_t start, uintptr_t end, int *prot)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return from_errno(errno, "/proc/self/maps");
    char line[512];
    uintptr_t covered = start;
    *prot = -2;
    while (covered < end && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= covered)
            continue;
        if (lo > covered)
            break;
        int p = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
        *prot = *prot == -2 || *prot == p ? p : -1;
        covered = hi;
    }
    fclose(maps);
    if (covered < end)
        return fail(PM_ENOTMAPPED, "%#lx-%#lx is not mapped in this process (hole at %#lx)", (unsigned long)start, (unsigned long)end,
                    (unsigned long)covered);
    return PM_OK;
}

int pm_register(void *addr, size_t size)
{
    init();
    if (!addr || size == 0)
        return fail(PM_EINVAL, "pm_register: %s", addr ? "size 0" : "NULL address");
    if ((uintptr_t)addr % (uintptr_t)page_size)
        return fail(PM_EALIGN, "%p is not page-aligned (pages of %ld bytes): align it, e.g. with aligned_alloc or mmap", addr, page_size);
    size_t len = (size + (size_t)page_size - 1) / (size_t)page_size * (size_t)page_size;
    if (len < size || (uintptr_t)addr + len < (uintptr_t)addr)
        return fail(PM_EINVAL, "pm_register: %zu bytes from %p pass the end of the address space", size, addr);
    int prot, rc = mapped_prot((uintptr_t)addr, (uintptr_t)addr + len, &prot);
    if (rc)
        return rc;
    pthread_mutex_lock(&registry);
    rc = add_region((uintptr_t)addr, len, 0, prot); /* -1 for mixed protections: never armed */
    pthread_mutex_unlock(&registry);
    return rc ? rc : ok();
}

static int lookup(const void *addr, struct region **out)
{
    init();
    struct region *r = find_start(addr);
    if (!r)
        return fail(PM_ENOREGION, "%p is not the start of a region (pm_alloc or pm_register it first)", addr);
    *out = r;
    return PM_OK;
}

int pm_free(void *addr)
{
    struct region *r;
    pthread_mutex_lock(&registry);
    int rc = lookup(addr, &r);
    if (rc == PM_OK) {
        disarm(r);
        if (r->allocated)
            munmap((void *)r->start, r->size);
        atomic_store(&r->used, 0);
        publish((int)(r - regions));
    }
    pthread_mutex_unlock(&registry);
    return rc ? rc : ok();
}

int pm_region_size(const void *addr, size_t *size)
{
    struct region *r;
    int rc = lookup(addr, &r);
    if (rc)
        return rc;
    if (!size)
        return fail(PM_EINVAL, "pm_region_size: size is NULL");
    *size = r->size;
    return ok();
}

/* ---- attachment ----------------------------------------------------------------------------- */

static int thread_alive(pid_t tid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return stat(path, &st) == 0;
}

static int check_tid(pid_t *tid)
{
    if (*tid == 0)
        *tid = (pid_t)syscall(SYS_gettid);
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)*tid);
    if (*tid < 0 || stat(path, &st) != 0)
        return fail(PM_ESRCH, "thread %d is not a thread of this process", (int)*tid);
    return PM_OK;
}

int pm_attach(void *addr, pid_t tid)
{
    struct region *r;
    int rc = lookup(addr, &r);
    if (rc || (rc = check_tid(&tid)))
        return rc;
    atomic_store(&r->owner, tid);
    publish((int)(r - regions));
    return ok();
}

int pm_detach(void *addr)
{
    struct region *r;
    int rc = lookup(addr, &r);
    if (rc)
        return rc;
    atomic_store(&r->owner, 0);
    publish((int)(r - regions));
    return ok();
}

int pm_attached(const void *addr, pid_t *tid)
{
    struct region *r;
    int rc = lookup(addr, &r);
    if (rc)
        return rc;
    if (!tid)
        return fail(PM_EINVAL, "pm_attached: tid is NULL");
    pid_t owner = atomic_load(&r->owner);
    if (owner && !thread_alive(owner)) { /* the thread has exited: the region is attached to nothing */
        pid_t expected = owner;
        if (atomic_compare_exchange_strong(&r->owner, &expected, 0))
            publish((int)(r - regions));
        owner = 0;
    }
    *tid = owner;
    return ok();
}

int pm_attached_bytes(pid_t tid, size_t *bytes)
{
    init();
    if (!bytes)
        return fail(PM_EINVAL, "pm_attached_bytes: bytes is NULL");
    if (tid == 0)
        tid = (pid_t)syscall(SYS_gettid);
    size_t total = 0;
    if (thread_alive(tid)) /* an exited thread has nothing attached any more */
        for (int i = 0; i < MAX_REGIONS; i++)
            if (atomic_load(&regions[i].used) && atomic_load(&regions[i].owner) == tid)
                total += regions[i].size;
    *bytes = total;
    return ok();
}

/* ---- migration ------------------------------------------------------------------------------ */

static int migrate_region(struct region *r, int node)
{
    disarm(r);
    int err = 0;
    long failed = move_range(r->start, r->size, node, &err, r->prot >= 0 && (r->prot & PROT_WRITE));
    if (numa_kernel) {
        unsigned long mask[NODE_WORDS] = {0};
        mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
        sys_mbind((void *)r->start, r->size, MPOL_PREFERRED_, mask, 0); /* pages touched later go there too */
    }
    if (failed && err == ENOSYS && node == 0)
        return PM_OK; /* no NUMA: everything is on node 0 already */
    if (failed)
        return fail(err == EACCES || err == EPERM ? PM_EPERM : PM_EBUSY,
                    "%ld of %zu pages of %#lx could not be moved to node %d: %s%s", failed, r->size / (size_t)page_size,
                    (unsigned long)r->start, node, strerror(err),
                    err == EACCES ? " (memory another process maps too, as shared memory is, moves only from a process that "
                                    "maps it alone: this library moves a process's own pages, whatever its privileges)" : "");
    return PM_OK;
}

int pm_migrate(void *addr, int node)
{
    struct region *r;
    pthread_mutex_lock(&registry);
    int rc = lookup(addr, &r);
    if (rc == PM_OK && (rc = check_node(node)) == PM_OK)
        rc = migrate_region(r, node);
    pthread_mutex_unlock(&registry);
    return rc ? rc : ok();
}

int pm_move_thread(pid_t tid, int cpu)
{
    init();
    int node, rc = check_tid(&tid);
    if (rc || (rc = pm_node_of_cpu(cpu, &node)))
        return rc;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(tid, sizeof set, &set) != 0)
        return from_errno(errno, "sched_setaffinity");
    if (!has_memory(node))
        return ok(); /* a CPU-only node: its data stays where it is */
    pthread_mutex_lock(&registry);
    for (int i = 0; i < MAX_REGIONS && rc == PM_OK; i++)
        if (atomic_load(&regions[i].used) && atomic_load(&regions[i].owner) == tid)
            rc = migrate_region(&regions[i], node);
    pthread_mutex_unlock(&registry);
    return rc ? rc : ok();
}

/* ---- next touch ----------------------------------------------------------------------------- */

static _Atomic long touch_moved, touch_failed, fallback_regions, fallback_pages;
static _Atomic int touch_errno;

static void count_touch(long pages, long failed, int err)
{
    atomic_fetch_add(&touch_moved, pages - failed);
    if (failed) {
        atomic_fetch_add(&touch_failed, failed);
        atomic_store(&touch_errno, err);
    }
}

int pm_next_touch_stats(long *moved, long *failed, int *last_errno)
{
    if (moved)
        *moved = atomic_load(&touch_moved);
    if (failed)
        *failed = atomic_load(&touch_failed);
    if (last_errno)
        *last_errno = atomic_load(&touch_errno);
    return ok();
}

int pm_next_touch_fallbacks(long *regions, long *pages)
{
    if (regions)
        *regions = atomic_load(&fallback_regions);
    if (pages)
        *pages = atomic_load(&fallback_pages);
    return ok();
}

/* The whole region given its protection back, nothing left pending (held: the region's lock).
 * One mprotect of the whole region also merges the mappings page-by-page unprotecting split it
 * into. */
static void settle(struct region *r)
{
    mprotect((void *)r->start, r->size, r->prot);
    r->pending_count = 0;
    if (atomic_load(&r->armed)) {
        atomic_store(&r->armed, 0);
        atomic_fetch_sub(&armed_regions, 1);
    }
}

/* Pages never touched are nowhere yet: the region prefers `node` from now on, so that they fault
 * in there. */
static void prefer(struct region *r, unsigned node)
{
    unsigned long mask[NODE_WORDS] = {0};
    mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
    if (numa_kernel)
        sys_mbind((void *)r->start, r->size, MPOL_PREFERRED_, mask, 0);
}

/* Unprotecting one page failed: every page-by-page unprotect splits a mapping, and the kernel
 * allows a process vm.max_map_count of them (ENOMEM past it). The region falls back to region
 * granularity: its pages still pending move now to the node of this toucher, and the fallback is
 * counted (pm_next_touch_fallbacks) along with what the kernel did with those pages. */
static void fall_back(struct region *r, size_t index, unsigned node)
{
    long pending = r->pending_count, failed = 0;
    int err = 0;
    r->pending[index] = 1; /* still to move, with the rest */
    settle(r);
    prefer(r, node);
    void *pages[CHUNK];
    size_t n = 0, count = r->size / (size_t)page_size;
    for (size_t i = 0; i < count; i++) {
        if (r->pending[i]) {
            r->pending[i] = 0;
            pages[n++] = (void *)(r->start + i * (size_t)page_size);
        }
        if (n == CHUNK || (n && i + 1 == count)) {
            failed += move_list(pages, n, (int)node, &err, 1);
            n = 0;
        }
    }
    atomic_fetch_add(&fallback_regions, 1);
    atomic_fetch_add(&fallback_pages, pending);
    count_touch(pending, failed, err);
}

/* Move what the touch of page `index` of r (armed) asks for, from the calling thread.
 * Async-signal-safe. */
static void resolve(struct region *r, size_t index)
{
    region_lock(r);
    int armed = atomic_load(&r->armed);
    if (armed && atomic_load(&r->used) && index < r->size / (size_t)page_size) {
        unsigned node = 0, cpu = 0;
        int err = 0;
        syscall(SYS_getcpu, &cpu, &node, NULL);
        node = (unsigned)nearest_memory((int)node); /* a toucher on a CPU-only node: the nearest memory */
        if (armed == 1 + PM_TOUCH_REGION) {
            /* Accessible first (the kernel does not move PROT_NONE pages); a thread touching the
             * region meanwhile waits in the kernel while its page moves. */
            settle(r);
            prefer(r, node);
            long failed = move_range(r->start, r->size, (int)node, &err, 1);
            count_touch((long)(r->size / (size_t)page_size), failed, err);
        } else if (r->pending[index]) {
            uintptr_t page = r->start + index * (size_t)page_size;
            r->pending[index] = 0;
            if (mprotect((void *)page, (size_t)page_size, r->prot) != 0) {
                fall_back(r, index, node);
            } else {
                /* A page never touched has no place to move from: a write of nothing brings it in
                 * here (the toucher's node, or the region's policy), then it is moved here. */
                __atomic_fetch_or((volatile char *)page, (char)0, __ATOMIC_RELAXED);
                long failed = move_range(page, (size_t)page_size, (int)node, &err, 1);
                count_touch(1, failed, err);
                if (--r->pending_count == 0)
                    settle(r);
            }
        }
    }
    region_unlock(r);
}

static __thread uintptr_t last_fault __attribute__((tls_model("initial-exec")));
static __thread unsigned repeats __attribute__((tls_model("initial-exec")));

static void on_segv(int sig, siginfo_t *info, void *context)
{
    int saved = errno;
    uintptr_t addr = (uintptr_t)info->si_addr;
    struct region *r = info->si_code == SEGV_ACCERR ? find_containing(addr) : NULL;
    /* A fault on a page another thread has just moved is retried; the same address faulting over
     * and over is a real fault (the program protected the memory itself). */
    repeats = addr == last_fault ? repeats + 1 : 0;
    last_fault = addr;
    if (r && repeats < 64) {
        if (atomic_load(&r->armed))
            resolve(r, (addr - r->start) / (size_t)page_size);
        errno = saved;
        return;
    }
    if (previous_segv.sa_flags & SA_SIGINFO && previous_segv.sa_sigaction) {
        previous_segv.sa_sigaction(sig, info, context);
    } else if (previous_segv.sa_handler == SIG_IGN || previous_segv.sa_handler == SIG_DFL) {
        signal(sig, SIG_DFL); /* the access is retried and kills the program as it would have */
        if (info->si_code <= 0)
            raise(sig); /* sent by kill or raise: there is no access to retry */
    } else {
        previous_segv.sa_handler(sig);
    }
    errno = saved;
}

static int install_handler(void)
{
    static int installed;
    if (installed)
        return PM_OK;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&action.sa_mask); /* no other handler runs while a region lock is held here */
    if (sigaction(SIGSEGV, &action, &previous_segv) != 0)
        return from_errno(errno, "sigaction(SIGSEGV)");
    installed = 1;
    return PM_OK;
}

int pm_migrate_on_next_touch(void *addr, int granularity)
{
    struct region *r;
    if (granularity != PM_TOUCH_PAGE && granularity != PM_TOUCH_REGION)
        return fail(PM_EINVAL, "granularity %d: PM_TOUCH_PAGE or PM_TOUCH_REGION", granularity);
    pthread_mutex_lock(&registry);
    int rc = lookup(addr, &r);
    if (rc == PM_OK && r->prot != (PROT_READ | PROT_WRITE))
        rc = fail(PM_EINVAL, "next touch needs a readable and writable region (%p is not)", addr);
    if (rc == PM_OK)
        rc = install_handler();
    if (rc == PM_OK) {
        disarm(r);
        size_t count = r->size / (size_t)page_size;
        if (granularity == PM_TOUCH_PAGE && !(r->pending = malloc(count))) {
            rc = fail(PM_ENOMEM, "no memory for %zu page flags", count);
        } else {
            if (r->pending)
                memset(r->pending, 1, count);
            r->pending_count = (long)count;
            region_lock(r);
            atomic_fetch_add(&armed_regions, 1);
            atomic_store(&r->armed, 1 + granularity);
            if (mprotect((void *)r->start, r->size, PROT_NONE) != 0) {
                int err = errno;
                mprotect((void *)r->start, r->size, r->prot); /* a part may have been protected */
                atomic_store(&r->armed, 0);
                atomic_fetch_sub(&armed_regions, 1);
                rc = from_errno(err, "mprotect");
            }
            region_unlock(r);
        }
    }
    pthread_mutex_unlock(&registry);
    return rc ? rc : ok();
}

int pm_next_touch_pending(const void *addr, long *pages)
{
    struct region *r;
    int rc = lookup(addr, &r);
    if (rc)
        return rc;
    if (!pages)
        return fail(PM_EINVAL, "pm_next_touch_pending: pages is NULL");
    region_lock(r);
    int armed = atomic_load(&r->armed);
    long count = !armed ? 0 : armed == 1 + PM_TOUCH_REGION ? (long)(r->size / (size_t)page_size) : r->pending_count;
    region_unlock(r);
    *pages = count; /* after the lock: pages may lie in the armed region itself */
    return ok();
}

/* Resolve the armed pages of [addr, addr+len) as touched by this thread (before a system call
 * passes them to the kernel, which would answer EFAULT instead of faulting). */
static void touch_range(const void *addr, size_t len)
{
    if (!atomic_load_explicit(&armed_regions, memory_order_relaxed) || !addr || !len)
        return;
    int saved = errno; /* the call replaced must see the errno its caller left */
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    for (int i = 0; i < MAX_REGIONS; i++) {
        struct region *r = &regions[i];
        if (!atomic_load(&r->used) || !atomic_load(&r->armed) || hi <= r->start || r->start + r->size <= lo)
            continue;
        uintptr_t a = lo > r->start ? lo : r->start, b = hi < r->start + r->size ? hi : r->start + r->size;
        for (size_t p = (a - r->start) / (size_t)page_size; p * (size_t)page_size < b - r->start && atomic_load(&r->armed); p++)
            resolve(r, p);
    }
    errno = saved;
}

static void touch_iov(const struct iovec *iov, int count)
{
    for (int i = 0; iov && i < count; i++)
        touch_range(iov[i].iov_base, iov[i].iov_len);
}

/* An I/O call of the C library, replaced: its memory is moved first when armed, then the C
 * library's own function does the call. The C library's functions are found when the library is
 * loaded (dlsym is not safe in a signal handler, where a first write() may come from); a call
 * before that (another library's constructor) looks its function up then. TOUCH names what the
 * call reads or fills. */
#define INTERPOSE(name, params, args, touch) \
    static __typeof__(&name) real_##name; \
    ssize_t name params \
    { \
        __typeof__(&name) real = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE); \
        if (!real) { \
            real = (__typeof__(&name))dlsym(RTLD_NEXT, #name); \
            __atomic_store_n(&real_##name, real, __ATOMIC_RELEASE); \
        } \
        touch; \
        return real args; \
    }

INTERPOSE(read, (int fd, void *buf, size_t count), (fd, buf, count), touch_range(buf, count))
INTERPOSE(write, (int fd, const void *buf, size_t count), (fd, buf, count), touch_range(buf, count))
INTERPOSE(pread, (int fd, void *buf, size_t count, off_t offset), (fd, buf, count, offset), touch_range(buf, count))
INTERPOSE(pwrite, (int fd, const void *buf, size_t count, off_t offset), (fd, buf, count, offset), touch_range(buf, count))
INTERPOSE(pread64, (int fd, void *buf, size_t count, off64_t offset), (fd, buf, count, offset), touch_range(buf, count))
INTERPOSE(pwrite64, (int fd, const void *buf, size_t count, off64_t offset), (fd, buf, count, offset), touch_range(buf, count))
INTERPOSE(readv, (int fd, const struct iovec *iov, int count), (fd, iov, count), touch_iov(iov, count))
INTERPOSE(writev, (int fd, const struct iovec *iov, int count), (fd, iov, count), touch_iov(iov, count))
INTERPOSE(recv, (int fd, void *buf, size_t len, int flags), (fd, buf, len, flags), touch_range(buf, len))
INTERPOSE(send, (int fd, const void *buf, size_t len, int flags), (fd, buf, len, flags), touch_range(buf, len))
INTERPOSE(recvfrom, (int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen), (fd, buf, len, flags, from, fromlen),
          touch_range(buf, len))
INTERPOSE(sendto, (int fd, const void *buf, size_t len, int flags, const struct sockaddr *to, socklen_t tolen), (fd, buf, len, flags, to, tolen),
          touch_range(buf, len))

__attribute__((constructor)) static void find_real_calls(void)
{
#define FIND(name) __atomic_store_n(&real_##name, (__typeof__(&name))dlsym(RTLD_NEXT, #name), __ATOMIC_RELEASE)
    FIND(read), FIND(write), FIND(pread), FIND(pwrite), FIND(pread64), FIND(pwrite64);
    FIND(readv), FIND(writev), FIND(recv), FIND(send), FIND(recvfrom), FIND(sendto);
#undef FIND
}

/* ---- where pages are ------------------------------------------------------------------------ */

/* Whether the page at addr is in memory or swapped out, from /proc/self/pagemap (bits 63, 62);
 * -1 when the page table cannot be read. */
static int page_there(int pagemap, uintptr_t addr)
{
    uint64_t entry;
    if (pagemap < 0 || pread(pagemap, &entry, sizeof entry, (off_t)(addr / (uintptr_t)page_size * sizeof entry)) != sizeof entry)
        return -1;
    return (entry >> 62 & 3) != 0;
}

/* Pages per node of the mapping starting at `start` as /proc/self/numa_maps counts them (N<node>=
 * pages), which walks the page table itself; 0 when the mapping is not listed. */
static int numa_maps_counts(uintptr_t start, long *counts, int max_nodes)
{
    FILE *f = fopen("/proc/self/numa_maps", "r");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *end;
        if ((uintptr_t)strtoul(line, &end, 16) != start)
            continue;
        found = 1;
        for (char *p = strstr(end, " N"); p; p = strstr(p + 1, " N")) {
            char *eq;
            long node = strtol(p + 2, &eq, 10);
            if (eq != p + 2 && *eq == '=' && node >= 0 && node < max_nodes)
                counts[node] += strtol(eq + 1, NULL, 10);
        }
    }
    fclose(f);
    return found;
}

/* The mapping [*lo, *hi) of /proc/self/maps that holds addr; 0 when none. */
static int mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    unsigned long a, b;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= addr && addr < b) {
            *lo = a, *hi = b;
            found = 1;
        }
    fclose(f);
    return found;
}

/* Pages per node that move_pages finds in [lo, hi) (it queries, moves nothing). */
static void found_counts(uintptr_t lo, uintptr_t hi, long *counts, int max_nodes)
{
    void *pages[CHUNK];
    int status[CHUNK];
    size_t count = (hi - lo) / (size_t)page_size;
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        for (size_t i = 0; i < n; i++)
            pages[i] = (void *)(lo + (done + i) * (size_t)page_size);
        if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0)
            return;
        for (size_t i = 0; i < n; i++)
            if (status[i] >= 0 && status[i] < max_nodes)
                counts[status[i]]++;
    }
}

/* Pages that are there though move_pages could not find them: kernels before 6.5 answer EFAULT
 * for a page mapped PROT_NONE, as next touch leaves armed pages. Their nodes come from
 * numa_maps, per mapping: what it counts less what move_pages found in the same mapping. Exact
 * when the range holds all such pages of the mapping, or when they are all on one node;
 * otherwise they are given to the nodes in order. Returns the pages placed so. */
static long place_hidden(uintptr_t *hidden, long count, long *pages_per_node, int max_nodes)
{
    long placed = 0;
    long *listed = calloc((size_t)max_nodes * 2, sizeof *listed);
    if (!listed)
        return 0;
    long *found = listed + max_nodes;
    for (long i = 0; i < count;) {
        uintptr_t lo, hi;
        memset(listed, 0, sizeof *listed * (size_t)max_nodes * 2);
        if (!mapping_of(hidden[i], &lo, &hi) || !numa_maps_counts(lo, listed, max_nodes)) {
            i++;
            continue;
        }
        found_counts(lo, hi, found, max_nodes);
        int node = 0;
        for (; i < count && hidden[i] < hi; i++) { /* hidden is ascending: the mapping's pages in turn */
            while (node < max_nodes && listed[node] - found[node] <= 0)
                node++;
            if (node == max_nodes)
                continue; /* numa_maps does not account for it: left absent */
            pages_per_node[node]++;
            found[node]++;
            placed++;
        }
    }
    free(listed);
    return placed;
}

int pm_where(const void *addr, size_t size, long *pages_per_node, int max_nodes, long *absent)
{
    init();
    if (!pages_per_node || max_nodes < 1)
        return fail(PM_EINVAL, "pm_where: no room for the counts");
    if ((uintptr_t)addr % (uintptr_t)page_size)
        return fail(PM_EALIGN, "%p is not page-aligned", addr);
    if (size == 0) {
        struct region *r = find_start(addr);
        if (!r)
            return fail(PM_ENOREGION, "pm_where: size 0 and %p starts no region", addr);
        size = r->size;
    }
    memset(pages_per_node, 0, sizeof *pages_per_node * (size_t)max_nodes);
    long missing = 0, hidden_count = 0, hidden_room = 0;
    uintptr_t *hidden = NULL;
    int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    size_t count = (size + (size_t)page_size - 1) / (size_t)page_size;
    void *pages[CHUNK];
    int status[CHUNK];
    int rc = PM_OK;
    for (size_t done = 0; done < count && rc == PM_OK; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        for (size_t i = 0; i < n; i++)
            pages[i] = (char *)addr + (done + i) * (size_t)page_size;
        if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) {
            if (errno == ENOSYS) { /* no NUMA: what is resident is on node 0 */
                unsigned char vec[CHUNK];
                if (mincore(pages[0], n * (size_t)page_size, vec) != 0) {
                    rc = from_errno(errno, "mincore");
                    break;
                }
                for (size_t i = 0; i < n; i++)
                    vec[i] & 1 ? pages_per_node[0]++ : missing++;
                continue;
            }
            rc = from_errno(errno, "move_pages");
            break;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char resident;
            /* Some kernels answer -EFAULT for a page never touched as for one not mapped at all
             * (follow_page with FOLL_DUMP): mincore tells them apart (ENOMEM: not mapped). */
            if (status[i] == -EFAULT && mincore(pages[i], (size_t)page_size, &resident) != 0 && errno == ENOMEM) {
                rc = fail(PM_ENOTMAPPED, "%p is not mapped in this process", pages[i]);
                break;
            }
            if (status[i] >= 0) {
                if (status[i] < max_nodes)
                    pages_per_node[status[i]]++;
            } else if (page_there(pagemap, (uintptr_t)pages[i]) == 1) { /* there, but not found */
                if (hidden_count == hidden_room) {
                    hidden_room = hidden_room ? 2 * hidden_room : 256;
                    uintptr_t *more = realloc(hidden, (size_t)hidden_room * sizeof *hidden);
                    if (!more) {
                        rc = fail(PM_ENOMEM, "pm_where: no memory");
                        break;
                    }
                    hidden = more;
                }
                hidden[hidden_count++] = (uintptr_t)pages[i];
            } else {
                missing++;
            }
        }
    }
    if (pagemap >= 0)
        close(pagemap);
    if (rc == PM_OK && hidden_count)
        missing += hidden_count - place_hidden(hidden, hidden_count, pages_per_node, max_nodes);
    free(hidden);
    if (rc)
        return rc;
    if (absent)
        *absent = missing;
    return ok();
}

/* ---- cost hints ----------------------------------------------------------------------------- */

struct cost {
    int known;
    double latency_ns, read_mb_s, write_mb_s, migrate_mb_s;
};
static struct cost *costs; /* MAX_COST_NODES x MAX_COST_NODES */
#define MAX_COST_NODES 64
static char costs_source[512];
static pthread_once_t costs_once = PTHREAD_ONCE_INIT;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void costs_path(char *path, size_t size)
{
    const char *env = getenv("PINLAB_MEM_COSTS"), *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env)
        snprintf(path, size, "%s", env);
    else if (cache && *cache)
        snprintf(path, size, "%s/pinlab/memory-costs.txt", cache);
    else
        snprintf(path, size, "%s/.cache/pinlab/memory-costs.txt", home && *home ? home : "/tmp");
}

static void node_list(char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int n = 0; n < MAX_COST_NODES; n++)
        if (has_memory(n) && used + 8 < size)
            used += (size_t)snprintf(out + used, size - used, used ? ",%d" : "%d", n);
}

/* The file: '# pinlab memory costs 1', 'nodes LIST', then 'from to latency_ns read write migrate'. */
static int load_costs(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256], nodes[256] = "", want[256];
    int format = 0, rows = 0;
    node_list(want, sizeof want);
    while (fgets(line, sizeof line, f)) {
        int a, b;
        struct cost c = {1, 0, 0, 0, 0};
        if (sscanf(line, "# pinlab memory costs %d", &format) == 1)
            continue;
        if (sscanf(line, "nodes %255s", nodes) == 1)
            continue;
        if (sscanf(line, "%d %d %lf %lf %lf %lf", &a, &b, &c.latency_ns, &c.read_mb_s, &c.write_mb_s, &c.migrate_mb_s) == 6 &&
            a >= 0 && b >= 0 && a < MAX_COST_NODES && b < MAX_COST_NODES) {
            costs[a * MAX_COST_NODES + b] = c;
            rows++;
        }
    }
    fclose(f);
    if (format != 1 || strcmp(nodes, want) != 0 || rows == 0) { /* another machine's, or not ours */
        memset(costs, 0, sizeof *costs * MAX_COST_NODES * MAX_COST_NODES);
        return 0;
    }
    return 1;
}

struct probe {
    int cpu, node;
    struct cost result;
};

static void *measure_pair(void *arg)
{
    struct probe *p = arg;
    const size_t size = 64UL << 20, chase = 32UL << 20, moved = 16UL << 20;
    unsigned long mask[NODE_WORDS] = {0};
    mask[p->node / (8 * sizeof(unsigned long))] = 1UL << (p->node % (8 * sizeof(unsigned long)));
    char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return NULL;
    if (numa_kernel)
        sys_mbind(buf, size, MPOL_BIND_, mask, 0);
    memset(buf, 1, size);
    double best_w = 1e30, best_r = 1e30;
    volatile uint64_t sink = 0;
    for (int round = 0; round < 3; round++) {
        double t = now();
        memset(buf, round, size);
        best_w = fmin(best_w, now() - t);
        t = now();
        uint64_t sum = 0;
        for (size_t i = 0; i < size / 8; i += 4)
            sum += ((uint64_t *)buf)[i] + ((uint64_t *)buf)[i + 1] + ((uint64_t *)buf)[i + 2] + ((uint64_t *)buf)[i + 3];
        sink += sum;
        best_r = fmin(best_r, now() - t);
    }
    /* Latency: a random cycle through the cache lines of `chase` bytes. */
    size_t lines = chase / 64;
    uint64_t *cells = (uint64_t *)buf;
    size_t *order = malloc(lines * sizeof *order);
    if (order) {
        for (size_t i = 0; i < lines; i++)
            order[i] = i;
        unsigned long long x = 88172645463325252ULL;
        for (size_t i = lines - 1; i > 0; i--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t j = (size_t)(x % (i + 1)), tmp = order[i];
            order[i] = order[j], order[j] = tmp;
        }
        for (size_t i = 0; i < lines; i++)
            cells[order[i] * 8] = (uint64_t)(order[(i + 1) % lines] * 8);
        free(order);
        const long steps = 400000;
        uint64_t at = 0;
        double t = now();
        for (long s = 0; s < steps; s++)
            at = cells[at];
        sink += at;
        p->result.latency_ns = (now() - t) / (double)steps * 1e9;
    }
    p->result.write_mb_s = (double)size / best_w / 1e6;
    p->result.read_mb_s = (double)size / best_r / 1e6;
    munmap(buf, size);
    /* Migration: pages first touched here (on this CPU's node), moved to the node measured. */
    char *m = mmap(NULL, moved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
        memset(m, 2, moved);
        int err = 0;
        double t = now();
        move_range((uintptr_t)m, moved, p->node, &err, 0);
        double spent = now() - t;
        p->result.migrate_mb_s = (double)moved / (spent > 1e-9 ? spent : 1e-9) / 1e6;
        munmap(m, moved);
    }
    p->result.known = 1;
    (void)sink;
    return NULL;
}

static int first_cpu_of(int node)
{
    char path[96], text[4096];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    if (read_text(path, text, sizeof text) <= 0)
        return node == 0 ? 0 : -1;
    return text[0] >= '0' && text[0] <= '9' ? atoi(text) : -1;
}

static void measure_costs(void)
{
    for (int from = 0; from < MAX_COST_NODES; from++) {
        int cpu = first_cpu_of(from);
        if (cpu < 0)
            continue; /* a node without CPUs reads from nowhere */
        for (int to = 0; to < MAX_COST_NODES; to++) {
            if (!has_memory(to))
                continue;
            struct probe p = {cpu, to, {0, 0, 0, 0, 0}};
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
            pthread_t thread;
            if (pthread_create(&thread, &attr, measure_pair, &p) == 0) {
                pthread_join(thread, NULL);
                costs[from * MAX_COST_NODES + to] = p.result;
            }
            pthread_attr_destroy(&attr);
        }
    }
}

static void store_costs(const char *path)
{
    char dir[512], tmp[560], nodes[256];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *slash = strchr(dir + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        mkdir(dir, 0755);
        *slash = '/';
    }
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    node_list(nodes, sizeof nodes);
    fprintf(f, "# pinlab memory costs 1\n# measured by libpinlab-mem on first use; pinlab calibrate writes the same file\nnodes %s\n", nodes);
    fprintf(f, "# from to latency_ns read_MB_s write_MB_s migrate_MB_s\n");
    for (int a = 0; a < MAX_COST_NODES; a++)
        for (int b = 0; b < MAX_COST_NODES; b++) {
            struct cost *c = &costs[a * MAX_COST_NODES + b];
            if (c->known)
                fprintf(f, "%d %d %.1f %.0f %.0f %.0f\n", a, b, c->latency_ns, c->read_mb_s, c->write_mb_s, c->migrate_mb_s);
        }
    if (fclose(f) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

static void load_or_measure(void)
{
    init();
    costs = calloc((size_t)MAX_COST_NODES * MAX_COST_NODES, sizeof *costs);
    if (!costs)
        return;
    char path[480];
    costs_path(path, sizeof path);
    if (load_costs(path)) {
        snprintf(costs_source, sizeof costs_source, "%s", path);
        return;
    }
    measure_costs();
    store_costs(path);
    snprintf(costs_source, sizeof costs_source, "measured (stored in %s)", path);
}

const char *pm_costs_source(void)
{
    pthread_once(&costs_once, load_or_measure);
    return costs_source[0] ? costs_source : "none";
}

static int cost_of(int from, int to, struct cost *out)
{
    pthread_once(&costs_once, load_or_measure);
    if (!costs)
        return fail(PM_ENOMEM, "no memory for the cost table");
    int rc = check_node(to);
    if (rc)
        return rc;
    if (from < 0 || from >= MAX_COST_NODES || !costs[from * MAX_COST_NODES + to].known)
        return fail(PM_ENODE, "no cost from node %d to node %d: node %d has no CPUs or does not exist", from, to, from);
    *out = costs[from * MAX_COST_NODES + to];
    return PM_OK;
}

int pm_access_cost(int from, int to, double *latency_ns, double *read_mb_s, double *write_mb_s)
{
    struct cost c;
    int rc = cost_of(from, to, &c);
    if (rc)
        return rc;
    if (latency_ns)
        *latency_ns = c.latency_ns;
    if (read_mb_s)
        *read_mb_s = c.read_mb_s;
    if (write_mb_s)
        *write_mb_s = c.write_mb_s;
    return ok();
}

int pm_migrate_cost(size_t bytes, int from, int to, double *seconds)
{
    if (!seconds)
        return fail(PM_EINVAL, "pm_migrate_cost: seconds is NULL");
    init();
    int rc = check_node(from);
    if (rc)
        return rc;
    if (from == to) {
        *seconds = 0;
        return ok();
    }
    struct cost c;
    /* Moving pages is done by the CPU that asks; the cost measured from the source node's CPUs. */
    if ((rc = cost_of(first_cpu_of(from) >= 0 ? from : to, to, &c)))
        return rc;
    *seconds = c.migrate_mb_s > 0 ? (double)bytes / (c.migrate_mb_s * 1e6) : 0;
    return ok();
}
