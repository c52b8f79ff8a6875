/*
 * pinlab-stream: the four STREAM kernels (copy, scale, add, triad) on three arrays of doubles.
 *
 * The arrays are first touched in parallel with the same static schedule as the kernels, so
 * that each thread's part lies on its own NUMA node under a first-touch policy. Every kernel is
 * one "omp parallel for schedule(static)" and is timed on its own; the first of the --ntimes
 * iterations is not counted. Rates are in MB/s with 1 MB = 1e6 bytes; copy and scale move two
 * arrays, add and triad three.
 *
 * Validation: the final values of a, b and c are recomputed as scalars from the sequence of
 * kernels and compared, element by element, with an average relative error tolerance of 1e-13.
 */
#define _GNU_SOURCE
#include "common.h"
#include "pinlab_heartbeat.h"

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define SCALAR 3.0
#define EPSILON 1e-13
#define NTIMES_MAX 250 /* the values grow 15x per iteration; 15^262 would overflow a double */

enum { K_COPY, K_SCALE, K_ADD, K_TRIAD, NKERNELS };
static const char *const kernel_names[NKERNELS] = {"copy", "scale", "add", "triad"};
static const int kernel_arrays[NKERNELS] = {2, 2, 3, 3};

enum { OPT_SIZE = PL_OPT_FIRST_PRIVATE, OPT_NTIMES };

static void usage(void)
{
    printf(
        "Usage: pinlab-stream [OPTIONS]\n"
        "STREAM's copy (c=a), scale (b=q*c), add (c=a+b) and triad (a=b+q*c) kernels on three\n"
        "arrays of doubles, first touched in parallel; best/avg/min/max MB/s per kernel (1 MB = 1e6 B).\n"
        "\n"
        "Options:\n"
        "  --size SIZE    length of each array: elements (1000, 20M; k/M/G/T x1000) or bytes with\n"
        "                 B/KB/MB/GB/TB (x1000) or KiB/MiB/GiB/TiB (x1024). Default: 4x the total\n"
        "                 last-level cache of the machine and at least 10M elements\n"
        "  --ntimes N     iterations of the four kernels, 2..%d (default 10); the first is not counted\n"
        "  --threads N    OpenMP threads (default: OMP_NUM_THREADS or the CPUs of the process)\n"
        "  --json         print one JSON object on stdout instead of the table\n"
        "  -h, --help     this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n",
        NTIMES_MAX);
}

/* Average relative error of x against `expected`; counts the elements off by more than eps. */
static double check_array(const double *x, uint64_t n, double expected, uint64_t *wrong)
{
    double sum = 0.0;
    uint64_t bad = 0;
    double scale = expected != 0.0 ? fabs(expected) : 1.0;
#pragma omp parallel for schedule(static) reduction(+ : sum, bad)
    for (uint64_t j = 0; j < n; j++) {
        double err = fabs(x[j] - expected);
        sum += err;
        if (!(err / scale <= EPSILON))
            bad++;
    }
    *wrong = bad;
    return sum / (double)n / scale;
}

int main(int argc, char **argv)
{
    pl_init("stream");
    pl_common com = {0};
    uint64_t n = 0;
    int ntimes = 10;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"size", required_argument, NULL, OPT_SIZE},
        {"ntimes", required_argument, NULL, OPT_NTIMES},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&com, opt, argv))
            continue;
        switch (opt) {
        case OPT_SIZE: n = pl_parse_size("--size", optarg, sizeof(double)); break;
        case OPT_NTIMES: ntimes = (int)pl_parse_count("--ntimes", optarg, 2, NTIMES_MAX); break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (com.help) {
        usage();
        return 0;
    }
    if (n == 0)
        n = pl_stream_default_elements(sizeof(double), 1);
    uint64_t array_bytes = pl_mul_sat(n, sizeof(double));
    pl_check_memory(pl_mul_sat(array_bytes, 3), "--size");
    if (com.threads)
        omp_set_num_threads(com.threads);

    /* One block, each array a few cache lines further than the previous one's end: arrays that
     * start at the same offset in their pages would have a[j], b[j] and c[j] compete for the
     * same cache sets and 4 KiB alias slots (STREAM pads its arrays for the same reason). */
    const uint64_t gap = 17 * 64;
    char *block = pl_alloc(pl_mul_sat(array_bytes + gap, 3), "the arrays");
    double *a = (double *)block;
    double *b = (double *)(block + array_bytes + gap);
    double *c = (double *)(block + 2 * (array_bytes + gap));
    double (*times)[NKERNELS] = calloc((size_t)ntimes, sizeof *times);
    if (!times)
        pl_usage_error("out of memory");

    int team = 0;
#pragma omp parallel
    {
#pragma omp master
        team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (uint64_t j = 0; j < n; j++) {
            a[j] = 1.0;
            b[j] = 2.0;
            c[j] = 0.0;
        }
    }

    const double q = SCALAR;
    double start = pl_now();
    for (int k = 0; k < ntimes; k++) {
        double t = pl_now();
#pragma omp parallel
        {
#pragma omp for schedule(static) nowait
            for (uint64_t j = 0; j < n; j++)
                c[j] = a[j];
            pinlab_beat(1);
        }
        times[k][K_COPY] = pl_now() - t;

        t = pl_now();
#pragma omp parallel
        {
#pragma omp for schedule(static) nowait
            for (uint64_t j = 0; j < n; j++)
                b[j] = q * c[j];
            pinlab_beat(1);
        }
        times[k][K_SCALE] = pl_now() - t;

        t = pl_now();
#pragma omp parallel
        {
#pragma omp for schedule(static) nowait
            for (uint64_t j = 0; j < n; j++)
                c[j] = a[j] + b[j];
            pinlab_beat(1);
        }
        times[k][K_ADD] = pl_now() - t;

        t = pl_now();
#pragma omp parallel
        {
#pragma omp for schedule(static) nowait
            for (uint64_t j = 0; j < n; j++)
                a[j] = b[j] + q * c[j];
            pinlab_beat(1);
        }
        times[k][K_TRIAD] = pl_now() - t;
    }
    double elapsed = pl_now() - start;

    if (com.corrupt)
        a[n / 2] = a[n / 2] * 1000.0 + 1.0;

    /* Statistics, first iteration left out. */
    double best[NKERNELS], avg_mbs[NKERNELS], min_mbs[NKERNELS], avg_t[NKERNELS], min_t[NKERNELS],
        max_t[NKERNELS];
    for (int i = 0; i < NKERNELS; i++) {
        double sum = 0.0, lo = INFINITY, hi = 0.0;
        for (int k = 1; k < ntimes; k++) {
            sum += times[k][i];
            lo = fmin(lo, times[k][i]);
            hi = fmax(hi, times[k][i]);
        }
        double bytes = (double)kernel_arrays[i] * (double)array_bytes;
        avg_t[i] = sum / (ntimes - 1);
        min_t[i] = lo;
        max_t[i] = hi;
        best[i] = 1e-6 * bytes / lo;
        avg_mbs[i] = 1e-6 * bytes / avg_t[i];
        min_mbs[i] = 1e-6 * bytes / hi;
    }

    /* Validation: the same sequence of kernels on scalars. */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = q * cj;
        cj = aj + bj;
        aj = bj + q * cj;
    }
    const struct { const char *name; const double *x; double expected; } arrays[3] = {
        {"a", a, aj}, {"b", b, bj}, {"c", c, cj}};
    for (int i = 0; i < 3; i++) {
        uint64_t wrong;
        double err = check_array(arrays[i].x, n, arrays[i].expected, &wrong);
        if (!(err <= EPSILON))
            pl_fail("array %s: average relative error %.3g exceeds %.0e (%llu of %llu elements differ from "
                    "the expected %.17g)", arrays[i].name, err, EPSILON, (unsigned long long)wrong,
                    (unsigned long long)n, arrays[i].expected);
    }

    if (com.json) {
        pl_json j;
        pl_json_start(&j, stdout);
        pl_json_head(&j, team);
        pl_json_begin_object(&j, "parameters");
        pl_json_uint(&j, "size_elements", n);
        pl_json_uint(&j, "bytes_per_array", array_bytes);
        pl_json_int(&j, "ntimes", ntimes);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        for (int i = 0; i < NKERNELS; i++) {
            pl_json_begin_object(&j, kernel_names[i]);
            pl_json_double(&j, "best_mbs", best[i]);
            pl_json_double(&j, "avg_mbs", avg_mbs[i]);
            pl_json_double(&j, "min_mbs", min_mbs[i]);
            pl_json_double(&j, "max_mbs", best[i]);
            pl_json_double(&j, "avg_time", avg_t[i]);
            pl_json_double(&j, "min_time", min_t[i]);
            pl_json_double(&j, "max_time", max_t[i]);
            pl_json_end_object(&j);
        }
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-stream: %d threads, 3 arrays of %llu doubles (%s each, %s in all), %d iterations "
               "(the first not counted)\n",
               team, (unsigned long long)n, pl_fmt_bytes(array_bytes, 0),
               pl_fmt_bytes(pl_mul_sat(array_bytes, 3), 1), ntimes);
        printf("%-8s %12s %12s %12s %12s %11s %11s %11s\n", "Kernel", "Best MB/s", "Avg MB/s", "Min MB/s",
               "Max MB/s", "Avg time", "Min time", "Max time");
        for (int i = 0; i < NKERNELS; i++)
            printf("%-8s %12.1f %12.1f %12.1f %12.1f %11.6f %11.6f %11.6f\n", kernel_names[i], best[i],
                   avg_mbs[i], min_mbs[i], best[i], avg_t[i], min_t[i], max_t[i]);
        printf("Timed part: %.6f s\n", elapsed);
        if (!pl_failed())
            printf("Validation: a, b and c hold the expected values (average relative error <= %.0e)\n",
                   EPSILON);
    }
    free(times);
    free(block);
    return pl_exit_status(com.json);
}
