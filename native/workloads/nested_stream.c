/*
 * pinlab-nested-stream: STREAM's triad with nested OpenMP, one team per NUMA node.
 *
 * An outer parallel region has one master thread per team. Each team has its own vectors,
 * first touched by the team's inner parallel region of K threads (so they land where the team
 * runs under a first-touch policy); the team then runs the triad --ntimes times. All teams start
 * the triad together, after every team has initialised its vectors. Per team: best and average
 * triad MB/s (first repetition not counted); total: the sum of the team bests.
 */
#define _GNU_SOURCE
#include "stream_teams.h"

#include <omp.h>
#include <stdlib.h>


static void usage(void)
{
    printf(
        "Usage: pinlab-nested-stream [OPTIONS]\n"
        "STREAM's triad (a=b+q*c) with nested OpenMP: an outer region with one master per team, each\n"
        "team on its own vectors, first touched and worked on by an inner region of the team's threads.\n"
        "Reports the best and average triad MB/s of each team (1 MB = 1e6 B) and the sum of the bests.\n"
        "\n"
        "Options:\n"
        "  --teams T             number of teams (default: NUMA nodes with CPUs, here %d)\n"
        "  --threads-per-team K  threads of each team (default: threads / T, at least 1)\n"
        "  --threads N           total threads, used for the default K (default: OMP_NUM_THREADS or\n"
        "                        the CPUs of the process)\n"
        "  --size SIZE           length of each vector of each team: elements (20M; k/M/G/T x1000) or\n"
        "                        bytes (B/KB/MB/GB/TB x1000, KiB/MiB/GiB/TiB x1024). Default: 4x the total\n"
        "                        last-level cache divided by T, and at least 10M elements\n"
        "  --ntimes N            triad repetitions per team, 2..1000000 (default 10); the first is not counted\n"
        "  --json                print one JSON object on stdout instead of the table\n"
        "  -h, --help            this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n",
        pl_numa_nodes());
}

int main(int argc, char **argv)
{
    pl_init("nested-stream");
    pl_team_args args = pl_parse_team_args(argc, argv, usage);
    pl_only_first_touch(&args, "nested-stream");
    pl_common com = args.com;
    int teams = args.teams, per_team = args.per_team, ntimes = args.ntimes, threads = args.threads;
    uint64_t n = args.n;

    pl_vectors *vec = calloc((size_t)teams, sizeof *vec);
    int *team_threads = calloc((size_t)teams, sizeof *team_threads);
    double *times = calloc((size_t)teams * (size_t)ntimes, sizeof *times);
    if (!vec || !team_threads || !times)
        pl_usage_error("out of memory");
    for (int t = 0; t < teams; t++)
        pl_vectors_alloc(&vec[t], n);

    int outer = 0;
    double start = 0.0, end = 0.0;
#pragma omp parallel num_threads(teams)
    {
        int me = omp_get_thread_num(), nout = omp_get_num_threads();
        if (me == 0)
            outer = nout;
        /* With fewer outer threads than teams (a thread limit), a master runs several teams. */
        for (int t = me; t < teams; t += nout)
            pl_vectors_init(&vec[t], per_team);
#pragma omp barrier
#pragma omp single /* its closing barrier: no team starts before start is taken */
        start = pl_now();
        for (int t = me; t < teams; t += nout)
            team_threads[t] = pl_vectors_triad(&vec[t], per_team, ntimes, &times[(size_t)t * ntimes]);
#pragma omp barrier
#pragma omp master
        end = pl_now();
    }
    double elapsed = end - start;
    if (outer < teams)
        pl_warn("OpenMP gave %d outer threads for %d teams; some teams ran one after the other", outer, teams);

    int used = 0;
    double total_best = 0.0;
    double *best = calloc((size_t)teams, sizeof *best), *avg = calloc((size_t)teams, sizeof *avg);
    if (!best || !avg)
        pl_usage_error("out of memory");
    for (int t = 0; t < teams; t++) {
        if (team_threads[t] != per_team)
            pl_warn("team %d ran with %d threads instead of %d (nested parallelism limited?)", t,
                    team_threads[t], per_team);
        used += team_threads[t];
        pl_triad_rates(&times[(size_t)t * ntimes], ntimes, n, &best[t], &avg[t]);
        total_best += best[t];
        char label[32];
        snprintf(label, sizeof label, "team %d", t);
        pl_vectors_check(&vec[t], label, com.corrupt && t == 0);
    }

    uint64_t array_bytes = pl_mul_sat(n, sizeof(double));
    if (com.json) {
        pl_json j;
        pl_json_team_parameters(&j, used, teams, per_team, n);
        pl_json_int(&j, "ntimes", ntimes);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        pl_json_begin_array(&j, "teams");
        for (int t = 0; t < teams; t++) {
            pl_json_begin_object(&j, NULL);
            pl_json_int(&j, "team", t);
            pl_json_int(&j, "threads", team_threads[t]);
            pl_json_double(&j, "triad_best_mbs", best[t]);
            pl_json_double(&j, "triad_avg_mbs", avg[t]);
            pl_json_end_object(&j);
        }
        pl_json_end_array(&j);
        pl_json_double(&j, "total_triad_best_mbs", total_best);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-nested-stream: %d teams x %d threads, 3 vectors of %llu doubles (%s each) per team, "
               "%d triads (the first not counted)\n",
               teams, per_team, (unsigned long long)n, pl_fmt_bytes(array_bytes, 0), ntimes);
        printf("%-6s %8s %16s %16s\n", "Team", "Threads", "Triad best MB/s", "Triad avg MB/s");
        for (int t = 0; t < teams; t++)
            printf("%-6d %8d %16.1f %16.1f\n", t, team_threads[t], best[t], avg[t]);
        printf("Total of the team bests: %.1f MB/s\n", total_best);
        printf("Timed part: %.6f s\n", elapsed);
        if (!pl_failed())
            printf("Validation: every team's vectors hold the expected values\n");
    }
    for (int t = 0; t < teams; t++)
        pl_vectors_free(&vec[t]);
    free(vec);
    free(team_threads);
    free(times);
    free(best);
    free(avg);
    return pl_exit_status(com.json);
}
