"""Who changed a mask, in the doctor's report: a program whose library binds its workers itself.

``pileup CPUS N SECONDS`` starts N workers; worker i binds itself to the i-th CPU of the list
(round robin) through ``bind_self`` in libbind.so (sched_setaffinity, as a library of the program
might), then spins for SECONDS. Under ``pinlab doctor`` the preload library records each call,
and the report names libbind.so as the one that set the masks, and says when it moved a thread
off pinlab's plan. Both need two CPUs to tell a move from staying put. The calls are recorded
whenever the doctor starts the program: with a placement (-s or -c) the preload library pins and
records, without one it only records.
"""

from __future__ import annotations

import json
import os

import pytest

from pinlab.cpuset import format_cpulist
from tests.conftest import compile_c, run_pinlab
from tests.doctor.helpers import clean_env, finding
from tests.launch.test_affinity_calls import LIBBIND_C

ALLOWED = sorted(os.sched_getaffinity(0))
A, B = (ALLOWED + ALLOWED)[:2]
pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="a move needs two allowed CPUs")

PILEUP_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int bind_self(int cpu);
static int cpus[64], ncpus;
static double seconds;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *work(void *arg)
{
    bind_self(cpus[(long)arg % ncpus]);
    volatile unsigned long n = 0;
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 100000; i++) n++;
    return NULL;
}
int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    for (char *item = strtok(argv[1], ","); item && ncpus < 64; item = strtok(NULL, ",")) cpus[ncpus++] = atoi(item);
    int count = atoi(argv[2]);
    seconds = atof(argv[3]);
    pthread_t t[64];
    for (long i = 0; i < count && i < 64; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < count && i < 64; i++) pthread_join(t[i], NULL);
    return 0;
}
"""


@pytest.fixture(scope="module")
def pileup(tmp_path_factory):
    where = tmp_path_factory.mktemp("pileup")
    compile_c(where, "libbind.so", LIBBIND_C, "-shared", "-fPIC")
    return compile_c(where, "pileup", PILEUP_C, f"-L{where}", "-lbind", f"-Wl,-rpath,{where}")


def _doctor(*args: str) -> tuple[int, dict]:
    done = run_pinlab("doctor", "--json", "--seconds", "60", *args, env=clean_env())
    return done.returncode, json.loads(done.stdout)


def test_a_library_piling_workers_on_one_cpu_is_named_and_its_move_off_the_plan_found(pileup):
    status, report = _doctor("-c", f"{A},{B}", "--", pileup, str(B), "2", "3")
    assert status == 1 and report["exit_status"] == 0, report
    piled = finding(report, "threads-share-cpu")
    assert "libbind.so (its own affinity calls)" in piled["statement"], piled
    calls = piled["evidence"]["set_by_calls"]
    assert {os.path.basename(c["library"]) for c in calls} == {"libbind.so"} and {c["new"] for c in calls} == {str(B)}
    assert piled["fix"][0].startswith("# libbind.so binds these threads itself"), piled["fix"]
    moved = finding(report, "affinity-calls-moved-plan")
    assert moved["severity"] == "warning" and "libbind.so moved 1 thread" in moved["statement"], moved
    assert [(m["planned_cpu"], m["new"]) for m in moved["evidence"]["moved"]] == [(A, str(B))]
    assert moved["fix"][-1] == f"{pileup} {B} 2 3"


def test_leaving_the_plan_out_as_the_fix_says_ends_the_fight_and_the_pileup_stays_the_librarys(pileup):
    # Without a placement the preload library only records: the calls are still seen.
    status, report = _doctor("--", pileup, str(B), "2", "3")
    codes = {f["code"] for f in report["findings"]}
    assert "affinity-calls-moved-plan" not in codes and "threads-share-cpu" in codes, report
    piled = finding(report, "threads-share-cpu")
    assert "libbind.so (its own affinity calls)" in piled["statement"], piled
    calls = finding(report, "affinity-calls")["evidence"]["calls"]
    assert {c["new"] for c in calls} == {str(B)} and {c["old"] for c in calls} == {format_cpulist(ALLOWED)}, calls  # not pinned before


def test_a_library_binding_each_worker_where_the_plan_put_it_is_only_information(pileup):
    # -c A,B: main on A (slot 0), the first worker on B, the second wraps to A; they bind to B and A.
    status, report = _doctor("-c", f"{A},{B}", "--", pileup, f"{B},{A}", "2", "3")
    assert status == 0, report
    info = finding(report, "affinity-calls")
    assert info["severity"] == "info" and info["evidence"]["calls_by_library"] == {"libbind.so": 2}, info
    assert {f["code"] for f in report["findings"]} == {"affinity-calls"}
