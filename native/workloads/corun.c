/*
 * pinlab-corun: one co-runner process ([mazouz2011variability]'s co-running noise). pinlab starts several, each
 * pinned to a CPU, while it measures a program.
 *
 *   cpu     a busy loop
 *   sleep   busy for --duty percent of every --period-us period, asleep for the rest
 *   memory  reads and writes a buffer of --size (default 4x the last-level cache) again and again
 *
 * It never outlives its parent: it asks the kernel for SIGTERM when the parent dies
 * (PR_SET_PDEATHSIG) and exits at once when the parent is already gone (reparented to init, or
 * not the pid given in PINLAB_CORUN_PARENT). SIGTERM and SIGINT end the loops; the exit status is
 * then 0. When PINLAB_CORUN_READY_FD names a file descriptor, it writes one byte there and closes
 * it once its options are read and its buffer is touched, so that pinlab starts the measured
 * program only once the load is really there. Single-threaded, no OpenMP.
 */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { OPT_DUTY = PL_OPT_FIRST_PRIVATE, OPT_PERIOD, OPT_SIZE, OPT_QUIET, OPT_DURATION };

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Tell the parent the load is about to start: one byte on PINLAB_CORUN_READY_FD, then close it
 * (the parent also sees end-of-file from co-runners that exited before getting here). */
static void tell_ready(void)
{
    const char *text = getenv("PINLAB_CORUN_READY_FD");
    if (!text || !*text)
        return;
    char *end;
    errno = 0;
    long fd = strtol(text, &end, 10);
    if (*end || end == text || fd < 0 || fd > 1000000 || errno == ERANGE)
        pl_usage_error("PINLAB_CORUN_READY_FD must be a file descriptor number (got '%s')", text);
    ssize_t written;
    do
        written = write((int)fd, "r", 1);
    while (written < 0 && errno == EINTR);
    close((int)fd);
}

static void usage(void)
{
    printf(
        "Usage: pinlab-corun KIND [OPTIONS]\n"
        "One co-runner: loads the CPU it runs on until SIGTERM/SIGINT (exit status 0) or until its\n"
        "parent dies. Single-threaded; pin it with taskset or sched_setaffinity.\n"
        "\n"
        "KIND:\n"
        "  cpu      a busy loop\n"
        "  sleep    busy for --duty percent of each period of --period-us, asleep (nanosleep) for the rest\n"
        "  memory   reads and writes a buffer of --size over and over (streaming through memory)\n"
        "\n"
        "Options:\n"
        "  --duty PCT        sleep: busy percentage of each period, 1..99 (default 50)\n"
        "  --period-us P     sleep: period in microseconds, 10..10000 (default 1000)\n"
        "  --size SIZE       memory: buffer size in int64 elements (k/M/G/T x1000) or bytes with\n"
        "                    B/KB/MB/GB/TB (x1000) or KiB/MiB/GiB/TiB (x1024); default 4x the total\n"
        "                    last-level cache of the machine\n"
        "  --duration SEC    stop by itself after SEC seconds (default 0: run until signalled)\n"
        "  --quiet           no start line on stderr\n"
        "  -h, --help        this help\n"
        "\n"
        "Environment: PINLAB_CORUN_PARENT=PID  exit at once when the parent process is not PID.\n"
        "             PINLAB_CORUN_READY_FD=N  write one byte to file descriptor N, and close it,\n"
        "                                      when the load starts.\n"
        "Exit status: 0 stopped by a signal, the duration or a gone parent; 2 bad input.\n");
}

static uint64_t ns_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int time_up(uint64_t deadline)
{
    return stop_requested || (deadline && ns_now() >= deadline);
}

static void run_cpu(uint64_t deadline)
{
    uint64_t x = 88172645463325252ULL;
    while (!time_up(deadline)) {
        for (int i = 0; i < 100000; i++) { /* xorshift: a dependent chain of integer work */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        __asm__ __volatile__("" : "+r"(x));
    }
}

static void run_sleep(uint64_t deadline, int duty, int period_us)
{
    uint64_t period = (uint64_t)period_us * 1000ULL;
    uint64_t busy = period * (uint64_t)duty / 100ULL;
    while (!time_up(deadline)) {
        /* A period starts when the thread really runs again (a late wake-up does not shorten
         * the busy part): busy until start + busy, asleep until start + period. */
        uint64_t start = ns_now();
        while (ns_now() - start < busy && !stop_requested)
            ;
        uint64_t wake = start + period;
        struct timespec ts = {(time_t)(wake / 1000000000ULL), (long)(wake % 1000000000ULL)};
        while (!stop_requested && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
}

static void run_memory(uint64_t deadline, uint64_t *buf, uint64_t n)
{
    const uint64_t chunk = 131072; /* 1 MiB of int64 between checks of the stop flag */
    while (!time_up(deadline)) {
        for (uint64_t start = 0; start < n && !stop_requested; start += chunk) {
            uint64_t end = start + chunk < n ? start + chunk : n;
            for (uint64_t j = start; j < end; j++)
                buf[j] += 1;
            PL_CLOBBER_MEMORY();
        }
    }
}

int main(int argc, char **argv)
{
    pl_init("corun");
    /* Never outlive the parent: SIGTERM when it dies, and leave at once if it is already gone. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    pid_t parent = getppid();
    const char *expected = getenv("PINLAB_CORUN_PARENT");
    long expected_pid = 0;
    if (expected && *expected) {
        char *end;
        errno = 0;
        expected_pid = strtol(expected, &end, 10);
        if (*end || end == expected || expected_pid <= 0 || errno == ERANGE)
            pl_usage_error("PINLAB_CORUN_PARENT must be a process id (got '%s')", expected);
    }
    if (parent == 1 || (expected_pid && parent != (pid_t)expected_pid))
        return 0;

    int duty = 50, period_us = 1000, quiet = 0, help = 0;
    uint64_t size = 0, duration_s = 0;
    static const struct option options[] = {
        {"duty", required_argument, NULL, OPT_DUTY},
        {"period-us", required_argument, NULL, OPT_PERIOD},
        {"size", required_argument, NULL, OPT_SIZE},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, PL_OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    pl_common com = {0};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, PL_SHORT_OPTIONS, options, NULL)) != -1) {
        switch (opt) {
        case OPT_DUTY: duty = pl_parse_int("--duty", optarg, 1, 99); break;
        case OPT_PERIOD: period_us = pl_parse_int("--period-us", optarg, 10, 10000); break;
        case OPT_SIZE: size = pl_parse_size("--size", optarg, sizeof(uint64_t)); break;
        case OPT_DURATION: duration_s = pl_parse_count("--duration", optarg, 0, 1000000000ULL); break;
        case OPT_QUIET: quiet = 1; break;
        default:
            pl_common_option(&com, opt, argv); /* help, or a getopt error (exit 2) */
            if (!com.help)
                pl_usage_error("unhandled option (see --help)");
            help = 1;
        }
    }
    if (help) {
        usage();
        return 0;
    }
    if (optind >= argc)
        pl_usage_error("missing KIND: cpu, sleep or memory (see --help)");
    const char *kind = argv[optind++];
    pl_no_positional(argc, argv);
    if (strcmp(kind, "cpu") && strcmp(kind, "sleep") && strcmp(kind, "memory"))
        pl_usage_error("unknown KIND '%s'; choose cpu, sleep or memory", kind);

    uint64_t *buf = NULL;
    if (strcmp(kind, "memory") == 0) {
        if (!size) {
            uint64_t llc = pl_llc_total_bytes();
            size = pl_mul_sat(llc ? llc : (32ULL << 20), 4) / sizeof(uint64_t);
        }
        uint64_t bytes = pl_mul_sat(size, sizeof(uint64_t));
        pl_check_memory(bytes, "--size");
        buf = pl_alloc(bytes, "the buffer");
        memset(buf, 0, (size_t)bytes);
    }
    tell_ready();
    uint64_t deadline = duration_s ? ns_now() + duration_s * 1000000000ULL : 0;
    if (!quiet)
        fprintf(stderr, "pinlab-corun: %s running, pid %ld\n", kind, (long)getpid());

    if (strcmp(kind, "cpu") == 0)
        run_cpu(deadline);
    else if (strcmp(kind, "sleep") == 0)
        run_sleep(deadline, duty, period_us);
    else
        run_memory(deadline, buf, size);
    free(buf);
    return 0;
}
