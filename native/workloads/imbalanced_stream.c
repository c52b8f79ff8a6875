/*
 * pinlab-imbalanced-stream: nested STREAM triad with teams of unequal work.
 *
 * One team per NUMA node, as pinlab-nested-stream, but with twice as many threads per team as the
 * team has cores (two threads per core) and a different amount of work per team: team t runs the
 * triad over its own vectors work[t] times (default 15,15,30,1). The teams that finish early
 * leave their cores idle unless the runtime or the OS rebalances. Reports the time of each team
 * and the overall time.
 */
#define _GNU_SOURCE
#include "stream_teams.h"

#include <getopt.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_TEAMS = PL_OPT_FIRST_PRIVATE, OPT_PER_TEAM, OPT_SIZE, OPT_WORK };

#define DEFAULT_WORK "15,15,30,1"
#define WORK_MAX 1000000

static void usage(void)
{
    printf(
        "Usage: pinlab-imbalanced-stream [OPTIONS]\n"
        "STREAM's triad (a=b+q*c) with nested OpenMP, one team per NUMA node, each team on its own\n"
        "first-touched vectors, with a different amount of work per team. Reports the time of each\n"
        "team and the overall time.\n"
        "\n"
        "Options:\n"
        "  --teams T             number of teams (default: NUMA nodes with CPUs, here %d)\n"
        "  --work LIST           triad repetitions of each team, comma-separated (default " DEFAULT_WORK ");\n"
        "                        cycled or cut to T entries: with T=6, 15,15,30,1 gives 15,15,30,1,15,15\n"
        "  --threads-per-team K  threads of each team (default: with --threads N, N / T; otherwise two\n"
        "                        threads per core: 2 x (CPUs of the process / T), at least 2)\n"
        "  --threads N           total threads, used for the default K (OMP_NUM_THREADS is not used\n"
        "                        here: the default is two threads per core)\n"
        "  --size SIZE           length of each vector of each team: elements (20M; k/M/G/T x1000) or\n"
        "                        bytes (B/KB/MB/GB/TB x1000, KiB/MiB/GiB/TiB x1024). Default: 4x the total\n"
        "                        last-level cache divided by T, and at least 10M elements\n"
        "  --json                print one JSON object on stdout instead of the table\n"
        "  -h, --help            this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n",
        pl_numa_nodes());
}

/* "15,15,30,1" -> counts; exits 2 on a malformed list. */
static int *parse_work(const char *text, int *count)
{
    int cap = 8, n = 0;
    int *work = malloc((size_t)cap * sizeof *work);
    const char *s = text;
    if (!work)
        pl_usage_error("out of memory");
    for (;;) {
        size_t len = strcspn(s, ",");
        char item[64];
        if (len == 0 || len >= sizeof item)
            pl_usage_error("--work must be a comma-separated list of repetitions such as 15,15,30,1 (got '%s')",
                           text);
        memcpy(item, s, len);
        item[len] = '\0';
        if (n == PL_TEAMS_MAX)
            pl_usage_error("--work has more than %d entries", PL_TEAMS_MAX);
        if (n == cap) {
            cap *= 2;
            int *more = realloc(work, (size_t)cap * sizeof *work);
            if (!more)
                pl_usage_error("out of memory");
            work = more;
        }
        work[n++] = (int)pl_parse_count("--work entry", item, 1, WORK_MAX);
        if (!s[len])
            break;
        s += len + 1;
    }
    *count = n;
    return work;
}

int main(int argc, char **argv)
{
    pl_init("imbalanced-stream");
    pl_common com = {0};
    int teams = 0, per_team = 0;
    uint64_t n = 0;
    const char *work_text = DEFAULT_WORK;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"teams", required_argument, NULL, OPT_TEAMS},
        {"threads-per-team", required_argument, NULL, OPT_PER_TEAM},
        {"size", required_argument, NULL, OPT_SIZE},
        {"work", required_argument, NULL, OPT_WORK},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&com, opt, argv))
            continue;
        switch (opt) {
        case OPT_TEAMS: teams = pl_parse_int("--teams", optarg, 1, PL_TEAMS_MAX); break;
        case OPT_PER_TEAM: per_team = pl_parse_int("--threads-per-team", optarg, 1, PL_MAX_THREADS); break;
        case OPT_SIZE: n = pl_parse_size("--size", optarg, sizeof(double)); break;
        case OPT_WORK: work_text = optarg; break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (com.help) {
        usage();
        return 0;
    }
    int nwork;
    int *work_list = parse_work(work_text, &nwork);
    if (!teams)
        teams = pl_numa_nodes();
    if (!per_team) {
        if (com.threads)
            per_team = com.threads / teams > 0 ? com.threads / teams : 1;
        else
            per_team = 2 * (pl_mask_cpus() / teams > 0 ? pl_mask_cpus() / teams : 1);
    }
    if (!n)
        n = pl_stream_default_elements(sizeof(double), teams);
    pl_check_memory(pl_mul_sat(pl_vectors_bytes(n), (uint64_t)teams), "--size or --teams");
    if (com.threads)
        omp_set_num_threads(com.threads);
    pl_teams_enable_nesting();

    pl_vectors *vec = calloc((size_t)teams, sizeof *vec);
    int *work = calloc((size_t)teams, sizeof *work);
    int *team_threads = calloc((size_t)teams, sizeof *team_threads);
    double *team_start = calloc((size_t)teams, sizeof *team_start);
    double *team_end = calloc((size_t)teams, sizeof *team_end);
    if (!vec || !work || !team_threads || !team_start || !team_end)
        pl_usage_error("out of memory");
    for (int t = 0; t < teams; t++) {
        work[t] = work_list[t % nwork];
        pl_vectors_alloc(&vec[t], n);
    }

    int outer = 0;
    double start = 0.0;
#pragma omp parallel num_threads(teams)
    {
        int me = omp_get_thread_num(), nout = omp_get_num_threads();
        if (me == 0)
            outer = nout;
        for (int t = me; t < teams; t += nout)
            pl_vectors_init(&vec[t], per_team);
#pragma omp barrier
        /* single, not master: its closing barrier keeps every team from starting before start is
         * taken, so the overall time encloses each team's own. */
#pragma omp single
        start = pl_now();
        for (int t = me; t < teams; t += nout) {
            team_start[t] = pl_now();
            team_threads[t] = pl_vectors_triad(&vec[t], per_team, work[t], NULL);
            team_end[t] = pl_now();
        }
    }
    double last = start;
    for (int t = 0; t < teams; t++)
        if (team_end[t] > last)
            last = team_end[t];
    double overall = last - start;
    if (outer < teams)
        pl_warn("OpenMP gave %d outer threads for %d teams; some teams ran one after the other", outer, teams);

    int used = 0;
    for (int t = 0; t < teams; t++) {
        if (team_threads[t] != per_team)
            pl_warn("team %d ran with %d threads instead of %d (nested parallelism limited?)", t,
                    team_threads[t], per_team);
        used += team_threads[t];
        char label[32];
        snprintf(label, sizeof label, "team %d", t);
        pl_vectors_check(&vec[t], label, com.corrupt && t == 0);
    }

    uint64_t array_bytes = pl_mul_sat(n, sizeof(double));
    if (com.json) {
        pl_json j;
        pl_json_team_parameters(&j, used, teams, per_team, n);
        pl_json_begin_array(&j, "work");
        for (int t = 0; t < teams; t++)
            pl_json_int(&j, NULL, work[t]);
        pl_json_end_array(&j);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", overall);
        pl_json_begin_object(&j, "results");
        pl_json_begin_array(&j, "teams");
        for (int t = 0; t < teams; t++) {
            pl_json_begin_object(&j, NULL);
            pl_json_int(&j, "team", t);
            pl_json_int(&j, "threads", team_threads[t]);
            pl_json_int(&j, "repetitions", work[t]);
            pl_json_double(&j, "seconds", team_end[t] - team_start[t]);
            pl_json_end_object(&j);
        }
        pl_json_end_array(&j);
        pl_json_double(&j, "overall_seconds", overall);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-imbalanced-stream: %d teams x %d threads, 3 vectors of %llu doubles (%s each) per team\n",
               teams, per_team, (unsigned long long)n, pl_fmt_bytes(array_bytes, 0));
        printf("%-6s %8s %12s %12s\n", "Team", "Threads", "Repetitions", "Seconds");
        for (int t = 0; t < teams; t++)
            printf("%-6d %8d %12d %12.6f\n", t, team_threads[t], work[t], team_end[t] - team_start[t]);
        printf("Overall: %.6f s\n", overall);
        if (!pl_failed())
            printf("Validation: every team's vectors hold the expected values\n");
    }
    for (int t = 0; t < teams; t++)
        pl_vectors_free(&vec[t]);
    free(vec);
    free(work);
    free(work_list);
    free(team_threads);
    free(team_start);
    free(team_end);
    return pl_exit_status(com.json);
}
