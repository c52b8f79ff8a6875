/*
 * pinlab-pairs: threads that share data in known groups, a ground truth for affinity graphs.
 *
 * Threads form consecutive groups of G (thread t is in group t / G, with rank t mod G). Each group
 * has one array of int64, allocated and first touched by its first thread. Every thread of the
 * group increments, --reps times, the elements j with j mod G == its rank: the group's threads
 * interleave within the same cache lines, so they share (and fight over) every line of their
 * array, while nothing at all is shared between groups. Each element must end equal to --reps.
 */
#define _GNU_SOURCE
#include "common.h"
#include "pinlab_heartbeat.h"

#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

enum { OPT_GROUPS = PL_OPT_FIRST_PRIVATE, OPT_SIZE, OPT_REPS };


static void usage(void)
{
    printf(
        "Usage: pinlab-pairs [OPTIONS]\n"
        "Threads in consecutive groups of G share one array per group (interleaved elements, so the\n"
        "same cache lines); nothing is shared between groups. Thread t is in group t / G.\n"
        "\n"
        "Options:\n"
        "  --groups G   threads per group, 1..%d (default 2: pairs); the number of threads must be a\n"
        "               multiple of G\n"
        "  --size SIZE  int64 elements of each group's array (k/M/G/T x1000) or bytes with\n"
        "               B/KB/MB/GB/TB (x1000) or KiB/MiB/GiB/TiB (x1024); default 64Ki elements (512 KiB)\n"
        "  --reps R     passes of each thread over its elements (default 2000)\n"
        "  --threads N  OpenMP threads (default: OMP_NUM_THREADS or the CPUs of the process)\n"
        "  --json       print one JSON object on stdout instead of the text\n"
        "  -h, --help   this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n",
        PL_MAX_THREADS);
}

int main(int argc, char **argv)
{
    pl_init("pairs");
    pl_common com = {0};
    int group_size = 2;
    uint64_t n = 65536, reps = 2000;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"groups", required_argument, NULL, OPT_GROUPS},
        {"size", required_argument, NULL, OPT_SIZE},
        {"reps", required_argument, NULL, OPT_REPS},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&com, opt, argv))
            continue;
        switch (opt) {
        case OPT_GROUPS: group_size = pl_parse_int("--groups", optarg, 1, PL_MAX_THREADS); break;
        case OPT_SIZE: n = pl_parse_size("--size", optarg, sizeof(int64_t)); break;
        case OPT_REPS: reps = pl_parse_count("--reps", optarg, 1, INT64_MAX); break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (com.help) {
        usage();
        return 0;
    }
    int threads = com.threads ? com.threads : omp_get_max_threads();
    if (threads % group_size != 0)
        pl_usage_error("the number of threads (%d) is not a multiple of --groups %d; choose --threads as a multiple of %d",
                       threads, group_size, group_size);
    int ngroups = threads / group_size;
    /* Groups share no page at all, not only no line: each group's array is mapped whole pages by
     * its first thread, and the pointer to it sits in the group's own page of a table that no
     * other thread touches. A page read or written by two groups (a shared pointer table, a
     * results array, a heap chunk's header in another array's last page) would be an edge across
     * groups for the page-level tracer, seen or not depending on when its rounds fall. */
    long page = sysconf(_SC_PAGESIZE);
    uint64_t array_bytes = pl_mul_sat(n, sizeof(int64_t));
    array_bytes = pl_add_sat(array_bytes, (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
    pl_check_memory(pl_mul_sat(array_bytes, (uint64_t)ngroups), "--size");
    omp_set_num_threads(threads);

    size_t table_bytes = (size_t)ngroups * (size_t)page;
    char *table = mmap(NULL, table_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED)
        pl_usage_error("out of memory");
    int team = 0, alloc_failed = 0;
    double t0 = 0.0, t1 = 0.0;
#pragma omp parallel
    {
        int me = omp_get_thread_num(), nt = omp_get_num_threads();
        int group = me / group_size, rank = me % group_size;
        int whole = nt == threads; /* a smaller team cannot keep the groups */
        int64_t **slot = whole ? (int64_t **)(table + (size_t)group * (size_t)page) : NULL;
#pragma omp master
        team = nt;
        if (whole && rank == 0) {
            void *mapped = mmap(NULL, (size_t)array_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) {
#pragma omp atomic write
                alloc_failed = 1;
            } else {
                int64_t *x = mapped;
                for (uint64_t j = 0; j < n; j++)
                    x[j] = 0;
                *slot = x;
            }
        }
#pragma omp barrier
#pragma omp master
        t0 = pl_now();
#pragma omp barrier
        int64_t *x = slot ? *slot : NULL;
        if (x) {
            for (uint64_t r = 0; r < reps; r++) {
                for (uint64_t j = (uint64_t)rank; j < n; j += (uint64_t)group_size)
                    x[j]++;
                PL_CLOBBER_MEMORY(); /* keeps every pass's loads and stores */
                pinlab_beat(1);      /* heartbeat: one pass over the thread's share */
            }
        }
#pragma omp barrier
#pragma omp master
        t1 = pl_now();
        /* Each group's array is checked, reported and unmapped by its own first thread, so that
         * checking shares nothing between groups either (an affinity graph of the whole run keeps
         * the planted groups). */
        if (x && rank == 0) {
            if (com.corrupt && group == 0)
                x[n / 2] += 1;
            uint64_t bad = 0;
            for (uint64_t j = 0; j < n; j++)
                bad += x[j] != (int64_t)reps;
            if (bad) {
#pragma omp critical(pairs_report)
                pl_fail("group %d: %llu of %llu elements differ from %llu", group, (unsigned long long)bad,
                        (unsigned long long)n, (unsigned long long)reps);
            }
            munmap(x, (size_t)array_bytes);
        }
    }
    double elapsed = t1 - t0;
    if (alloc_failed)
        pl_usage_error("cannot allocate the group arrays (%s each); choose a smaller --size",
                       pl_fmt_bytes(array_bytes, 0));
    if (team != threads)
        pl_fail("OpenMP ran %d threads instead of %d, so the groups of %d could not be formed", team, threads,
                group_size);

    if (com.json) {
        pl_json j;
        pl_json_start(&j, stdout);
        pl_json_head(&j, team);
        pl_json_begin_object(&j, "parameters");
        pl_json_int(&j, "groups", group_size);
        pl_json_uint(&j, "size_elements", n);
        pl_json_uint(&j, "reps", reps);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        pl_json_int(&j, "groups", ngroups);
        pl_json_int(&j, "group_size", group_size);
        pl_json_double(&j, "seconds", elapsed);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-pairs: %d threads in %d groups of %d, %llu int64 per group (%s), %llu passes: %.6f s\n",
               team, ngroups, group_size, (unsigned long long)n, pl_fmt_bytes(pl_mul_sat(n, 8), 0),
               (unsigned long long)reps, elapsed);
        if (!pl_failed())
            printf("Validation: every element of every group equals %llu\n", (unsigned long long)reps);
    }
    munmap(table, table_bytes);
    return pl_exit_status(com.json);
}
