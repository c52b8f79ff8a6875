/*
 * pinlab-imbalanced-stream: nested STREAM triad with teams of unequal work.
 *
 * One team per NUMA node, as pinlab-nested-stream, but with twice as many threads per team as the
 * team has cores (two threads per core) and a different amount of work per team: team t runs the
 * triad over its own vectors work[t] times (default 15,15,30,1). The teams that finish early
 * leave their cores idle unless the runtime or the OS rebalances. Reports the time of each team
 * and the overall time.
 *
 * Each thread of a team owns one part of each of its team's vectors (page-aligned, the same part in
 * the first touch and in every triad). --place-teams puts team t's threads, two per CPU, on the
 * CPUs of node t mod N that the process may use (the seed's layout, without a placement tool).
 *
 * --policy ([broquedis2010forestgomp], section 5.5: work stealing with and without the data): first-touch (default)
 * steals nothing; with the others, a team that finishes steals half of the threads of the running
 * team with the most repetitions left (at most one per CPU its own threads used), which move to
 * those CPUs as their next repetition starts: move-threads moves the threads only (their data stays
 * behind: remote accesses), mixed moves each stolen thread with its parts of the vectors (attached
 * to it with pinlab's memory API, moved at once: the seed's Memory scheduler), next-touch moves the
 * thread and marks its parts to follow it page by page as it touches them. Each team is robbed at
 * most once. The JSON gives, per team, who stole from it and when, the CPU each thread ended on,
 * and the node of each thread's part of vector a after the run.
 */
#define _GNU_SOURCE
#include "stream_teams.h"
#include "pinlab_heartbeat.h"
#include "pinlab_mem.h"

#include <getopt.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { OPT_TEAMS = PL_OPT_FIRST_PRIVATE, OPT_PER_TEAM, OPT_SIZE, OPT_WORK, OPT_POLICY, OPT_PLACE };

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
        "  --policy P            when a team finishes, it steals half the threads of the team with the\n"
        "                        most work left: first-touch (default: no stealing), move-threads\n"
        "                        (threads only), mixed (threads and their data at once), next-touch\n"
        "                        (threads, and their data as they touch it)\n"
        "  --place-teams         team t's threads pin themselves, two per CPU, on node t mod N\n"
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

/* One team's vectors: contiguous and page-aligned, cut into k parts of `part` elements (a whole
 * number of pages), part i belonging to thread i of the team. With the memory API, each part of
 * each vector is a registered region, so that it can be attached, moved, or marked on its own. */
typedef struct {
    pl_vectors v;
    uint64_t part;
    int k;
    int registered;
} team_vectors;

/* What the teams tell each other about stealing. */
typedef struct {
    _Atomic int remaining; /* repetitions left */
    _Atomic int thief;     /* -1, -2 while a thief fills in count, or the team that took threads of this one */
    int count;             /* threads taken (the last `count` of the team), set before thief */
    double stolen_at;      /* seconds since the start */
    int *cpus;             /* CPU each thread ran its last repetition on */
    int team_size;         /* threads the team really had (known to all before any team starts) */
} team_state;

#define PAGE_DOUBLES 512 /* 4 KiB */

static void vectors_alloc(team_vectors *tv, uint64_t n, int k, int api)
{
    uint64_t part = (n + (uint64_t)k - 1) / (uint64_t)k;
    part = (part + PAGE_DOUBLES - 1) / PAGE_DOUBLES * PAGE_DOUBLES;
    uint64_t bytes = pl_mul_sat(pl_mul_sat(part, (uint64_t)k), sizeof(double));
    double **vectors[3] = {&tv->v.a, &tv->v.b, &tv->v.c};
    tv->v.n = n;
    tv->part = part;
    tv->k = k;
    tv->registered = api;
    for (int i = 0; i < 3; i++) {
        if (bytes > SIZE_MAX || posix_memalign((void **)vectors[i], 4096, (size_t)bytes) != 0)
            pl_usage_error("cannot allocate %s for a triad vector; choose a smaller --size", pl_fmt_bytes(bytes, 0));
        if (api) /* parts move one by one: base pages, or a huge page would carry its neighbours' parts */
            madvise(*vectors[i], (size_t)bytes, MADV_NOHUGEPAGE);
        for (int p = 0; api && p < k; p++)
            if (pm_register(*vectors[i] + (uint64_t)p * part, (size_t)(part * sizeof(double))) != PM_OK)
                pl_usage_error("cannot register a part of a triad vector: %s", pm_last_error());
    }
}

static void vectors_free(team_vectors *tv)
{
    double *vectors[3] = {tv->v.a, tv->v.b, tv->v.c};
    for (int i = 0; i < 3; i++) {
        for (int p = 0; tv->registered && p < tv->k; p++)
            pm_free(vectors[i] + (uint64_t)p * tv->part);
        free(vectors[i]);
    }
}

/* The elements [lo, hi) of part p (empty past n). */
static void part_range(const team_vectors *tv, int p, uint64_t *lo, uint64_t *hi)
{
    uint64_t n = tv->v.n;
    *lo = (uint64_t)p * tv->part < n ? (uint64_t)p * tv->part : n;
    *hi = *lo + tv->part < n ? *lo + tv->part : n;
}

/* Pins the calling thread on the idx-th CPU of node `node` among those the process may use, two
 * threads per CPU (idx / 2); returns 0 when the node has none. */
static int place_on_node(int node, int idx, const int *allowed, int nallowed)
{
    int mine[1024], count = 0;
    for (int i = 0; i < nallowed && count < 1024; i++) {
        int n;
        if (pm_node_of_cpu(allowed[i], &n) == PM_OK && n == node)
            mine[count++] = allowed[i];
    }
    if (count == 0)
        return 0;
    int cpu = mine[(idx / 2) % count];
    if (pm_move_thread(0, cpu) != PM_OK)
        pl_warn("could not pin a thread of the team of node %d on CPU %d: %s", node, cpu, pm_last_error());
    return 1;
}

/* The stolen thread moves to `cpu`; what its parts of the vectors do depends on the policy. */
static void move_stolen(team_vectors *tv, int me, int kk, int cpu, int policy)
{
    if (pm_move_thread(0, cpu) != PM_OK) /* mixed: the parts attached to the thread move with it */
        pl_warn("a stolen thread could not move to CPU %d: %s", cpu, pm_last_error());
    if (policy != PL_POLICY_NEXT_TOUCH)
        return;
    double *vectors[3] = {tv->v.a, tv->v.b, tv->v.c};
    for (int p = me; p < tv->k; p += kk)
        for (int i = 0; i < 3; i++)
            if (pm_migrate_on_next_touch(vectors[i] + (uint64_t)p * tv->part, PM_TOUCH_PAGE) != PM_OK)
                pl_warn("next touch not armed: %s", pm_last_error());
}

/* Where a team's threads go (--place-teams): node, or -1 to stay; the CPUs the process may use. */
typedef struct {
    int node;
    const int *allowed;
    int nallowed;
} team_place;

/* The calling thread of a team's parallel region pinned as --place-teams says. A nested region
 * may be run by other threads than the previous one (OpenMP keeps no nested pool), so each region
 * places its threads again. */
static void place_me(const team_place *where, int me)
{
    if (where->node >= 0 && !place_on_node(where->node, me, where->allowed, where->nallowed) && me == 0)
        pl_warn("--place-teams: node %d has no CPU this process may use; its team runs where it is", where->node);
}

/* First touch by the team's k threads, each of its own parts. */
static int team_init(team_vectors *tv, int k, const team_place *where)
{
    int team = 0;
#pragma omp parallel num_threads(k)
    {
        int me = omp_get_thread_num(), kk = omp_get_num_threads();
        if (me == 0)
            team = kk;
        place_me(where, me);
        for (int p = me; p < tv->k; p += kk) {
            uint64_t lo, hi;
            part_range(tv, p, &lo, &hi);
            for (uint64_t j = lo; j < hi; j++) {
                tv->v.a[j] = 1.0;
                tv->v.b[j] = 2.0;
                tv->v.c[j] = 0.5;
            }
        }
    }
    return team;
}

/* The triad `reps` times; the last threads of the team move when another team steals them. With
 * mixed, each thread's parts are attached to it (so that moving it moves them). */
static void team_triad(team_vectors *tv, int k, int reps, int policy, int t, team_state *st, const team_place *where)
{
    const double q = 3.0;
#pragma omp parallel num_threads(k)
    {
        int me = omp_get_thread_num(), kk = omp_get_num_threads();
        int moved = 0;
        if (me == 0)
            st[t].team_size = kk;
        place_me(where, me);
        double *vectors[3] = {tv->v.a, tv->v.b, tv->v.c};
        for (int p = me; policy == PL_POLICY_MIXED && p < tv->k; p += kk)
            for (int i = 0; i < 3; i++)
                if (pm_attach(vectors[i] + (uint64_t)p * tv->part, 0) != PM_OK)
                    pl_warn("cannot attach a part of a vector: %s", pm_last_error());
#pragma omp barrier
        for (int r = 0; r < reps; r++) {
            int thief = atomic_load_explicit(&st[t].thief, memory_order_acquire);
            if (thief >= 0 && !moved && me >= kk - st[t].count) {
                int *cpus = st[thief].cpus, ncpus = 0, distinct[1024];
                for (int i = 0; i < st[thief].team_size && ncpus < 1024; i++) {
                    int seen = 0;
                    for (int d = 0; d < ncpus; d++)
                        seen |= distinct[d] == cpus[i];
                    if (!seen && cpus[i] >= 0)
                        distinct[ncpus++] = cpus[i];
                }
                if (ncpus > 0)
                    move_stolen(tv, me, kk, distinct[(me - (kk - st[t].count)) % ncpus], policy);
                moved = 1;
            }
            for (int p = me; p < tv->k; p += kk) {
                uint64_t lo, hi;
                part_range(tv, p, &lo, &hi);
                double *a = tv->v.a;
                const double *b = tv->v.b, *c = tv->v.c;
                for (uint64_t j = lo; j < hi; j++)
                    a[j] = b[j] + q * c[j];
            }
            pinlab_beat(1);
            st[t].cpus[me] = sched_getcpu();
#pragma omp barrier
            if (me == 0)
                atomic_store(&st[t].remaining, reps - r - 1);
        }
    }
}

/* Team t has finished: it takes half the threads of the running team with the most work left
 * (at most one per CPU its own threads used), unless every team was robbed already. */
static void steal_for(int t, int teams, team_state *st, double start)
{
    int cpus = 0;
    for (int i = 0; i < st[t].team_size; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= st[t].cpus[j] == st[t].cpus[i];
        cpus += !seen && st[t].cpus[i] >= 0;
    }
    for (;;) {
        int victim = -1, most = 0;
        for (int v = 0; v < teams; v++) {
            int left = atomic_load(&st[v].remaining);
            if (v != t && atomic_load(&st[v].thief) < 0 && left > most && st[v].team_size > 1)
                victim = v, most = left;
        }
        if (victim < 0 || cpus == 0)
            return;
        int none = -1;
        if (!atomic_compare_exchange_strong(&st[victim].thief, &none, -2))
            continue; /* another finished team took it meanwhile: choose again */
        st[victim].count = st[victim].team_size / 2 < cpus ? st[victim].team_size / 2 : cpus;
        st[victim].stolen_at = pl_now() - start;
        atomic_store_explicit(&st[victim].thief, t, memory_order_release);
        return;
    }
}

int main(int argc, char **argv)
{
    pl_init("imbalanced-stream");
    pl_common com = {0};
    int teams = 0, per_team = 0, policy = PL_POLICY_FIRST_TOUCH, place = 0;
    uint64_t n = 0;
    const char *work_text = DEFAULT_WORK;
    static const struct option options[] = {
        PL_COMMON_LONG_OPTIONS,
        {"teams", required_argument, NULL, OPT_TEAMS},
        {"threads-per-team", required_argument, NULL, OPT_PER_TEAM},
        {"size", required_argument, NULL, OPT_SIZE},
        {"work", required_argument, NULL, OPT_WORK},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"place-teams", no_argument, NULL, OPT_PLACE},
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
        case OPT_POLICY: policy = pl_parse_policy(optarg); break;
        case OPT_PLACE: place = 1; break;
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
    if (policy != PL_POLICY_FIRST_TOUCH && (uint64_t)teams * (uint64_t)per_team * 3 > 4096)
        pl_usage_error("--policy %s registers every thread's part of every vector (3 x teams x threads per team = %llu), "
                       "more than the memory API's 4096 regions; use fewer teams or threads", pl_policy_names[policy],
                       (unsigned long long)teams * (unsigned long long)per_team * 3);
    pl_check_memory(pl_mul_sat(pl_vectors_bytes(n), (uint64_t)teams), "--size or --teams");
    if (com.threads)
        omp_set_num_threads(com.threads);
    pl_teams_enable_nesting();

    team_vectors *vec = calloc((size_t)teams, sizeof *vec);
    team_state *st = calloc((size_t)teams, sizeof *st);
    int *work = calloc((size_t)teams, sizeof *work);
    int *team_threads = calloc((size_t)teams, sizeof *team_threads);
    double *team_start = calloc((size_t)teams, sizeof *team_start);
    double *team_end = calloc((size_t)teams, sizeof *team_end);
    int *allowed = calloc(1024, sizeof *allowed);
    team_place *where = calloc((size_t)teams, sizeof *where);
    if (!vec || !st || !work || !team_threads || !team_start || !team_end || !allowed || !where)
        pl_usage_error("out of memory");
    int nallowed = 0;
    cpu_set_t mask;
    if (place && sched_getaffinity(0, sizeof mask, &mask) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE && nallowed < 1024; cpu++)
            if (CPU_ISSET(cpu, &mask))
                allowed[nallowed++] = cpu;
    int nodes = 0;
    if (place && pm_nodes(&nodes) != PM_OK)
        nodes = 1;
    for (int t = 0; t < teams; t++) {
        work[t] = work_list[t % nwork];
        vectors_alloc(&vec[t], n, per_team, policy != PL_POLICY_FIRST_TOUCH);
        atomic_init(&st[t].remaining, work[t]);
        atomic_init(&st[t].thief, -1);
        st[t].cpus = calloc((size_t)per_team, sizeof(int));
        if (!st[t].cpus)
            pl_usage_error("out of memory");
        memset(st[t].cpus, 0xff, (size_t)per_team * sizeof(int)); /* -1: not yet run */
    }

    int outer = 0;
    double start = 0.0;
#pragma omp parallel num_threads(teams)
    {
        int me = omp_get_thread_num(), nout = omp_get_num_threads();
        if (me == 0)
            outer = nout;
        for (int t = me; t < teams; t += nout) {
            where[t] = (team_place){place ? t % (nodes > 0 ? nodes : 1) : -1, allowed, nallowed};
            team_threads[t] = st[t].team_size = team_init(&vec[t], per_team, &where[t]);
        }
#pragma omp barrier
        /* single, not master: its closing barrier keeps every team from starting before start is
         * taken, so the overall time encloses each team's own. */
#pragma omp single
        start = pl_now();
        for (int t = me; t < teams; t += nout) {
            team_start[t] = pl_now();
            team_triad(&vec[t], per_team, work[t], policy, t, st, &where[t]);
            team_end[t] = pl_now();
            if (policy != PL_POLICY_FIRST_TOUCH)
                steal_for(t, teams, st, start);
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
        pl_vectors_check(&vec[t].v, label, com.corrupt && t == 0);
    }

    uint64_t array_bytes = pl_mul_sat(n, sizeof(double));
    if (com.json) {
        pl_json j;
        pl_json_team_parameters(&j, used, teams, per_team, n);
        pl_json_begin_array(&j, "work");
        for (int t = 0; t < teams; t++)
            pl_json_int(&j, NULL, work[t]);
        pl_json_end_array(&j);
        pl_json_string(&j, "policy", pl_policy_names[policy]);
        pl_json_bool(&j, "place_teams", place);
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
            int thief = atomic_load(&st[t].thief);
            pl_json_int(&j, "stolen_by", thief >= 0 ? thief : -1);
            pl_json_int(&j, "threads_stolen", thief >= 0 ? st[t].count : 0);
            if (thief >= 0)
                pl_json_double(&j, "stolen_at_seconds", st[t].stolen_at);
            pl_json_begin_array(&j, "cpus_after"); /* where each thread ran its last repetition */
            for (int i = 0; i < st[t].team_size; i++)
                pl_json_int(&j, NULL, st[t].cpus[i]);
            pl_json_end_array(&j);
            pl_json_begin_array(&j, "part_nodes_after"); /* node of each thread's part of vector a */
            for (int p = 0; p < vec[t].k; p++)
                pl_json_int(&j, NULL, pl_vector_node(vec[t].v.a + (uint64_t)p * vec[t].part, vec[t].part));
            pl_json_end_array(&j);
            pl_json_end_object(&j);
        }
        pl_json_end_array(&j);
        pl_json_double(&j, "overall_seconds", overall);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-imbalanced-stream: %d teams x %d threads, 3 vectors of %llu doubles (%s each) per team\n",
               teams, per_team, (unsigned long long)n, pl_fmt_bytes(array_bytes, 0));
        printf("%-6s %8s %12s %12s  %s\n", "Team", "Threads", "Repetitions", "Seconds", "Stolen");
        for (int t = 0; t < teams; t++) {
            int thief = atomic_load(&st[t].thief);
            char stolen[96] = "-";
            if (thief >= 0)
                snprintf(stolen, sizeof stolen, "%d threads by team %d at %.3f s", st[t].count, thief, st[t].stolen_at);
            printf("%-6d %8d %12d %12.6f  %s\n", t, team_threads[t], work[t], team_end[t] - team_start[t], stolen);
        }
        printf("Overall: %.6f s\n", overall);
        if (!pl_failed())
            printf("Validation: every team's vectors hold the expected values\n");
    }
    for (int t = 0; t < teams; t++) {
        vectors_free(&vec[t]);
        free(st[t].cpus);
    }
    free(vec);
    free(st);
    free(allowed);
    free(where);
    free(work);
    free(work_list);
    free(team_threads);
    free(team_start);
    free(team_end);
    return pl_exit_status(com.json);
}
