/*
 * omp_barriers: a GNU OpenMP team that meets at a barrier after every small step of work, as
 * iterative solvers do, and reports each step through pinlab's heartbeat.
 *
 * Usage: omp_barriers THREADS STEPS [WORK]
 *
 * Every thread does STEPS steps of WORK additions (default 20000); after each, the team waits at a barrier
 * and each thread beats once (PINLAB_HEARTBEAT), so a run is a fixed amount of work and autopin
 * can measure its progress. libgomp sizes its spin-waiting from the CPUs the process may use when
 * it starts (long with a CPU per thread, short with fewer CPUs than threads): a team moved onto
 * two threads per CPU after its start spins away the time slices its partner needs, a team
 * started there does not. This is the case bench_autopin uses to compare probing by re-pinning
 * with probing by restarts.
 *
 * Output, one line: "steps STEPS threads THREADS seconds S" (S measured by the program itself).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "pinlab_heartbeat.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: omp_barriers THREADS STEPS [WORK]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    long steps = atol(argv[2]);
    long work = argc > 3 ? atol(argv[3]) : 20000;
    if (threads < 1 || steps < 1 || work < 1) {
        fprintf(stderr, "omp_barriers: THREADS, STEPS and WORK must be positive\n");
        return 2;
    }
    double start = omp_get_wtime();
    volatile double sink = 0;
#pragma omp parallel num_threads(threads)
    for (long s = 0; s < steps; s++) {
        double local = 0;
        for (long i = 0; i < work; i++)
            local += i * 0.5;
        sink += local;
#pragma omp barrier
        pinlab_beat(1);
    }
    printf("steps %ld threads %d seconds %.3f\n", steps, threads, omp_get_wtime() - start);
    return 0;
}
