"""``pinlab doctor`` on memory in the emulated NUMA machine (two nodes, two CPUs each), one boot.

``spread MIB SECONDS`` (built here) starts and joins one thread, touches MIB MiB from its main
thread, prints ``ready``, then
two threads add to every element of their half for SECONDS: the data is where the main thread
was, the work wherever the threads run. Nothing here is timed: Python starts slowly in the
emulated guest on a busy host, so the program watched by PID runs until it is killed, and the
launched one is watched to its end.

- ``pinlab doctor -c 0,2,1,3``: slots 0-3 on nodes 0, 1, 0, 1; the main
  thread (slot 0) touches everything, after the first thread (slot 1) has narrowed it to its CPU;
  the workers (slots 2 and 3) run on both nodes: memory-on-one-node; the fix's ``numactl --interleave`` run makes it go away.
- under ``numactl --cpunodebind=0 --membind=1``: threads on node 0, data on node 1:
  memory-far-from-threads, watched by PID; the fix's ``pinlab migrate PID --to 0`` is run on the
  live process, and the doctor's second look finds nothing.
"""

from __future__ import annotations

import json
import shlex

import pytest

from tests.conftest import compile_c
from tests.vm.conftest import Group, marked_sections

pytestmark = pytest.mark.vm

SPREAD_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static long *data;
static size_t half;
static double seconds;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *work(void *arg)
{
    long *mine = data + (long)arg * half;
    double end = now() + seconds;
    while (now() < end)
        for (size_t i = 0; i < half; i++)
            mine[i] += 1;
    return NULL;
}
static void *nothing(void *arg) { return arg; }
int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    size_t bytes = (size_t)atol(argv[1]) << 20;
    seconds = atof(argv[2]);
    /* A first thread, joined at once: under pinlab's plan the main thread runs on all the plan's
     * CPUs until it creates one, then on its own; so it touches the data from one node. */
    pthread_t first;
    pthread_create(&first, NULL, nothing, NULL);
    pthread_join(first, NULL);
    data = malloc(bytes);
    if (!data) return 1;
    memset(data, 0, bytes);
    half = bytes / sizeof *data / 2;
    printf("ready\n");
    fflush(stdout);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}
"""

FAR = r"""
numactl --cpunodebind=0 --membind=1 {spread} 96 3600 > "$R/far.out" &
P=$!
i=0; until grep -q ready "$R/far.out" 2>/dev/null || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
echo "@@pid@@"; echo $P
echo "@@before@@"; {pinlab} doctor $P --json --seconds 3
echo "@@migrate@@"; {pinlab} migrate $P --to 0; echo "rc $?"
echo "@@after@@"; {pinlab} doctor $P --json --seconds 3
kill $P; wait $P; true
"""


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    return compile_c(tmp_path_factory.mktemp("vm-doctor"), "spread", SPREAD_C)


@pytest.fixture(scope="module")
def guest(numavm, pinlab_cmd, spread):
    program = shlex.quote(spread)
    # The window covers the whole run (the doctor ends with the program): under emulation on a
    # busy host the first touch alone can take longer than any fixed window.
    doctor = f"{pinlab_cmd} doctor --json --seconds 3600 -c 0,2,1,3 --"
    commands = {
        "one_node": f"{doctor} {program} 96 6",
        "one_node_fixed": f"{doctor} numactl --interleave=0-1 {program} 96 6",
        "far": FAR.format(spread=program, pinlab=pinlab_cmd),
    }
    setup = "echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null\nR=$(mktemp -d)\nexport R\n"
    return numavm.batch([Group("doctor", commands, setup=setup, parallel=False)], nodes=2, sockets=2, cpus=4, timeout=600)


def _report(text: str) -> dict:
    """The doctor's JSON: the last line of its output (the program's own lines come first)."""
    return json.loads(text.strip().splitlines()[-1])


def _codes(report: dict) -> set[str]:
    return {f["code"] for f in report["findings"]}


def test_threads_on_both_nodes_working_on_data_one_thread_touched_are_found_and_interleave_fixes_it(guest, spread):
    result = guest["one_node"]
    assert result.returncode == 1, (result.stdout, result.stderr)
    report = _report(result.stdout)
    found = next(f for f in report["findings"] if f["code"] == "memory-on-one-node")
    assert found["evidence"]["thread_nodes"] == [0, 1], found
    # on the node the main thread ran on when it touched it (before its first thread, pinlab's
    # plan lets it run on any of the plan's CPUs)
    pages = {int(n): p for n, p in found["evidence"]["pages_per_node"].items()}
    assert max(pages.values()) >= 0.9 * sum(pages.values()) and sum(pages.values()) >= 96 * 256, pages
    assert found["fix"][1] == f"numactl --interleave=0-1 {spread} 96 6", found["fix"]
    fixed = guest["one_node_fixed"]
    assert fixed.returncode in (0, 1), (fixed.stdout, fixed.stderr)
    assert not _codes(_report(fixed.stdout)) & {"memory-on-one-node", "memory-far-from-threads"}, fixed.stdout


def test_data_on_a_node_none_of_the_threads_runs_on_is_found_and_migrating_it_as_printed_fixes_it(guest):
    parts = marked_sections(guest["far"].check("the far case").stdout)
    pid = int(parts["pid"][0])
    before = json.loads(parts["before"][-1])
    far = next(f for f in before["findings"] if f["code"] == "memory-far-from-threads")
    assert far["evidence"]["thread_nodes"] == [0] and far["fix"][0] == f"pinlab migrate {pid} --to 0", far
    assert parts["migrate"][-1] == "rc 0", parts["migrate"]
    after = json.loads(parts["after"][-1])
    assert not _codes(after) & {"memory-far-from-threads", "memory-on-one-node"}, after
