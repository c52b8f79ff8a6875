/*
 * pinlab-mb: the mb_N_M micro-benchmark of [mazouz2011variability] (co-running processes and cache sharing).
 *
 * tab holds N*M int64. A parallel loop over the N rows; for each row, R repetitions of an
 * increment of its M elements:
 *     parallel for i in [0,N):  for r in [0,R):  for k in [0,M):  tab[i*M+k]++
 * Each thread works on N/threads rows, a working set of N*M*8/threads bytes. --sweep runs the
 * family at a constant working set per thread: from N = threads, M = ws/8 (every thread one
 * long row: data in L2, not in L1) doubling N and halving M down to M = 1 (many rows of one
 * element, all in L1). The result of every run is checked: each element must equal R.
 */
#define _GNU_SOURCE
#include "common.h"
#include "pinlab_heartbeat.h"

#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_N = PL_OPT_FIRST_PRIVATE, OPT_M, OPT_REPS, OPT_SWEEP, OPT_WS };

#define DEFAULT_WS_BYTES (1536 * 1024) /* 1.5 MiB, as in [mazouz2011variability]: M = 196608 for N = threads */
#define MAX_RUNS 128

typedef struct {
    uint64_t n, m;
    double seconds;
} run_t;

static void usage(void)
{
    printf(
        "Usage: pinlab-mb [OPTIONS]\n"
        "The mb_N_M micro-benchmark: tab of N*M int64; in parallel over the N rows, each row's M\n"
        "elements are incremented R times (for r in R: for k in M: tab[i*M+k]++). Each element must\n"
        "end equal to R.\n"
        "\n"
        "Options:\n"
        "  --n N                rows (k/M/G x1000 allowed). Default: the number of threads, or\n"
        "                       threads x ws / (8 M) when only --m is given\n"
        "  --m M                int64 elements per row. Default: ws / 8 (196608 for 1.5 MiB), or\n"
        "                       threads x ws / (8 N) when only --n is given\n"
        "  --reps R             repetitions per row (default 10000)\n"
        "  --sweep              run the family at a constant working set per thread: N = threads,\n"
        "                       M = ws/8, then N doubled and M halved while M stays whole, and last\n"
        "                       M = 1 (N = threads x ws/8); not with --n or --m\n"
        "  --ws-per-thread SIZE working set per thread: int64 elements (k/M/G/T x1000) or bytes with\n"
        "                       B/KB/MB/GB/TB (x1000) or KiB/MiB/GiB/TiB (x1024); default 1.5MiB\n"
        "  --threads N          OpenMP threads (default: OMP_NUM_THREADS or the CPUs of the process)\n"
        "  --json               print one JSON object on stdout instead of the table\n"
        "  -h, --help           this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n");
}

/* One mb_N_M run over tab; returns the seconds of the parallel loop and the team size. */
static double run_mb(int64_t *tab, uint64_t n, uint64_t m, uint64_t reps, int *team)
{
    /* Zero the rows with the schedule of the run (the first run also first-touches them). With N a
     * multiple of the threads, every run gives each thread the same range of tab. */
#pragma omp parallel
    {
#pragma omp master
        *team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (uint64_t i = 0; i < n; i++)
            memset(tab + i * m, 0, m * sizeof *tab);
    }
    double t0 = pl_now();
#pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < n; i++) {
        int64_t *row = tab + i * m;
        for (uint64_t r = 0; r < reps; r++) {
            for (uint64_t k = 0; k < m; k++)
                row[k]++;
            PL_CLOBBER_MEMORY(); /* keeps every repetition's loads and stores */
        }
        pinlab_beat(reps); /* heartbeat: repetitions of a row done */
    }
    return pl_now() - t0;
}

static uint64_t count_wrong(const int64_t *tab, uint64_t total, int64_t expected)
{
    uint64_t wrong = 0;
#pragma omp parallel for schedule(static) reduction(+ : wrong)
    for (uint64_t j = 0; j < total; j++)
        wrong += tab[j] != expected;
    return wrong;
}

int main(int argc, char **argv)
{
    pl_init("mb");
    pl_common com = {0};
    uint64_t n = 0, m = 0, reps = 10000, ws = DEFAULT_WS_BYTES / sizeof(int64_t);
    int sweep = 0;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"n", required_argument, NULL, OPT_N},
        {"m", required_argument, NULL, OPT_M},
        {"reps", required_argument, NULL, OPT_REPS},
        {"sweep", no_argument, NULL, OPT_SWEEP},
        {"ws-per-thread", required_argument, NULL, OPT_WS},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&com, opt, argv))
            continue;
        switch (opt) {
        case OPT_N: n = pl_parse_count("--n", optarg, 1, UINT64_MAX / 2); break;
        case OPT_M: m = pl_parse_count("--m", optarg, 1, UINT64_MAX / 2); break;
        case OPT_REPS: reps = pl_parse_count("--reps", optarg, 1, INT64_MAX); break;
        case OPT_SWEEP: sweep = 1; break;
        case OPT_WS: ws = pl_parse_size("--ws-per-thread", optarg, sizeof(int64_t)); break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (com.help) {
        usage();
        return 0;
    }
    if (sweep && (n || m))
        pl_usage_error("--sweep chooses N and M itself; leave out --n and --m (or --sweep)");
    int threads = com.threads ? com.threads : omp_get_max_threads();
    uint64_t per_all = pl_mul_sat(ws, (uint64_t)threads); /* elements of the whole working set */

    run_t runs[MAX_RUNS];
    int nruns = 0;
    if (sweep) {
        uint64_t rn = (uint64_t)threads, rm = ws;
        runs[nruns++] = (run_t){rn, rm, 0.0};
        while (rm % 2 == 0 && nruns < MAX_RUNS - 1) {
            rm /= 2;
            rn *= 2;
            runs[nruns++] = (run_t){rn, rm, 0.0};
        }
        if (rm != 1)
            runs[nruns++] = (run_t){per_all, 1, 0.0};
    } else {
        if (!n && !m) {
            n = (uint64_t)threads;
            m = ws;
        } else if (!m) {
            m = per_all / n > 0 ? per_all / n : 1;
        } else if (!n) {
            n = per_all / m > 0 ? per_all / m : 1;
        }
        runs[nruns++] = (run_t){n, m, 0.0};
    }
    uint64_t total = 0;
    for (int r = 0; r < nruns; r++) {
        uint64_t elements = pl_mul_sat(runs[r].n, runs[r].m);
        if (elements > total)
            total = elements;
    }
    uint64_t bytes = pl_mul_sat(total, sizeof(int64_t));
    pl_check_memory(bytes, sweep ? "--ws-per-thread" : "--n or --m");
    if (com.threads)
        omp_set_num_threads(com.threads);
    int64_t *tab = pl_alloc(bytes, "tab");

    int team = 0;
    double elapsed = 0.0;
    for (int r = 0; r < nruns; r++) {
        runs[r].seconds = run_mb(tab, runs[r].n, runs[r].m, reps, &team);
        elapsed += runs[r].seconds;
        uint64_t count = runs[r].n * runs[r].m;
        if (com.corrupt && r == nruns - 1)
            tab[count / 2] += 1;
        uint64_t wrong = count_wrong(tab, count, (int64_t)reps);
        if (wrong)
            pl_fail("mb_%llu_%llu: %llu of %llu elements differ from %llu", (unsigned long long)runs[r].n,
                    (unsigned long long)runs[r].m, (unsigned long long)wrong, (unsigned long long)count,
                    (unsigned long long)reps);
        if (!com.json) {
            if (r == 0)
                printf("%-24s %12s %12s %12s\n", "Micro-benchmark", "N", "M", "Seconds");
            char name[64];
            snprintf(name, sizeof name, "mb_%llu_%llu", (unsigned long long)runs[r].n,
                     (unsigned long long)runs[r].m);
            printf("%-24s %12llu %12llu %12.6f\n", name, (unsigned long long)runs[r].n,
                   (unsigned long long)runs[r].m, runs[r].seconds);
            fflush(stdout);
        }
    }
    if (team != threads && com.threads)
        pl_warn("OpenMP ran %d threads instead of %d", team, threads);

    if (com.json) {
        pl_json j;
        pl_json_start(&j, stdout);
        pl_json_head(&j, team);
        pl_json_begin_object(&j, "parameters");
        if (!sweep) {
            pl_json_uint(&j, "n", runs[0].n);
            pl_json_uint(&j, "m", runs[0].m);
        }
        pl_json_uint(&j, "reps", reps);
        pl_json_bool(&j, "sweep", sweep);
        pl_json_uint(&j, "ws_per_thread_bytes", pl_mul_sat(ws, sizeof(int64_t)));
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        pl_json_begin_array(&j, "runs");
        for (int r = 0; r < nruns; r++) {
            pl_json_begin_object(&j, NULL);
            pl_json_uint(&j, "n", runs[r].n);
            pl_json_uint(&j, "m", runs[r].m);
            pl_json_double(&j, "seconds", runs[r].seconds);
            pl_json_end_object(&j);
        }
        pl_json_end_array(&j);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-mb: %d threads, %llu repetitions, %s per thread; timed part %.6f s\n", team,
               (unsigned long long)reps, pl_fmt_bytes(pl_mul_sat(ws, sizeof(int64_t)), 0), elapsed);
        if (!pl_failed())
            printf("Validation: every element of every run equals %llu\n", (unsigned long long)reps);
    }
    free(tab);
    return pl_exit_status(com.json);
}
