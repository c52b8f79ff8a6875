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
 * Usage: pinlab-exec FD PARENT PATH ARGV0 [ARGS...]   (PARENT: pinlab's process id)
 * Lines written to FD:  "pid N" once the program runs, or "error ERRNO" when exec failed;
 *                       then "status WAITSTATUS utime_us stime_us maxrss_kib nvcsw nivcsw".
 * It ignores the signals pinlab forwards (pinlab sends them to the program itself) and exits
 * with status 0 when it could report, 1 when it could not start the program.
 *
 * The program never outlives pinlab, even after a kill -9 of pinlab: pinlab-exec asks the kernel
 * for a signal when pinlab dies (PR_SET_PDEATHSIG) and is a child subreaper (descendants whose
 * parent ends are re-parented to it, not to init). On that signal it kills the program and then
 * every process below it, the re-parented ones included, and exits. The program itself also gets
 * SIGKILL should pinlab-exec die first (its own PR_SET_PDEATHSIG, set between fork and exec).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

/* Sent by the kernel when pinlab dies: not one of the forwarded signals, which are ignored here. */
#define PARENT_DIED (SIGRTMIN + 3)

static volatile sig_atomic_t parent_died;

static void on_parent_death(int signum)
{
    (void)signum;
    parent_died = 1; /* acted on in main(), where the wait is interrupted (no SA_RESTART) */
}

/* SIGKILL to every child of this process; returns how many were found. */
static int kill_children(void)
{
    pid_t self = getpid();
    int found = 0;
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return 0;
    struct dirent *entry;
    while ((entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
            continue;
        char path[64], text[512];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        if (n <= 0)
            continue;
        text[n] = '\0';
        const char *after = strrchr(text, ')'); /* the command name may hold spaces and parentheses */
        int ppid;
        char state;
        if (after != NULL && sscanf(after + 1, " %c %d", &state, &ppid) == 2 && ppid == self) {
            kill((pid_t)atoi(entry->d_name), SIGKILL);
            found++;
        }
    }
    closedir(proc);
    return found;
}

/* pinlab is gone: end the program and everything it started, then this process. */
static void end_everything(pid_t program)
{
    if (program > 0)
        kill(program, SIGKILL);
    for (;;) {
        kill_children();
        pid_t ended = waitpid(-1, NULL, 0); /* as a subreaper, orphaned descendants come here too */
        if (ended < 0 && errno == ECHILD)
            break;
    }
    _exit(137);
}

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
    if (argc < 5) {
        fprintf(stderr, "usage: pinlab-exec FD PARENT PATH ARGV0 [ARGS...] (started by pinlab run)\n");
        return 2;
    }
    int fd = atoi(argv[1]);
    pid_t parent = (pid_t)atol(argv[2]);
    argv += 1; /* from here on, argv[2] is PATH and argv + 3 the program's argv, as before PARENT was added */
    struct sigaction death = {.sa_handler = on_parent_death}; /* no SA_RESTART: wait4 returns EINTR */
    sigemptyset(&death.sa_mask);
    sigaction(PARENT_DIED, &death, NULL);
    sigset_t unblock, program_mask;
    sigemptyset(&unblock);
    sigaddset(&unblock, PARENT_DIED);
    sigprocmask(SIG_UNBLOCK, &unblock, &program_mask); /* the mask pinlab chose is restored for the program */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0);
    if (getppid() != parent) /* pinlab died before the request above: nothing started yet */
        return 1;
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
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        char line[64];
        snprintf(line, sizeof line, "error %d\n", errno);
        report(fd, line);
        return 1;
    }
    if (pid == 0) {
        sigaction(PARENT_DIED, &(struct sigaction){.sa_handler = SIG_DFL}, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* kept across exec (except setuid programs) */
        if (getppid() != self)
            _exit(137);
        sigprocmask(SIG_SETMASK, &program_mask, NULL);
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
    while (got < 0 && errno == EINTR && !parent_died);
    if (parent_died)
        end_everything(pid);
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
        if (parent_died)
            end_everything(pid);
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
