"""Where the memory is against where the threads run, and transparent huge pages.

The NUMA checks need several nodes, which this machine lacks: their windows are made up (four
CPUs, 0-1 on node 0 and 2-3 on node 1, busy threads all along). Huge pages are checked on a real
program here: it mallocs and touches 1.2 GiB while the system gives huge pages only on request
(madvise), then again started as the printed fix says.
"""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from pinlab.doctor.checks import diagnose
from pinlab.doctor.machine_checks import memory_far, memory_one_node
from pinlab.doctor.observe import ProcessObservation, Sample
from pinlab.measure import linux
from pinlab.measure.threads import LiveThread
from tests.conftest import PINLAB, compile_c, run_pinlab
from tests.doctor.helpers import clean_env, finding

NODES = {0: 0, 1: 0, 2: 1, 3: 1}


def _window(cpus: list[int], pages: dict[int, int]) -> ProcessObservation:
    obs = ProcessObservation(100, "prog", ["prog"], {}, [], frozenset(NODES), pages_per_node=pages, cpu_nodes=dict(NODES))
    for i in range(10):
        threads = [LiveThread(101 + k, 100, "prog", "worker", k + 1, None, cpu, frozenset({cpu}), 0, 0.1 * i, "R") for k, cpu in enumerate(cpus)]
        obs.samples.append(Sample(i * 0.1, threads))
    return obs


def test_threads_on_two_nodes_with_their_data_on_one_are_found():
    (found,) = memory_one_node(_window([0, 2], {0: 20000, 1: 100}))
    assert found.code == "memory-on-one-node" and found.severity == "warning"
    assert found.evidence["thread_nodes"] == [0, 1] and found.evidence["pages_per_node"] == {"0": 20000, "1": 100}
    assert found.fix[:2] == ["pinlab run -s scatter -n 2 --mem interleave:0-1 -- prog", "numactl --interleave=0-1 prog"]


def test_interleaved_data_small_data_or_threads_on_one_node_are_not_found():
    assert memory_one_node(_window([0, 2], {0: 10000, 1: 10000})) == []  # what the fix gives
    assert memory_one_node(_window([0, 2], {0: 2000, 1: 10})) == []  # too little to matter
    assert memory_one_node(_window([0, 1], {0: 20000, 1: 100})) == []  # all on their node
    assert memory_far(_window([0, 1], {0: 20000, 1: 100})) == []


def test_data_on_a_node_none_of_the_threads_runs_on_is_far_and_not_one_node():
    obs = _window([0, 1], {0: 100, 1: 20000})
    assert [f.code for f in diagnose(obs) if f.code.startswith("memory")] == ["memory-far-from-threads"]
    assert memory_far(obs)[0].fix[0] == "pinlab migrate 100 --to 0"


HOLD_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    size_t bytes = (size_t)atol(argv[1]) << 20;
    char *p = malloc(bytes);
    if (!p) return 1;
    memset(p, 1, bytes);
    printf("ready\n");
    fflush(stdout);
    sleep(600);
    return p[bytes / 2];
}
"""


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    return compile_c(tmp_path_factory.mktemp("hold"), "hold", HOLD_C)


def _doctor_on(argv: list[str]) -> dict:
    """Start ``argv`` (the program itself, or pinlab run starting it), wait for its ``ready``, and
    run the doctor on the program's own process."""
    program = subprocess.Popen(argv, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert program.stdout.readline().strip() == "ready"
        pid = program.pid
        if argv[0] == str(PINLAB):
            import psutil

            pid = psutil.Process(program.pid).children()[0].pid
        done = run_pinlab("doctor", str(pid), "--seconds", "0.5", "--json")
        assert done.stderr == "", done.stderr
        return json.loads(done.stdout)
    finally:
        program.terminate()  # pinlab run passes it on to the program
        try:
            program.wait(timeout=300)
        except subprocess.TimeoutExpired:
            program.kill()
            program.wait()


@pytest.mark.skipif(linux.thp_mode() != "madvise", reason="the case needs the system's huge pages on request only (madvise)")
def test_a_large_heap_without_huge_pages_is_said_and_the_printed_run_gives_it_huge_pages(hold):
    report = _doctor_on([hold, "1200"])
    thp = finding(report, "thp-off")
    assert thp["severity"] == "info" and thp["evidence"]["thp"] == "madvise" and thp["evidence"]["anon_huge_kib"] < 120 * 1024, thp
    assert report["worst"] == "info"
    line = thp["fix"][0]
    assert line == f"pinlab run --thp always -- {hold} 1200"
    words = shlex.split(line)
    report = _doctor_on([str(PINLAB), *words[1:]])
    assert "thp-off" not in {f["code"] for f in report["findings"]}, report
