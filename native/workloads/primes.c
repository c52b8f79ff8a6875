/*
 * pinlab-primes: a CPU-bound workload. Counts the primes below --limit by trial division by odd
 * numbers, in parallel with a dynamic schedule (the cost of a number grows with its size and
 * primality). The count is checked against a serial sieve of Eratosthenes, outside the timed part.
 */
#define _GNU_SOURCE
#include "common.h"
#include "pinlab_heartbeat.h"

#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_LIMIT = PL_OPT_FIRST_PRIVATE };

#define LIMIT_MAX 4294967296ULL /* numbers below 2^32: 32-bit divisions */
#define CHUNK 1024              /* odd candidates per scheduled chunk (and per heartbeat) */

static void usage(void)
{
    printf(
        "Usage: pinlab-primes [OPTIONS]\n"
        "Counts the primes below a limit by trial division (CPU-bound, dynamic chunks of 1024 odd\n"
        "numbers) and checks the count with a sieve of Eratosthenes (not timed). One heartbeat per\n"
        "chunk (PINLAB_HEARTBEAT, see pinlab_heartbeat.h).\n"
        "\n"
        "Options:\n"
        "  --limit L    count the primes p < L; 1..4294967296, k/M/G x1000 allowed (default 20M)\n"
        "  --threads N  OpenMP threads (default: OMP_NUM_THREADS or the CPUs of the process)\n"
        "  --json       print one JSON object on stdout instead of the text\n"
        "  -h, --help   this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n");
}

/* x odd and >= 3; adds the trial divisions made to *tests (counted from d at the end, not in
 * the loop: the heartbeat's unit of work costs nothing to count). */
static int is_prime_odd(uint32_t x, uint64_t *tests)
{
    uint32_t d = 3;
    for (; (uint64_t)d * d <= x; d += 2)
        if (x % d == 0) {
            *tests += (d - 3) / 2 + 1;
            return 0;
        }
    *tests += (d - 3) / 2;
    return 1;
}

/* Primes below limit with a sieve of the odd numbers (one byte per odd number). */
static uint64_t sieve_count(uint64_t limit)
{
    if (limit <= 2)
        return 0;
    uint64_t odds = limit / 2; /* entry i stands for 2i+1, i in [0, odds) covers 1..limit-1 */
    unsigned char *composite = calloc(odds, 1);
    if (!composite)
        pl_usage_error("cannot allocate %s for the sieve; choose a smaller --limit", pl_fmt_bytes(odds, 0));
    uint64_t count = 1; /* 2 */
    for (uint64_t i = 1; i < odds; i++) {
        if (composite[i])
            continue;
        count++;
        uint64_t p = 2 * i + 1;
        for (uint64_t mult = p * p; mult < limit; mult += 2 * p)
            composite[mult / 2] = 1;
    }
    free(composite);
    return count;
}

int main(int argc, char **argv)
{
    pl_init("primes");
    pl_common com = {0};
    uint64_t limit = 20000000;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"limit", required_argument, NULL, OPT_LIMIT},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&com, opt, argv))
            continue;
        switch (opt) {
        case OPT_LIMIT: limit = pl_parse_count("--limit", optarg, 1, LIMIT_MAX); break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (com.help) {
        usage();
        return 0;
    }
    pl_check_memory(limit / 2 + 1, "--limit"); /* the sieve of the check */
    if (com.threads)
        omp_set_num_threads(com.threads);

    int team = 0;
    uint64_t count = 0;
    double t0 = pl_now();
#pragma omp parallel reduction(+ : count)
    {
#pragma omp master
        team = omp_get_num_threads();
        /* Odd candidates 2i+1 for i in [1, limit/2): 3, 5, ... below limit, in chunks of CHUNK
         * handed out dynamically. Each chunk done is a heartbeat of the thread that did it, of
         * as many units as it cost: one per candidate and one per trial division (a chunk of
         * large numbers costs far more than one of small ones, and a rate of chunks would fall
         * as the run goes on whatever the placement). */
        uint64_t end = limit / 2, chunks = end > 1 ? (end - 1 + CHUNK - 1) / CHUNK : 0;
#pragma omp for schedule(dynamic, 1)
        for (uint64_t k = 0; k < chunks; k++) {
            uint64_t first = 1 + k * CHUNK, last = first + CHUNK < end ? first + CHUNK : end;
            uint64_t tests = 0;
            for (uint64_t i = first; i < last; i++)
                count += (uint64_t)is_prime_odd((uint32_t)(2 * i + 1), &tests);
            pinlab_beat(tests + (last - first));
        }
    }
    if (limit > 2)
        count += 1; /* 2 */
    double elapsed = pl_now() - t0;

    if (com.corrupt)
        count += 1;
    uint64_t expected = sieve_count(limit);
    if (count != expected)
        pl_fail("counted %llu primes below %llu, the sieve finds %llu", (unsigned long long)count,
                (unsigned long long)limit, (unsigned long long)expected);

    if (com.json) {
        pl_json j;
        pl_json_start(&j, stdout);
        pl_json_head(&j, team);
        pl_json_begin_object(&j, "parameters");
        pl_json_uint(&j, "limit", limit);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        pl_json_uint(&j, "count", count);
        pl_json_uint(&j, "expected", expected);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-primes: %d threads, %llu primes below %llu, %.6f s\n", team, (unsigned long long)count,
               (unsigned long long)limit, elapsed);
        if (!pl_failed())
            printf("Validation: the sieve of Eratosthenes finds the same count\n");
    }
    return pl_exit_status(com.json);
}
