/*
 * A test program for pinlab_heartbeat.h: N threads, thread i beating in one of two modes.
 *   beating fixed C0 C1 ...   thread i calls pinlab_beat(i + 1) Ci times, prints "i tid", then
 *                             waits; a line "exit i" on stdin ends thread i, end of input ends all
 *   beating rate R0 R1 ...    thread i beats 1 unit at Ri per second (absolute deadlines, so a late
 *                             thread catches up), prints "i tid" at its start, until end of input
 *                             or "exit i"; Ri = 0: thread i spins without beating
 */
#define _GNU_SOURCE
#include "pinlab_heartbeat.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX 64
static int nthreads, rate_mode, quit;
static long amount[MAX];
static int leave[MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

static void say(int i)
{
    pthread_mutex_lock(&lock);
    printf("%d %ld\n", i, (long)syscall(SYS_gettid));
    fflush(stdout);
    pthread_mutex_unlock(&lock);
}

static int should_leave(int i)
{
    pthread_mutex_lock(&lock);
    int r = leave[i] || quit;
    pthread_mutex_unlock(&lock);
    return r;
}

static void *worker(void *arg)
{
    int i = (int)(long)arg;
    if (rate_mode && amount[i] == 0) {
        say(i);
        while (!__atomic_load_n(&leave[i], __ATOMIC_RELAXED) && !__atomic_load_n(&quit, __ATOMIC_RELAXED))
            ;
    } else if (rate_mode) {
        say(i);
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        long period = 1000000000L / amount[i];
        while (!should_leave(i)) {
            pinlab_beat(1);
            next.tv_nsec += period;
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec++;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    } else {
        for (long k = 0; k < amount[i]; k++)
            pinlab_beat((uint64_t)i + 1);
        say(i);
        pthread_mutex_lock(&lock);
        while (!leave[i] && !quit)
            pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc - 2 > MAX)
        return 2;
    rate_mode = strcmp(argv[1], "rate") == 0;
    nthreads = argc - 2;
    pthread_t threads[MAX];
    for (int i = 0; i < nthreads; i++) {
        amount[i] = atol(argv[i + 2]);
        pthread_create(&threads[i], NULL, worker, (void *)(long)i);
    }
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        int i;
        if (sscanf(line, "exit %d", &i) == 1 && i >= 0 && i < nthreads) {
            pthread_mutex_lock(&lock);
            __atomic_store_n(&leave[i], 1, __ATOMIC_RELAXED);
            pthread_cond_broadcast(&changed);
            pthread_mutex_unlock(&lock);
            pthread_join(threads[i], NULL);
            printf("gone %d\n", i);
            fflush(stdout);
        }
    }
    pthread_mutex_lock(&lock);
    __atomic_store_n(&quit, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < nthreads; i++)
        if (!leave[i])
            pthread_join(threads[i], NULL);
    return 0;
}
