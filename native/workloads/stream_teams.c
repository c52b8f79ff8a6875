/*
 * Team code of the nested STREAM variants; see stream_teams.h.
 */
#define _GNU_SOURCE
#include "stream_teams.h"
#include "pinlab_heartbeat.h"
#include "pinlab_mem.h"

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const char *const pl_policy_names[] = {"first-touch", "next-touch", "move-threads", "mixed"};

#define SCALAR 3.0
#define EPSILON 1e-13
#define A0 1.0
#define B0 2.0
#define C0 0.5

uint64_t pl_vectors_bytes(uint64_t n)
{
    return pl_mul_sat(pl_mul_sat(n, sizeof(double)), 3);
}

/* Base pages for a team's vector: the vectors of the teams lie side by side in memory, and a
 * transparent huge page spanning the end of one team's vector and the start of the next team's
 * would be placed (and moved) whole, on one of the two teams' nodes. */
static void base_pages(void *p, uint64_t bytes)
{
    madvise(p, (size_t)bytes, MADV_NOHUGEPAGE);
}

void pl_vectors_alloc(pl_vectors *v, uint64_t n)
{
    uint64_t bytes = pl_mul_sat(n, sizeof(double));
    v->n = n;
    v->a = pl_alloc(bytes, "a triad vector");
    v->b = pl_alloc(bytes, "a triad vector");
    v->c = pl_alloc(bytes, "a triad vector");
    base_pages(v->a, bytes), base_pages(v->b, bytes), base_pages(v->c, bytes);
}

void pl_vectors_alloc_api(pl_vectors *v, uint64_t n)
{
    uint64_t bytes = pl_mul_sat(n, sizeof(double));
    double **vectors[3] = {&v->a, &v->b, &v->c};
    v->n = n;
    v->api = 1;
    for (int i = 0; i < 3; i++)
        if (bytes > SIZE_MAX || pm_alloc((void **)vectors[i], (size_t)bytes, PM_FIRST_TOUCH, NULL, 0) != PM_OK)
            pl_usage_error("cannot allocate %s for a triad vector (%s); choose a smaller size", pl_fmt_bytes(bytes, 0), pm_last_error());
        else
            base_pages(*vectors[i], bytes);
}

void pl_vectors_next_touch(pl_vectors *v)
{
    double *vectors[3] = {v->a, v->b, v->c};
    for (int i = 0; i < 3; i++)
        if (pm_migrate_on_next_touch(vectors[i], PM_TOUCH_PAGE) != PM_OK)
            pl_warn("next touch not armed: %s", pm_last_error());
}

int pl_vectors_node(const pl_vectors *v)
{
    return pl_vector_node(v->a, v->n);
}

int pl_vector_node(const double *x, uint64_t n)
{
    long counts[256] = {0}, absent = 0;
    if (pm_where(x, (size_t)pl_mul_sat(n, sizeof(double)) & ~(size_t)4095, counts, 256, &absent) != PM_OK)
        return -1;
    int best = -1;
    for (int node = 0; node < 256; node++)
        if (counts[node] > 0 && (best < 0 || counts[node] > counts[best]))
            best = node;
    return best;
}

void pl_json_vector_pages(pl_json *j, const double *x, uint64_t n)
{
    long counts[256] = {0}, absent = 0;
    pl_json_begin_object(j, NULL);
    if (pm_where(x, (size_t)pl_mul_sat(n, sizeof(double)) & ~(size_t)4095, counts, 256, &absent) == PM_OK) {
        char node[16];
        for (int i = 0; i < 256; i++)
            if (counts[i] > 0) {
                snprintf(node, sizeof node, "%d", i);
                pl_json_int(j, node, counts[i]);
            }
    }
    pl_json_end_object(j);
}

void pl_vectors_free(pl_vectors *v)
{
    double *vectors[3] = {v->a, v->b, v->c};
    for (int i = 0; i < 3; i++)
        v->api ? (void)pm_free(vectors[i]) : free(vectors[i]);
    v->a = v->b = v->c = NULL;
}

int pl_vectors_init(pl_vectors *v, int k)
{
    double *a = v->a, *b = v->b, *c = v->c;
    uint64_t n = v->n;
    int team = 0;
#pragma omp parallel num_threads(k)
    {
#pragma omp master
        team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (uint64_t j = 0; j < n; j++) {
            a[j] = A0;
            b[j] = B0;
            c[j] = C0;
        }
    }
    return team;
}

int pl_vectors_triad(pl_vectors *v, int k, int reps, double *times)
{
    return pl_vectors_triad_on(v, k, reps, times, NULL, NULL);
}

int pl_vectors_triad_on(pl_vectors *v, int k, int reps, double *times, const int *cpus, int *seen)
{
    return pl_triad_on(v->a, v->b, v->c, v->n, k, reps, times, cpus, seen);
}

int pl_triad_on(double *a, const double *b, const double *c, uint64_t n, int k, int reps, double *times, const int *cpus,
                int *seen)
{
    const double q = SCALAR;
    int team = 0;
#pragma omp parallel num_threads(k)
    {
        int me = omp_get_thread_num();
        if (me == 0)
            team = omp_get_num_threads();
        if (cpus && pm_move_thread(0, cpus[me]) != PM_OK)
            pl_warn("thread %d of a team could not move to CPU %d: %s", me, cpus[me], pm_last_error());
        if (seen)
            seen[me] = sched_getcpu();
        for (int r = 0; r < reps; r++) {
#pragma omp barrier
            double t0 = pl_now();
#pragma omp for schedule(static) nowait
            for (uint64_t j = 0; j < n; j++)
                a[j] = b[j] + q * c[j];
            pinlab_beat(1);
#pragma omp barrier
            if (times && me == 0)
                times[r] = pl_now() - t0;
        }
    }
    return team;
}

/* Average relative error of x against `expected`, and the elements off by more than EPSILON. */
static double check_array(const double *x, uint64_t n, double expected, uint64_t *wrong)
{
    double sum = 0.0;
    uint64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum, bad)
    for (uint64_t j = 0; j < n; j++) {
        double err = fabs(x[j] - expected);
        sum += err;
        if (!(err / fabs(expected) <= EPSILON))
            bad++;
    }
    *wrong = bad;
    return sum / (double)n / fabs(expected);
}

void pl_vectors_check(pl_vectors *v, const char *label, int corrupt)
{
    if (corrupt)
        v->a[v->n / 2] = v->a[v->n / 2] * 1000.0 + 1.0;
    const double q = SCALAR;
    const struct { const char *name; const double *x; double expected; } arrays[3] = {
        {"a", v->a, B0 + q * C0}, {"b", v->b, B0}, {"c", v->c, C0}};
    for (int i = 0; i < 3; i++) {
        uint64_t wrong;
        double err = check_array(arrays[i].x, v->n, arrays[i].expected, &wrong);
        if (!(err <= EPSILON))
            pl_fail("%s, vector %s: average relative error %.3g exceeds %.0e (%llu of %llu elements differ "
                    "from the expected %g)", label, arrays[i].name, err, EPSILON, (unsigned long long)wrong,
                    (unsigned long long)v->n, arrays[i].expected);
    }
}

void pl_triad_rates(const double *times, int ntimes, uint64_t n, double *best_mbs, double *avg_mbs)
{
    int first = ntimes >= 2 ? 1 : 0;
    double sum = 0.0, lo = INFINITY;
    for (int r = first; r < ntimes; r++) {
        sum += times[r];
        lo = fmin(lo, times[r]);
    }
    double bytes = 3.0 * (double)sizeof(double) * (double)n;
    *best_mbs = 1e-6 * bytes / lo;
    *avg_mbs = 1e-6 * bytes / (sum / (ntimes - first));
}

void pl_teams_enable_nesting(void)
{
    if (omp_get_max_active_levels() < 2)
        omp_set_max_active_levels(2);
}

enum { OPT_TEAMS = PL_OPT_FIRST_PRIVATE, OPT_PER_TEAM, OPT_SIZE, OPT_NTIMES, OPT_POLICY, OPT_REMOTE };

int pl_parse_policy(const char *text)
{
    for (int i = 0; i < (int)(sizeof pl_policy_names / sizeof pl_policy_names[0]); i++)
        if (strcmp(text, pl_policy_names[i]) == 0)
            return i;
    pl_usage_error("unknown --policy '%s': use first-touch, next-touch, move-threads or mixed", text);
    return 0;
}

void pl_only_first_touch(const pl_team_args *a, const char *workload)
{
    if (a->policy != PL_POLICY_FIRST_TOUCH)
        pl_usage_error("--policy %s: %s has one phase, nothing changes owner in it; use it with twisted-stream", pl_policy_names[a->policy],
                       workload);
    if (a->remote != 3)
        pl_usage_error("--remote %d: %s has one phase, no team works on another's vectors; use it with twisted-stream", a->remote,
                       workload);
}

pl_team_args pl_parse_team_args(int argc, char **argv, void (*usage)(void))
{
    pl_team_args a = {.ntimes = 10, .remote = 3};
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"teams", required_argument, NULL, OPT_TEAMS},
        {"threads-per-team", required_argument, NULL, OPT_PER_TEAM},
        {"size", required_argument, NULL, OPT_SIZE},
        {"ntimes", required_argument, NULL, OPT_NTIMES},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"remote", required_argument, NULL, OPT_REMOTE},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        if (pl_common_option(&a.com, opt, argv))
            continue;
        switch (opt) {
        case OPT_TEAMS: a.teams = pl_parse_int("--teams", optarg, 1, PL_TEAMS_MAX); break;
        case OPT_PER_TEAM: a.per_team = pl_parse_int("--threads-per-team", optarg, 1, PL_MAX_THREADS); break;
        case OPT_SIZE: a.n = pl_parse_size("--size", optarg, sizeof(double)); break;
        case OPT_NTIMES: a.ntimes = (int)pl_parse_count("--ntimes", optarg, 2, 1000000); break;
        case OPT_POLICY: a.policy = pl_parse_policy(optarg); break;
        case OPT_REMOTE: a.remote = pl_parse_int("--remote", optarg, 2, 3); break;
        default: pl_usage_error("unhandled option (see --help)");
        }
    }
    pl_no_positional(argc, argv);
    if (a.com.help) {
        usage();
        exit(0);
    }
    a.threads = a.com.threads ? a.com.threads : omp_get_max_threads();
    if (!a.teams)
        a.teams = pl_numa_nodes();
    if (!a.per_team)
        a.per_team = a.threads / a.teams > 0 ? a.threads / a.teams : 1;
    if (!a.n)
        a.n = pl_stream_default_elements(sizeof(double), a.teams);
    pl_check_memory(pl_mul_sat(pl_vectors_bytes(a.n), (uint64_t)a.teams), "--size or --teams");
    omp_set_num_threads(a.threads);
    pl_teams_enable_nesting();
    return a;
}

void pl_json_team_parameters(pl_json *j, int used_threads, int teams, int per_team, uint64_t n)
{
    pl_json_start(j, stdout);
    pl_json_head(j, used_threads);
    pl_json_begin_object(j, "parameters");
    pl_json_int(j, "teams", teams);
    pl_json_int(j, "threads_per_team", per_team);
    pl_json_uint(j, "size_elements", n);
    pl_json_uint(j, "bytes_per_array", pl_mul_sat(n, sizeof(double)));
}
