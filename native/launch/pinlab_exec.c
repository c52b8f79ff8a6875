/*
 * pinlab-exec: starts the program for `pinlab run` and reports its process id, exit status and
 * resource usage on a pipe.
 *
 * Why a go-between: the kernel's maximum resident set size of a process (ru_maxrss) keeps the
 * largest of every address space the process ever had, including the one it had before exec.
 * A program spawned straight from pinlab (vfork or fork of a Python interpreter with pandas
 * loaded) would report pinlab's 100 MB as its own. pinlab-exec is a small static program: the
 * program is forked from it, so its ru_maxrss is its own (as with GNU time).
 *
 * It is static so that the preload library in LD_PRELOAD is not loaded into it (only into the
 * program). Everything pinlab set before starting it (CPU affinity, memory policy, personality,
 * THP setting, signal mask, inherited performance counters) passes on to the program by fork.
 *
 * Usage: pinlab-exec FD PATH ARGV0 [ARGS...]
 * Lines written to FD:  "pid N" once the program runs, or "error ERRNO" when exec failed;
 *                       then "status WAITSTATUS utime_us stime_us maxrss_kib nvcsw nivcsw".
 * It ignores the signals pinlab forwards (pinlab sends them to the program itself) and exits
 * with status 0 when it could report, 1 when it could not start the program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static void report(int fd, const char *line)
{
    size_t left = strlen(line);
    while (left > 0) {
        ssize_t n = write(fd, line, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        line += n;
        left -= (size_t)n;
    }
}

static long long microseconds(struct timeval tv)
{
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: pinlab-exec FD PATH ARGV0 [ARGS...] (started by pinlab run)\n");
        return 2;
    }
    int fd = atoi(argv[1]);
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        perror("pinlab-exec: report pipe");
        return 2;
    }
    struct sigaction ignore = {.sa_handler = SIG_IGN}, original[NFORWARDED];
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaction(forwarded[i], &ignore, &original[i]);

    int failed[2];
    if (pipe2(failed, O_CLOEXEC) != 0) {
        perror("pinlab-exec: pipe");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        char line[64];
        snprintf(line, sizeof line, "error %d\n", errno);
        report(fd, line);
        return 1;
    }
    if (pid == 0) {
        for (size_t i = 0; i < NFORWARDED; i++)
            sigaction(forwarded[i], &original[i], NULL);
        execv(argv[2], argv + 3);
        int code = errno;
        ssize_t ignored = write(failed[1], &code, sizeof code);
        (void)ignored;
        _exit(127);
    }
    close(failed[1]);
    int code = 0;
    ssize_t got;
    do
        got = read(failed[0], &code, sizeof code);
    while (got < 0 && errno == EINTR);
    close(failed[0]);

    char line[256];
    if (got == (ssize_t)sizeof code) {
        snprintf(line, sizeof line, "error %d\n", code);
        report(fd, line);
        waitpid(pid, NULL, 0);
        return 1;
    }
    snprintf(line, sizeof line, "pid %d\n", (int)pid);
    report(fd, line);

    int status;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("pinlab-exec: wait4");
            return 1;
        }
    }
    snprintf(line, sizeof line, "status %d %lld %lld %ld %ld %ld\n", status, microseconds(usage.ru_utime),
             microseconds(usage.ru_stime), usage.ru_maxrss, usage.ru_nvcsw, usage.ru_nivcsw);
    report(fd, line);
    return 0;
}
