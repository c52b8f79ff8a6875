/*
 * hybrid_probe: an MPI + OpenMP program whose every thread reports where it runs.
 *
 * Each rank starts an OpenMP team (OMP_NUM_THREADS threads); each thread records sched_getcpu()
 * and its affinity mask inside the parallel region, after a barrier (so the whole team exists).
 * Rank by rank, in rank order, the threads' lines are printed:
 *     rank=<r> size=<n> thread=<t> cpu=<cpu> mask=<cpu list> cuda=<CUDA_VISIBLE_DEVICES or ->
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 1024

static void cpulist(const cpu_set_t *set, char *out, size_t room)
{
    size_t used = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
            end++;
        used += (size_t)snprintf(out + used, room - used, used ? ",%d" : "%d", c);
        if (end > c)
            used += (size_t)snprintf(out + used, room - used, "-%d", end);
        c = end;
        if (used >= room)
            break;
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    static int cpu[MAX_THREADS];
    static char mask[MAX_THREADS][256];
    int threads = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#pragma omp parallel
    {
#pragma omp barrier
        int t = omp_get_thread_num();
        if (t < MAX_THREADS) {
            cpu_set_t set;
            sched_getaffinity(0, sizeof set, &set);
            cpu[t] = sched_getcpu();
            cpulist(&set, mask[t], sizeof mask[t]);
        }
#pragma omp single
        threads = omp_get_num_threads();
    }
    const char *cuda = getenv("CUDA_VISIBLE_DEVICES");
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            for (int t = 0; t < threads && t < MAX_THREADS; t++)
                printf("rank=%d size=%d thread=%d cpu=%d mask=%s cuda=%s\n", rank, size, t, cpu[t], mask[t], cuda ? cuda : "-");
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
