/*
 * pinlab-probe: every OpenMP thread reports where it runs.
 *
 * Output: one line per thread, in thread-number order,
 *     thread=<omp thread num> cpu=<sched_getcpu()> mask=<affinity mask as a CPU list>
 * The mask is read with sched_getaffinity on the thread itself, so it shows what the
 * OpenMP runtime (or a launcher) really applied, not what was asked for.
 *
 * Usage: pinlab-probe [SPIN_MS]
 *   SPIN_MS: how long each thread keeps busy before reporting (default 20 ms), so that
 *   an unpinned thread has a chance to be seen where the scheduler put it.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE_MAX_CHARS 8192

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Write a CPU set as a compact list such as "0,2,4-7". */
static void format_cpulist(const cpu_set_t *set, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = (last == cpu)
            ? snprintf(out + used, size - used, "%s%d", used ? "," : "", cpu)
            : snprintf(out + used, size - used, "%s%d-%d", used ? "," : "", cpu, last);
        if (n < 0 || (size_t)n >= size - used)
            return;
        used += (size_t)n;
        cpu = last;
    }
}

int main(int argc, char **argv)
{
    double spin_ms = argc > 1 ? atof(argv[1]) : 20.0;
    int nthreads = omp_get_max_threads();
    char (*lines)[LINE_MAX_CHARS] = calloc((size_t)nthreads, sizeof *lines);
    if (!lines) {
        perror("pinlab-probe");
        return 1;
    }
    int team = 0;
#pragma omp parallel
    {
        int me = omp_get_thread_num();
#pragma omp single
        team = omp_get_num_threads();
        volatile double sink = 0;
        double end = now_ms() + spin_ms;
        while (now_ms() < end)
            sink += 1.0;
        cpu_set_t set;
        CPU_ZERO(&set);
        char mask[LINE_MAX_CHARS - 64];
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            format_cpulist(&set, mask, sizeof mask);
        else
            strcpy(mask, "?");
        if (me < nthreads)
            snprintf(lines[me], LINE_MAX_CHARS, "thread=%d cpu=%d mask=%s", me, sched_getcpu(), mask);
    }
    for (int i = 0; i < team && i < nthreads; i++)
        puts(lines[i]);
    free(lines);
    return 0;
}
