/*
 * Team code of the nested STREAM variants (pinlab-nested-stream, pinlab-twisted-stream,
 * pinlab-imbalanced-stream): one set of triad vectors per team, first touched and worked on by
 * a nested OpenMP parallel region of the team's threads.
 *
 * The vectors start as a = 1, b = 2, c = 0.5; the triad a = b + q*c (q = 3) leaves a = 3.5 however
 * often and by whichever team it runs, which is what pl_vectors_check verifies.
 */
#ifndef PINLAB_WORKLOADS_STREAM_TEAMS_H
#define PINLAB_WORKLOADS_STREAM_TEAMS_H

#include "common.h"

#define PL_TEAMS_MAX 4096

typedef struct {
    uint64_t n; /* elements per vector */
    double *a, *b, *c;
    int api;    /* allocated with pinlab's memory API (pm_alloc), for --policy next-touch */
} pl_vectors;

/* --policy of the team workloads: how phase changes meet data placed by first touch. */
enum { PL_POLICY_FIRST_TOUCH, PL_POLICY_NEXT_TOUCH, PL_POLICY_MOVE_THREADS, PL_POLICY_MIXED };
extern const char *const pl_policy_names[];
/* The PL_POLICY_* of a --policy word; exits 2 naming the words for any other. */
int pl_parse_policy(const char *text);

/* Bytes of one team's three vectors of n doubles (saturating). */
uint64_t pl_vectors_bytes(uint64_t n);
/* Allocates (does not touch) the vectors; exits 2 when memory is short. With api, each vector is
 * a region of pinlab's memory API (first touch), so that it can be moved on next touch. */
void pl_vectors_alloc(pl_vectors *v, uint64_t n);
void pl_vectors_alloc_api(pl_vectors *v, uint64_t n);
/* Marks the three vectors to move, page by page, to the node of the thread touching them next. */
void pl_vectors_next_touch(pl_vectors *v);
/* The node holding most of vector a's pages (-1 when unknown). */
int pl_vectors_node(const pl_vectors *v);
/* The same for any vector of n doubles. */
int pl_vector_node(const double *x, uint64_t n);
/* {"node": pages, ...} of the vector of n doubles, as pm_where measures it, as a JSON array item. */
void pl_json_vector_pages(pl_json *j, const double *x, uint64_t n);
void pl_vectors_free(pl_vectors *v);
/* First touch by a parallel region of k threads (nested when called inside a parallel region),
 * with the same static schedule as the triad. Returns the size of the team that ran it. */
int pl_vectors_init(pl_vectors *v, int k);
/* The triad `reps` times on v by a parallel region of k threads; times[r] receives the time of
 * repetition r when times is not NULL. Returns the size of the team that ran it. */
int pl_vectors_triad(pl_vectors *v, int k, int reps, double *times);
/* The same; inner thread i first moves itself to cpus[i] when cpus is not NULL, and writes the
 * CPU it then runs on to seen[i] when seen is not NULL. */
int pl_vectors_triad_on(pl_vectors *v, int k, int reps, double *times, const int *cpus, int *seen);
/* The same on vectors a, b, c that may belong to different sets (a = b + q*c). */
int pl_triad_on(double *a, const double *b, const double *c, uint64_t n, int k, int reps, double *times, const int *cpus,
                int *seen);
/* Checks the values; records a failure (pl_fail) naming `label` when they are wrong. Also the
 * place where --corrupt damages one value (corrupt != 0). */
void pl_vectors_check(pl_vectors *v, const char *label, int corrupt);

/* Best and average triad rate in MB/s (1 MB = 1e6 B) of times[1..ntimes-1] (the first
 * repetition is not counted when there are at least two). */
void pl_triad_rates(const double *times, int ntimes, uint64_t n, double *best_mbs, double *avg_mbs);

/* Allows two active levels of parallelism (outer team masters, inner team threads). */
void pl_teams_enable_nesting(void);

/* Starts the JSON document of a team workload: the common head, then the "parameters" object
 * with the fields every team workload has (the caller adds its own, then closes the object). */
void pl_json_team_parameters(pl_json *j, int used_threads, int teams, int per_team, uint64_t n);

/* The options nested-stream and twisted-stream share, parsed and completed with defaults. */
typedef struct {
    pl_common com;
    int teams;    /* --teams, default: NUMA nodes with CPUs */
    int per_team; /* --threads-per-team, default: threads / teams, at least 1 */
    int threads;  /* --threads, default: OpenMP's */
    int ntimes;   /* --ntimes, default 10 */
    uint64_t n;   /* --size per team, in elements */
    int policy;   /* --policy, default first-touch (PL_POLICY_*) */
    int remote;   /* --remote, default 3: vectors of another team in phase 2 (twisted-stream) */
} pl_team_args;

/* Parses argv (exits 2 on bad input; calls usage() and exits 0 on --help), then applies the
 * defaults, checks the memory needed and sets OpenMP up for nested teams. */
pl_team_args pl_parse_team_args(int argc, char **argv, void (*usage)(void));
/* Refuses a --policy other than first-touch in a workload that has no phases to apply it to. */
void pl_only_first_touch(const pl_team_args *a, const char *workload);

#endif
