/*
 * pinlab_heartbeat.h: a program reports the work its threads do, for pinlab autopin to measure.
 *
 *     #include "pinlab_heartbeat.h"      (cc -I"$(pinlab workload heartbeat-header --include-dir)")
 *     ...
 *     pinlab_beat(1);                     after each unit of work, in the thread that did it
 *
 * C and C++. Header only: nothing to link (on glibc older than 2.34, link with -pthread). Needs POSIX
 * (the default gnu modes of gcc and clang; with -std=c11, define _POSIX_C_SOURCE=200809L first).
 *
 * The counts live in a file of shared memory named by the environment variable PINLAB_HEARTBEAT
 * (pinlab autopin sets it; `export PINLAB_HEARTBEAT=/dev/shm/NAME` before starting a program lets
 * `pinlab autopin --pid` read it later). The file is mapped at the first beat. When the variable is
 * unset or the file cannot be used, a beat costs a load and two well-predicted branches.
 *
 * Layout (little-endian, cache lines of 64 bytes):
 *   header (64 bytes): char magic[8] = "PINLABHB"; uint32 version = 1; uint32 slots;
 *                      uint64 claimed (slots handed out so far; may pass `slots`)
 *   slots[slots] (64 bytes each): uint64 count; uint64 tid
 * A thread claims slot `claimed++` (atomic) at its first beat and writes its tid there, so threads
 * never share a cache line. The last slot is the overflow slot, shared (atomic adds) by threads
 * past the end; its tid stays 0. Counts are relaxed atomics: a reader may see a slightly old
 * count, never a torn one. Each source file that includes this header maps the file itself, so
 * a thread beating from two files has two slots: readers add the slots of a tid.
 *
 * Either side may create the file: it is written complete under a temporary name, then linked to
 * its name (an existing file wins), so nobody ever maps a file whose header is not written yet.
 */
#ifndef PINLAB_HEARTBEAT_H
#define PINLAB_HEARTBEAT_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PINLAB_HEARTBEAT_ENV "PINLAB_HEARTBEAT"
#define PINLAB_HEARTBEAT_MAGIC "PINLABHB"
#define PINLAB_HEARTBEAT_VERSION 1u
#ifndef PINLAB_HEARTBEAT_SLOTS
#define PINLAB_HEARTBEAT_SLOTS 1024u /* slots of a file this program creates */
#endif

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t slots;
    uint64_t claimed;
    char pad_[40];
} pinlab_heartbeat_header;

typedef struct {
    uint64_t count;
    uint64_t tid;
    char pad_[48];
} pinlab_heartbeat_slot;

#if defined(__GNUC__)
#define PINLAB_HB_COLD_ __attribute__((cold, noinline, unused))
#define PINLAB_HB_LIKELY_(x) __builtin_expect(!!(x), 1)
#else
#define PINLAB_HB_COLD_
#define PINLAB_HB_LIKELY_(x) (x)
#endif

/* Per source file: the mapping (or PINLAB_HB_FAILED_), and each thread's slot (or PINLAB_HB_OFF_). */
#define PINLAB_HB_FAILED_ ((pinlab_heartbeat_header *)1)
#define PINLAB_HB_OFF_ ((pinlab_heartbeat_slot *)1)
static pinlab_heartbeat_header *pinlab_hb_map_;
static __thread pinlab_heartbeat_slot *pinlab_hb_mine_;

extern long syscall(long, ...);

static inline uint64_t pinlab_hb_gettid_(void)
{
    return (uint64_t)syscall(SYS_gettid);
}

static inline size_t pinlab_hb_bytes_(uint64_t slots)
{
    return (size_t)(sizeof(pinlab_heartbeat_header) + slots * sizeof(pinlab_heartbeat_slot));
}

/* Writes a complete file under a temporary name and links it to `path`; an existing file wins. */
PINLAB_HB_COLD_ static void pinlab_hb_create_(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.%llu.tmp", path, (long)getpid(),
                 (unsigned long long)pinlab_hb_gettid_()) >= (int)sizeof tmp)
        return;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    pinlab_heartbeat_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PINLAB_HEARTBEAT_MAGIC, 8);
    h.version = PINLAB_HEARTBEAT_VERSION;
    h.slots = PINLAB_HEARTBEAT_SLOTS < 2 ? 2 : PINLAB_HEARTBEAT_SLOTS;
    if (ftruncate(fd, (off_t)pinlab_hb_bytes_(h.slots)) == 0 && pwrite(fd, &h, sizeof h, 0) == (ssize_t)sizeof h
        && link(tmp, path) != 0) {
        /* EEXIST: someone else created it first, theirs is used. (A (void) cast does not quiet
         * gcc's warn_unused_result, which glibc puts on link() under _FORTIFY_SOURCE, a default
         * of Ubuntu's and Fedora's compilers: with -Werror the header would not build there.) */
    }
    unlink(tmp);
    close(fd);
}

/* Maps the file named by PINLAB_HEARTBEAT, creating it when missing; NULL when it cannot be used. */
PINLAB_HB_COLD_ static pinlab_heartbeat_header *pinlab_hb_map_file_(void)
{
    const char *path = getenv(PINLAB_HEARTBEAT_ENV);
    if (!path || !*path)
        return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        pinlab_hb_create_(path);
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0)
        return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)pinlab_hb_bytes_(2))
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    pinlab_heartbeat_header *h = (pinlab_heartbeat_header *)p;
    if (memcmp(h->magic, PINLAB_HEARTBEAT_MAGIC, 8) != 0 || h->version != PINLAB_HEARTBEAT_VERSION ||
        h->slots < 2 || pinlab_hb_bytes_(h->slots) > (size_t)st.st_size) {
        munmap(p, (size_t)st.st_size);
        return NULL;
    }
    return h;
}

/* In a child after fork(): claim a slot of its own (with its own tid) at its next beat. */
PINLAB_HB_COLD_ static void pinlab_hb_after_fork_(void)
{
    if (pinlab_hb_mine_ != PINLAB_HB_OFF_)
        pinlab_hb_mine_ = NULL;
}

/* The mapping of this source file, made once (racing threads: one mapping wins, the others go). */
PINLAB_HB_COLD_ static pinlab_heartbeat_header *pinlab_hb_attach_(void)
{
    pinlab_heartbeat_header *h = __atomic_load_n(&pinlab_hb_map_, __ATOMIC_ACQUIRE);
    if (h)
        return h == PINLAB_HB_FAILED_ ? NULL : h;
    pinlab_heartbeat_header *mine = pinlab_hb_map_file_();
    pinlab_heartbeat_header *want = mine ? mine : PINLAB_HB_FAILED_, *seen = NULL;
    if (__atomic_compare_exchange_n(&pinlab_hb_map_, &seen, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (mine)
            pthread_atfork(NULL, NULL, pinlab_hb_after_fork_);
        return mine;
    }
    if (mine)
        munmap(mine, pinlab_hb_bytes_(mine->slots));
    return seen == PINLAB_HB_FAILED_ ? NULL : seen;
}

/* First beat of a thread: map the file if needed, claim a slot, count. errno is left as it was. */
PINLAB_HB_COLD_ static void pinlab_hb_first_beat_(uint64_t units)
{
    int saved = errno;
    pinlab_heartbeat_header *h = pinlab_hb_attach_();
    if (!h) {
        pinlab_hb_mine_ = PINLAB_HB_OFF_;
        errno = saved;
        return;
    }
    pinlab_heartbeat_slot *slots = (pinlab_heartbeat_slot *)(h + 1);
    uint64_t i = __atomic_fetch_add(&h->claimed, 1, __ATOMIC_RELAXED);
    pinlab_heartbeat_slot *s = &slots[h->slots - 1]; /* overflow, shared */
    if (i < h->slots - 1u) {
        s = &slots[i];
        __atomic_store_n(&s->tid, pinlab_hb_gettid_(), __ATOMIC_RELEASE);
    }
    pinlab_hb_mine_ = s;
    __atomic_fetch_add(&s->count, units, __ATOMIC_RELAXED);
    errno = saved;
}

/* Reports `units` of work done by the calling thread. */
static inline void pinlab_beat(uint64_t units)
{
    pinlab_heartbeat_slot *s = pinlab_hb_mine_;
    if (PINLAB_HB_LIKELY_((uintptr_t)s > 1))
        __atomic_fetch_add(&s->count, units, __ATOMIC_RELAXED);
    else if (!s)
        pinlab_hb_first_beat_(units);
}

#ifdef __cplusplus
}
#endif

#endif
