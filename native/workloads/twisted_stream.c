/*
 * pinlab-twisted-stream: nested STREAM triad in two phases.
 *
 * As pinlab-nested-stream, one team per NUMA node, each team's vectors first touched by the
 * team's own inner parallel region. Phase 1: every team runs the triad --ntimes times on its own
 * vectors. Phase 2: team t runs it on the vectors of team (t+1) mod T, i.e. on data another team
 * placed (remote under first touch when the teams sit on different nodes). The phases are
 * separated by a barrier of all teams. Per phase and team: best and average triad MB/s (first
 * repetition not counted), and the sum of the team bests.
 *
 * --remote 2 ([broquedis2010forestgomp], section 5.4.2): in phase 2 team t writes a and reads b of team t+1 but
 * reads its own c, so two of its three vectors are remote and one is local.
 *
 * --policy ([broquedis2010forestgomp], sections 5.4.1-5.4.2: moving threads, data, or both): first-touch leaves
 * phase 2 remote; next-touch marks, as phase 2 starts, every vector that its phase-2 team does not
 * own to move page by page to the node of the team that touches it (pinlab's memory API);
 * move-threads moves the threads of team t, as phase 2 starts, to the CPUs team t+1 ran on in
 * phase 1, where (most of) its data is; mixed moves the threads so, and moves the vector they
 * still own (c, with --remote 2) to that node at once, so that all three are local while the
 * least data moves. The JSON says, per team and phase, the nodes its threads ran on and, after the
 * run, where each team's vectors are: pages per node of each (vector_pages_after) and the node of
 * most of them (vector_nodes_after). The vectors use base pages (MADV_NOHUGEPAGE): a transparent
 * huge page across two teams' vectors would sit on one team's node.
 */
#define _GNU_SOURCE
#include "stream_teams.h"

#include <omp.h>
#include <pinlab_mem.h>
#include <sched.h>
#include <stdlib.h>


#define PHASES 2

static void usage(void)
{
    printf(
        "Usage: pinlab-twisted-stream [OPTIONS]\n"
        "STREAM's triad (a=b+q*c) with nested OpenMP in two phases: in phase 1 each team works on the\n"
        "vectors it first touched itself, in phase 2 team t works on the vectors of team (t+1) mod T.\n"
        "Reports per phase and team the best and average triad MB/s (1 MB = 1e6 B) and the sum of\n"
        "the team bests.\n"
        "\n"
        "Options:\n"
        "  --teams T             number of teams (default: NUMA nodes with CPUs, here %d)\n"
        "  --threads-per-team K  threads of each team (default: threads / T, at least 1)\n"
        "  --threads N           total threads, used for the default K (default: OMP_NUM_THREADS or\n"
        "                        the CPUs of the process)\n"
        "  --size SIZE           length of each vector of each team: elements (20M; k/M/G/T x1000) or\n"
        "                        bytes (B/KB/MB/GB/TB x1000, KiB/MiB/GiB/TiB x1024). Default: 4x the total\n"
        "                        last-level cache divided by T, and at least 10M elements\n"
        "  --ntimes N            triad repetitions per team and phase, 2..1000000 (default 10); the\n"
        "                        first of each phase is not counted\n"
        "  --remote R            vectors of team t+1 that team t uses in phase 2: 3 (default: a, b\n"
        "                        and c) or 2 (a and b; it reads its own c)\n"
        "  --policy P            first-touch (default: phase 2 works on remote data), next-touch (the\n"
        "                        remote vectors move to their phase-2 team as it touches them),\n"
        "                        move-threads (team t moves to the CPUs of team t+1, where the data\n"
        "                        is), mixed (team t moves there and takes its own c along)\n"
        "  --json                print one JSON object on stdout instead of the table\n"
        "  -h, --help            this help\n"
        "\n"
        "Exit status: 0 results valid, 1 results wrong, 2 bad input.\n",
        pl_numa_nodes());
}

/* What the policy does as phase 2 starts (cpus: each team's CPUs in phase 1). */
static void prepare_phase_2(pl_vectors *vec, int teams, int per_team, int policy, int remote, const int *cpus)
{
    for (int t = 0; t < teams; t++) {
        if (policy == PL_POLICY_NEXT_TOUCH) {
            /* a and b of team t go to team t-1; c too unless team t keeps it (--remote 2) */
            double *moving[3] = {vec[t].a, vec[t].b, remote == 3 ? vec[t].c : NULL};
            for (int i = 0; i < 3; i++)
                if (moving[i] && pm_migrate_on_next_touch(moving[i], PM_TOUCH_PAGE) != PM_OK)
                    pl_warn("next touch not armed: %s", pm_last_error());
        } else if (policy == PL_POLICY_MIXED && remote == 2) {
            /* team t goes to team t+1's CPUs: its own c goes to their node now */
            int node, cpu = cpus[(size_t)((t + 1) % teams) * per_team];
            if (cpu < 0 || pm_node_of_cpu(cpu, &node) != PM_OK || pm_migrate(vec[t].c, node) != PM_OK)
                pl_warn("team %d's vector c could not move to the node of CPU %d: %s", t, cpu, pm_last_error());
        }
    }
}

int main(int argc, char **argv)
{
    pl_init("twisted-stream");
    pl_team_args args = pl_parse_team_args(argc, argv, usage);
    pl_common com = args.com;
    int teams = args.teams, per_team = args.per_team, ntimes = args.ntimes, threads = args.threads;
    uint64_t n = args.n;

    pl_vectors *vec = calloc((size_t)teams, sizeof *vec);
    int *team_threads = calloc((size_t)PHASES * teams, sizeof *team_threads);
    double *times = calloc((size_t)PHASES * teams * ntimes, sizeof *times);
    double *best = calloc((size_t)PHASES * teams, sizeof *best);
    double *avg = calloc((size_t)PHASES * teams, sizeof *avg);
    int *cpus = calloc((size_t)PHASES * teams * per_team, sizeof *cpus); /* CPU of each team thread per phase */
    if (!vec || !team_threads || !times || !best || !avg || !cpus)
        pl_usage_error("out of memory");
    int policy = args.policy, remote = args.remote;
    for (int t = 0; t < teams; t++)
        policy == PL_POLICY_FIRST_TOUCH ? pl_vectors_alloc(&vec[t], n) : pl_vectors_alloc_api(&vec[t], n);

    int outer = 0;
    double mark[PHASES + 1] = {0};
#pragma omp parallel num_threads(teams)
    {
        int me = omp_get_thread_num(), nout = omp_get_num_threads();
        if (me == 0)
            outer = nout;
        for (int t = me; t < teams; t += nout)
            pl_vectors_init(&vec[t], per_team);
        for (int p = 0; p < PHASES; p++) {
#pragma omp barrier
#pragma omp single /* its closing barrier: no team starts the phase before its mark */
            {
                mark[p] = pl_now();
                if (p == 1) /* counted in phase 2's time */
                    prepare_phase_2(vec, teams, per_team, policy, remote, cpus);
            }
            for (int t = me; t < teams; t += nout) {
                int data = p == 0 ? t : (t + 1) % teams;
                size_t slot = (size_t)p * teams + t;
                int moves = p == 1 && (policy == PL_POLICY_MOVE_THREADS || policy == PL_POLICY_MIXED);
                const int *go = moves ? &cpus[(size_t)data * per_team] : NULL;
                const double *c = p == 1 && remote == 2 ? vec[t].c : vec[data].c;
                team_threads[slot] = pl_triad_on(vec[data].a, vec[data].b, c, n, per_team, ntimes, &times[slot * ntimes], go,
                                                 &cpus[slot * per_team]);
            }
        }
#pragma omp barrier
#pragma omp master
        mark[PHASES] = pl_now();
    }
    double elapsed = mark[PHASES] - mark[0];
    if (outer < teams)
        pl_warn("OpenMP gave %d outer threads for %d teams; some teams ran one after the other", outer, teams);

    for (int t = 0; t < teams; t++) { /* a team whose threads ran on several nodes in phase 1 */
        int first = -1, other = -1;
        for (int k = 0; k < per_team && k < team_threads[t]; k++) {
            int node;
            if (cpus[(size_t)t * per_team + k] < 0 || pm_node_of_cpu(cpus[(size_t)t * per_team + k], &node) != PM_OK)
                continue;
            if (first < 0)
                first = node;
            else if (node != first && other < 0)
                other = node;
        }
        if (other >= 0)
            pl_warn("team %d's threads ran on nodes %d and %d in phase 1: OpenMP creates a team's inner threads anew "
                    "for each parallel region and a placement gives them its CPUs in turn (under pinlab run, "
                    "--nested inherit keeps those of every team but the main thread's on their master's node)", t, first, other);
    }

    int used = 0;
    double total[PHASES] = {0};
    for (int p = 0; p < PHASES; p++) {
        for (int t = 0; t < teams; t++) {
            size_t slot = (size_t)p * teams + t;
            if (team_threads[slot] != per_team)
                pl_warn("team %d ran phase %d with %d threads instead of %d (nested parallelism limited?)", t,
                        p + 1, team_threads[slot], per_team);
            if (team_threads[slot] > 0 && p == 0)
                used += team_threads[slot];
            pl_triad_rates(&times[slot * ntimes], ntimes, n, &best[slot], &avg[slot]);
            total[p] += best[slot];
        }
    }
    for (int t = 0; t < teams; t++) {
        char label[48];
        snprintf(label, sizeof label, "vectors of team %d", t);
        pl_vectors_check(&vec[t], label, com.corrupt && t == 0);
    }

    uint64_t array_bytes = pl_mul_sat(n, sizeof(double));
    if (com.json) {
        pl_json j;
        pl_json_team_parameters(&j, used, teams, per_team, n);
        pl_json_int(&j, "ntimes", ntimes);
        pl_json_string(&j, "policy", pl_policy_names[policy]);
        pl_json_int(&j, "remote", remote);
        pl_json_end_object(&j);
        pl_json_double(&j, "elapsed_seconds", elapsed);
        pl_json_begin_object(&j, "results");
        pl_json_begin_array(&j, "phases");
        for (int p = 0; p < PHASES; p++) {
            pl_json_begin_object(&j, NULL);
            pl_json_int(&j, "phase", p + 1);
            pl_json_double(&j, "seconds", mark[p + 1] - mark[p]);
            pl_json_begin_array(&j, "teams");
            for (int t = 0; t < teams; t++) {
                size_t slot = (size_t)p * teams + t;
                pl_json_begin_object(&j, NULL);
                pl_json_int(&j, "team", t);
                pl_json_int(&j, "threads", team_threads[slot]);
                pl_json_int(&j, "vectors_of_team", p == 0 ? t : (t + 1) % teams);
                pl_json_int(&j, "c_of_team", p == 1 && remote == 3 ? (t + 1) % teams : t);
                int node = -1;
                if (cpus[slot * per_team] >= 0 && pm_node_of_cpu(cpus[slot * per_team], &node) != PM_OK)
                    node = -1;
                pl_json_int(&j, "node", node); /* of its first thread's CPU */
                pl_json_begin_array(&j, "nodes"); /* of each of its threads' CPUs, in thread order */
                for (int k = 0; k < team_threads[slot] && k < per_team; k++) {
                    int n_k = -1;
                    if (cpus[slot * per_team + k] >= 0 && pm_node_of_cpu(cpus[slot * per_team + k], &n_k) != PM_OK)
                        n_k = -1;
                    pl_json_int(&j, NULL, n_k);
                }
                pl_json_end_array(&j);
                pl_json_double(&j, "triad_best_mbs", best[slot]);
                pl_json_double(&j, "triad_avg_mbs", avg[slot]);
                pl_json_end_object(&j);
            }
            pl_json_end_array(&j);
            pl_json_double(&j, "total_triad_best_mbs", total[p]);
            pl_json_end_object(&j);
        }
        pl_json_end_array(&j);
        pl_json_begin_array(&j, "data_node_after"); /* team t's vectors: the node most of a's pages are on */
        for (int t = 0; t < teams; t++)
            pl_json_int(&j, NULL, pl_vectors_node(&vec[t]));
        pl_json_end_array(&j);
        pl_json_begin_array(&j, "vector_nodes_after"); /* team t's a, b and c: where most of each one's pages are */
        for (int t = 0; t < teams; t++) {
            pl_json_begin_array(&j, NULL);
            pl_json_int(&j, NULL, pl_vector_node(vec[t].a, n));
            pl_json_int(&j, NULL, pl_vector_node(vec[t].b, n));
            pl_json_int(&j, NULL, pl_vector_node(vec[t].c, n));
            pl_json_end_array(&j);
        }
        pl_json_end_array(&j);
        pl_json_begin_array(&j, "vector_pages_after"); /* team t's a, b and c: pages per node of each, as measured */
        for (int t = 0; t < teams; t++) {
            pl_json_begin_array(&j, NULL);
            pl_json_vector_pages(&j, vec[t].a, n);
            pl_json_vector_pages(&j, vec[t].b, n);
            pl_json_vector_pages(&j, vec[t].c, n);
            pl_json_end_array(&j);
        }
        pl_json_end_array(&j);
        pl_json_end_object(&j);
        pl_json_tail(&j);
    } else {
        printf("pinlab-twisted-stream: %d teams x %d threads, 3 vectors of %llu doubles (%s each) per team, "
               "%d triads per phase (the first not counted); phase 2: %s, policy %s\n",
               teams, per_team, (unsigned long long)n, pl_fmt_bytes(array_bytes, 0), ntimes,
               remote == 3 ? "a, b and c of team t+1" : "a and b of team t+1, its own c", pl_policy_names[policy]);
        printf("%-6s %-6s %8s %10s %16s %16s\n", "Phase", "Team", "Threads", "Vectors of", "Triad best MB/s",
               "Triad avg MB/s");
        for (int p = 0; p < PHASES; p++) {
            for (int t = 0; t < teams; t++) {
                size_t slot = (size_t)p * teams + t;
                printf("%-6d %-6d %8d %10d %16.1f %16.1f\n", p + 1, t, team_threads[slot],
                       p == 0 ? t : (t + 1) % teams, best[slot], avg[slot]);
            }
            printf("Phase %d: total of the team bests %.1f MB/s, %.6f s\n", p + 1, total[p], mark[p + 1] - mark[p]);
        }
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
    free(cpus);
    return pl_exit_status(com.json);
}
