"""Who changed a mask: the program's own affinity calls under ``pinlab run`` are in the record.

The preload library forwards the program's sched_setaffinity and pthread_setaffinity_np calls to
the C library and records each (calling thread, target thread, calling object, old and new mask,
result), and reads at pthread_create a mask the program put on the new thread's attributes. These
tests run small C programs (built here with cc) that print what they did (their tids from
gettid(), the masks they saw, the results), and check the record's ``affinity_calls`` against that:
calls from the executable, from a shared library, failing calls (the program must see the same
results as without pinlab), none for pinlab's own pinning, what libgomp does when told to bind,
and what is not seen: LLVM's libomp binding through the raw system call.

Re-binding needs a second CPU to go to: with one CPU these tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pinlab.cpuset import format_cpulist
from pinlab.native import native_path
from tests.conftest import compile_c, run_pinlab

ALLOWED = sorted(os.sched_getaffinity(0))
PLAN = ALLOWED[:2]
needs_two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="re-binding a thread to another CPU needs two allowed CPUs")
pytestmark = needs_two_cpus

COMMON = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The mask as a CPU list ("0-1,4"), as pinlab writes masks. */
static void cpulist(const cpu_set_t *set, size_t bytes, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    int bits = (int)bytes * 8;
    for (int c = 0; c < bits; c++) {
        if (!CPU_ISSET_S(c, bytes, set))
            continue;
        int last = c;
        while (last + 1 < bits && CPU_ISSET_S(last + 1, bytes, set))
            last++;
        used += (size_t)snprintf(out + used, size - used, used ? ",%d" : "%d", c);
        if (last > c)
            used += (size_t)snprintf(out + used, size - used, "-%d", last);
        c = last;
    }
}

static void own_mask(char *out, size_t size)
{
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    cpulist(&set, sizeof set, out, size);
}
"""

# rebind A B: two workers each move themselves with pthread_setaffinity_np to the one of CPUs A, B
# they are not on; then main moves worker 2 back to where it was (another thread's pthread_t).
REBIND_C = (
    COMMON
    + r"""
static int cpu_a, cpu_b;
static pthread_barrier_t moved, checked;
struct worker { pid_t tid; char old[64], now[64]; int rc; };
static struct worker workers[2];

static void *work(void *arg)
{
    struct worker *w = arg;
    w->tid = gettid();
    own_mask(w->old, sizeof w->old);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(w->old) == cpu_a ? cpu_b : cpu_a, &set);
    w->rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    own_mask(w->now, sizeof w->now);
    pthread_barrier_wait(&moved);
    pthread_barrier_wait(&checked);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    cpu_a = atoi(argv[1]);
    cpu_b = atoi(argv[2]);
    pthread_barrier_init(&moved, NULL, 3);
    pthread_barrier_init(&checked, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, &workers[i]);
    pthread_barrier_wait(&moved);
    cpu_set_t back;
    CPU_ZERO(&back);
    CPU_SET(atoi(workers[1].old), &back);
    int rc = pthread_setaffinity_np(t[1], sizeof back, &back);
    pthread_barrier_wait(&checked);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        printf("self caller=%d target=%d old=%s new=%s rc=%d\n", workers[i].tid, workers[i].tid, workers[i].old, workers[i].now, workers[i].rc);
    printf("other caller=%d target=%d old=%s new=%s rc=%d\n", gettid(), workers[1].tid, workers[1].now, workers[1].old, rc);
    return 0;
}
"""
)

LIBBIND_C = r"""
#define _GNU_SOURCE
#include <sched.h>

/* Binds the calling thread to one CPU, as a library of the program's might. */
int bind_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}
"""

# uselib A B: a worker moves itself, through libbind's bind_self, to the one of A, B it is not on.
USELIB_C = (
    COMMON
    + r"""
int bind_self(int cpu);
static int cpu_a, cpu_b;
static pid_t tid;
static int rc;
static char old[64], now[64];

static void *work(void *arg)
{
    (void)arg;
    tid = gettid();
    own_mask(old, sizeof old);
    rc = bind_self(atoi(old) == cpu_a ? cpu_b : cpu_a);
    own_mask(now, sizeof now);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    cpu_a = atoi(argv[1]);
    cpu_b = atoi(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    pthread_join(t, NULL);
    printf("lib caller=%d target=%d old=%s new=%s rc=%d\n", tid, tid, old, now, rc);
    return 0;
}
"""
)

# fail: calls that fail (a mask with only CPU 1023, which no allowed set here has) and one that
# succeeds, each with errno set to a sentinel before; prints what the program saw.
FAIL_C = (
    COMMON
    + r"""
int main(void)
{
    size_t bytes = CPU_ALLOC_SIZE(1024);
    cpu_set_t *high = CPU_ALLOC(1024);
    CPU_ZERO_S(bytes, high);
    CPU_SET_S(1023, bytes, high);
    errno = 4242;
    int rc = sched_setaffinity(0, bytes, high);
    printf("sched_setaffinity rc=%d errno=%d\n", rc, errno);
    errno = 4242;
    rc = pthread_setaffinity_np(pthread_self(), bytes, high);
    printf("pthread_setaffinity_np rc=%d errno=%d\n", rc, errno);
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    errno = 4242;
    rc = sched_setaffinity(0, sizeof mine, &mine);
    printf("sched_setaffinity(same) rc=%d errno=%d\n", rc, errno);
    char mask[64];
    own_mask(mask, sizeof mask);
    printf("main tid=%d mask=%s\n", gettid(), mask);
    return 0;
}
"""
)

# plain: two workers that only compute; pinlab pins them (and narrows main) and nothing else.
PLAIN_C = (
    COMMON
    + r"""
static void *work(void *arg) { volatile long s = 0; for (long i = 0; i < 1000000; i++) s += i; return arg; }

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}
"""
)

# omp: each thread of a parallel region prints its tid and mask; first line: libgomp's path as the loader has it.
OMP_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    Dl_info info;
    dladdr((void *)omp_get_thread_num, &info);
    printf("runtime path=%s\n", info.dli_fname);
    #pragma omp parallel
    {
        cpu_set_t set;
        sched_getaffinity(0, sizeof set, &set);
        int first = -1;
        for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
            if (CPU_ISSET(c, &set)) first = c;
        #pragma omp critical
        printf("omp thread=%d tid=%d count=%d first=%d\n", omp_get_thread_num(), gettid(), CPU_COUNT(&set), first);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """Compile a C source in a temporary directory: build(name, source, *flags) -> path."""
    where = tmp_path_factory.mktemp("affinity-calls")

    def compile_(name: str, source: str, *flags: str) -> Path:
        return Path(compile_c(where, name, source, *flags))

    compile_.where = where  # type: ignore[attr-defined]
    return compile_


def pinned_run(tmp_path, *argv: str, env: dict[str, str] | None = None):
    """``pinlab run -c PLAN --record`` of argv: (result, record)."""
    record = tmp_path / "r.json"
    result = run_pinlab("run", "-c", ",".join(map(str, PLAN)), "--record", str(record), "--", *argv, env=env)
    assert result.returncode == 0, result.stderr
    return result, json.loads(record.read_text())


def printed(stdout: str, kind: str) -> list[dict[str, str]]:
    """The program's lines starting with ``kind``, as key=value dicts."""
    return [dict(w.split("=", 1) for w in line.split()[1:]) for line in stdout.splitlines() if line.split()[:1] == [kind]]


def entries(record: dict, call: str) -> list[dict]:
    return [c for c in record["affinity_calls"] if c["call"] == call]


def test_the_programs_own_rebinding_is_recorded_call_by_call_with_the_executable_as_caller(build, tmp_path):
    program = build("rebind", REBIND_C)
    result, record = pinned_run(tmp_path, str(program), *map(str, PLAN))
    done = printed(result.stdout, "self") + printed(result.stdout, "other")
    assert len(done) == 3 and all(d["rc"] == "0" for d in done), result.stdout
    # The workers were pinned by pinlab, each to its plan CPU, before they moved.
    workers = {t["tid"]: t for t in record["threads"] if t["role"] == "worker"}
    for d in printed(result.stdout, "self"):
        assert d["old"] == format_cpulist([workers[int(d["target"])]["planned_cpu"]]) and d["new"] != d["old"]
    expected = sorted((int(d["caller"]), int(d["target"]), d["old"], d["new"]) for d in done)
    calls = entries(record, "pthread_setaffinity_np")
    assert sorted((c["tid"], c["target_tid"], c["old"], c["new"]) for c in calls) == expected
    assert len(record["affinity_calls"]) == 3  # nothing else: pinlab's own pinning is not there
    main_tid = record["pid"]
    assert {c["tid"] for c in calls} == set(workers) | {main_tid}
    for call in calls:
        assert call["library"] == os.path.realpath(program)
        assert call["result"] == 0 and call["applied"] is True and call["pid"] == record["pid"]
        assert 0 < call["t"] < record["wall_seconds"]
    # in the order made: the workers' own moves, then main's
    assert [c["tid"] for c in record["affinity_calls"]][-1] == main_tid
    assert "3 affinity calls by the program (rebind)" in result.stderr


def test_a_call_from_a_shared_library_is_attributed_to_that_library(build, tmp_path):
    library = build("libbind.so", LIBBIND_C, "-shared", "-fPIC")
    where = str(build.where)
    program = build("uselib", USELIB_C, f"-L{where}", "-lbind", f"-Wl,-rpath,{where}")
    result, record = pinned_run(tmp_path, str(program), *map(str, PLAN))
    (done,) = printed(result.stdout, "lib")
    assert done["rc"] == "0" and done["old"] != done["new"], result.stdout
    (call,) = record["affinity_calls"]
    assert call["call"] == "sched_setaffinity"
    assert os.path.realpath(call["library"]) == os.path.realpath(library)
    assert (call["tid"], call["target_tid"], call["old"], call["new"]) == (int(done["caller"]), int(done["target"]), done["old"], done["new"])
    assert call["result"] == 0 and call["applied"] is True
    assert "1 affinity call by the program (libbind.so)" in result.stderr


@pytest.mark.skipif(os.cpu_count() is not None and os.cpu_count() >= 1024, reason="the failing mask (CPU 1023 only) is valid here")
def test_a_failing_call_is_recorded_with_its_errno_and_the_program_sees_what_it_would_without_pinlab(build, tmp_path):
    program = build("fail", FAIL_C)
    alone = subprocess.run([str(program)], capture_output=True, text=True, check=True)
    result, record = pinned_run(tmp_path, str(program))

    def seen(stdout: str) -> list[str]:
        return [line for line in stdout.splitlines() if not line.startswith("main ")]

    assert seen(result.stdout) == seen(alone.stdout)  # same return values and errno, success leaves errno alone
    assert seen(result.stdout) == [
        "sched_setaffinity rc=-1 errno=22",
        "pthread_setaffinity_np rc=22 errno=4242",
        "sched_setaffinity(same) rc=0 errno=4242",
    ]
    (me,) = printed(result.stdout, "main")
    tid, mask = int(me["tid"]), me["mask"]
    # pinlab's placement of the main thread (the plan's CPUs: it creates no thread, so is never narrowed)
    assert mask == format_cpulist(PLAN)
    calls = [(c["call"], c["tid"], c["target_tid"], c["old"], c["new"], c["result"], c["applied"]) for c in record["affinity_calls"]]
    assert calls == [
        ("sched_setaffinity", tid, tid, mask, "1023", 22, False),
        ("pthread_setaffinity_np", tid, tid, mask, "1023", 22, False),
        ("sched_setaffinity", tid, tid, mask, mask, 0, True),
    ]


@pytest.mark.parametrize("kind", ["pthreads", "openmp"])
def test_pinlabs_own_pinning_is_never_an_affinity_call(build, tmp_path, kind):
    if kind == "pthreads":
        program = build("plain", PLAIN_C)
        env = None
    else:
        program = build("omp_plain", OMP_C, "-fopenmp")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}
    result, record = pinned_run(tmp_path, str(program), env=env)
    workers = [t for t in record["threads"] if t["role"] == "worker"]
    assert len(workers) >= 1 and all(t["pinned_as_planned"] for t in record["threads"] if t["role"] in ("main", "worker"))
    assert record["affinity_calls"] == []
    assert "affinity call" not in result.stderr


def test_libgomp_told_to_bind_is_seen_binding_its_master_and_asking_for_its_workers_cpus(build, tmp_path):
    """libgomp (OMP_PROC_BIND=true, OMP_PLACES=cores) binds its master thread with
    pthread_setaffinity_np and each worker through the attributes it creates it with. Under pinlab
    the plan decides the workers' CPUs: their attribute masks are recorded as not applied."""
    program = build("omp", OMP_C, "-fopenmp")
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_PLACES="cores", OMP_NUM_THREADS=str(len(PLAN)))
    result, record = pinned_run(tmp_path, str(program), env=env)
    (runtime,) = (d["path"] for d in printed(result.stdout, "runtime"))
    if "libgomp" not in runtime:
        pytest.skip(f"the OpenMP runtime is {runtime}, not libgomp")
    tids = {int(d["tid"]): int(d["thread"]) for d in printed(result.stdout, "omp")}
    calls = record["affinity_calls"]
    assert calls, result.stderr
    assert {c["library"] for c in calls} == {runtime}
    main_tid = record["pid"]
    (master,) = entries(record, "pthread_setaffinity_np")
    assert master["tid"] == master["target_tid"] == main_tid and master["result"] == 0 and master["applied"] is True
    asked = entries(record, "pthread_attr_setaffinity_np")
    workers = {t["tid"]: t for t in record["threads"] if t["role"] == "worker"}
    assert {c["target_tid"] for c in asked} == set(workers) == {tid for tid, n in tids.items() if n != 0}
    for call in asked:
        assert call["tid"] == main_tid and call["result"] == 0 and call["applied"] is False
        assert workers[call["target_tid"]]["mask_at_start"] == str(workers[call["target_tid"]]["planned_cpu"])  # the plan won
    assert f"affinity calls by the program ({os.path.basename(runtime)})" in result.stderr


def test_llvm_libomp_binds_through_the_raw_system_call_which_only_the_sampler_sees(tmp_path):
    """LLVM's libomp (KMP_AFFINITY=compact) re-binds its threads with syscall(SYS_sched_setaffinity),
    which no interposition catches: no affinity call is recorded, while the sampled masks show the
    moves (mask_changes). The plan is reversed so that libomp's compact order moves threads."""
    try:
        probe = native_path("pinlab-probe-llvm")
    except Exception:
        pytest.skip("pinlab-probe-llvm was not built (LLVM OpenMP runtime missing)")
    plan = ALLOWED[::-1]
    record = tmp_path / "r.json"
    env = dict(os.environ, KMP_AFFINITY="compact")
    result = run_pinlab("run", "-c", ",".join(map(str, plan)), "--record", str(record), "--sample-ms", "20", "--", str(probe), "300", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(record.read_text())
    moved = [t for t in data["threads"] if t["role"] in ("main", "worker") and t["mask_changes"]]
    assert moved, data["threads"]
    assert data["affinity_calls"] == []
