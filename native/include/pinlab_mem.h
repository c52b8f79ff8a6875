/* pinlab_mem.h: place, move and locate a program's data on NUMA nodes (libpinlab-mem).
 *
 * In the spirit of MAMI (the memory interface of ForestGOMP): a program allocates a region with
 * a policy or registers memory it already has, attaches regions to the threads that use them,
 * moves a region to a node now or when it is next touched, asks where its pages are, and asks
 * what remote access and migration cost. Build with the flags `pinlab cflags --mem` and
 * `pinlab ldflags --mem` print.
 *
 * Every call returns PM_OK (0) or a negative PM_E* code; pm_strerror(code) names the code and
 * pm_last_error() says, for the calling thread, what exactly went wrong. Every call is
 * thread-safe. Regions are named by their start address.
 *
 * Example (a thread moves its block to its own node when it first writes it):
 *
 *     double *a;
 *     if (pm_alloc((void **)&a, n * sizeof *a, PM_INTERLEAVE, NULL, 0) != PM_OK)
 *         fprintf(stderr, "%s\n", pm_last_error());
 *     pm_migrate_on_next_touch(a, PM_TOUCH_PAGE);   // each page to the node of its next toucher
 *     #pragma omp parallel for
 *     for (size_t i = 0; i < n; i++) a[i] = 0;
 *     long pages[64]; long absent;
 *     pm_where(a, n * sizeof *a, pages, 64, &absent);
 *     pm_free(a);
 */
#ifndef PINLAB_MEM_H
#define PINLAB_MEM_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (all negative but PM_OK). */
enum {
    PM_OK = 0,
    PM_EINVAL = -1,     /* a bad argument: size 0, unknown policy, NULL where a result goes */
    PM_ENODE = -2,      /* a node that does not exist or has no memory */
    PM_EALIGN = -3,     /* an address that is not page-aligned */
    PM_ENOTMAPPED = -4, /* memory that is not mapped in this process */
    PM_ENOREGION = -5,  /* an address that starts no region of this library */
    PM_EEXIST = -6,     /* a region overlapping one already registered */
    PM_ENOMEM = -7,     /* no memory (mmap failed, too many regions) */
    PM_EPERM = -8,      /* the kernel refused: pages shared with other processes, or no permission */
    PM_ENOSYS = -9,     /* the kernel has no NUMA support for this call */
    PM_EBUSY = -10,     /* some pages could not be moved (see pm_last_error) */
    PM_ESRCH = -11,     /* no such thread */
    PM_ESYS = -12       /* another system error (see pm_last_error) */
};

/* Allocation policies. */
enum {
    PM_FIRST_TOUCH = 0, /* the kernel's default: each page on the node of the first thread that touches it (no nodes) */
    PM_BIND = 1,        /* on the given nodes only */
    PM_INTERLEAVE = 2,  /* page by page (huge page by huge page under THP), round robin over the given nodes (all with memory for none) */
    PM_LOCAL = 3        /* now, on the node of the calling thread (the pages are touched by the call; no nodes); from a
                         * CPU of a node without memory, on the nearest node with memory, as the kernel allocates */
};

/* System calls given armed memory would fail with EFAULT instead of faulting: the library
 * replaces read, write, pread(64), pwrite(64), readv, writev, recv, recvfrom, send and sendto in
 * programs linked with it, moving their buffers first. Other calls (recvmsg, sendmsg, preadv, and
 * stdio's fread/fwrite, which call the C library's internal read and write directly) must not be
 * given armed memory: touch it first, or use pm_migrate. A region armed for next touch must not
 * be mprotect'ed by the program meanwhile. */

/* Next-touch granularity. A page is the kernel's unit of migration: in memory backed by a
 * transparent huge page, touching one 4 KiB page moves the whole huge page (madvise the region
 * MADV_NOHUGEPAGE before touching it first for base pages). */
enum {
    PM_TOUCH_PAGE = 0,   /* each page moves to the node of the thread that touches it first */
    PM_TOUCH_REGION = 1  /* the whole region moves to the node of the first thread touching any of it */
};

/* A process has at most 4096 regions at once (allocated and registered together): one more is
 * refused with PM_ENOMEM. PM_FIRST_TOUCH and PM_LOCAL refuse a node list (PM_EINVAL). */
int pm_alloc(void **out, size_t size, int policy, const int *nodes, int nnodes);
int pm_register(void *addr, size_t size);
int pm_free(void *addr); /* allocated regions are unmapped; registered ones are only forgotten */
int pm_region_size(const void *addr, size_t *size);

/* Attachment: tid 0 is the calling thread. A region attached to a thread that has exited is
 * attached to none (pm_attached answers 0). */
int pm_attach(void *addr, pid_t tid);
int pm_detach(void *addr);
int pm_attached(const void *addr, pid_t *tid);
int pm_attached_bytes(pid_t tid, size_t *bytes);
/* Pin thread tid (0: the caller) to cpu and move every region attached to it to cpu's node. */
int pm_move_thread(pid_t tid, int cpu);

/* Move the region's pages to node now. Pages shared copy-on-write with a forked process are
 * copied there; memory another process maps too (shared memory) is not moved (PM_EPERM), whatever
 * the caller's privileges. */
int pm_migrate(void *addr, int node);
/* Next touch moves a page to the node of the toucher's CPU (the nearest node with memory for a
 * CPU of a node without); pages this process shares copy-on-write after fork are copied there. */
int pm_migrate_on_next_touch(void *addr, int granularity);
int pm_next_touch_pending(const void *addr, long *pages);
/* Pages moved by next touches so far in this process, pages the kernel would not move, and the
 * errno of the last refusal (pages already on the toucher's node count as moved). */
int pm_next_touch_stats(long *moved, long *failed, int *last_errno);
/* Page granularity unprotects page by page, and each unprotected page among protected ones is a
 * mapping of its own: past the kernel's limit (vm.max_map_count, 65530 by default) a region falls
 * back to region granularity, its pages still pending moving at once to the node of the thread
 * that met the limit. Regions that fell back so far, and the pages they had pending then (also
 * counted in pm_next_touch_stats's moved or failed). */
int pm_next_touch_fallbacks(long *regions, long *pages);

/* Pages of [addr, addr+size) per node (pages_per_node[0..max_nodes-1]); absent: not yet touched. */
int pm_where(const void *addr, size_t size, long *pages_per_node, int max_nodes, long *absent);
int pm_nodes(int *count);      /* highest node number with memory + 1 */
int pm_node_of_cpu(int cpu, int *node);
int pm_current_node(int *node);
int pm_free_memory(int node, unsigned long long *free_bytes, unsigned long long *total_bytes);

/* Cost hints, from the file pinlab calibrate writes, measured by the library on first use when
 * there is none: read latency (ns) and bandwidth (MB/s) of memory on node to from a CPU of node
 * from, and the seconds moving bytes from one node to another would take. */
int pm_access_cost(int from, int to, double *latency_ns, double *read_mb_s, double *write_mb_s);
int pm_migrate_cost(size_t bytes, int from, int to, double *seconds);
const char *pm_costs_source(void); /* the file the costs came from, or "measured" */

const char *pm_strerror(int code);
const char *pm_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
