"""Busy threads against the machine's cores: hardware threads of one core shared while whole cores
idle, and equal work split over performance and efficiency cores.

This machine has neither SMT nor two kinds of core, so the windows are made up (10 samples 0.1 s
apart, each thread busy all along) on the bundled Alder Lake i9: 8 P-cores of 2 hardware threads
(CPUs 0-15, siblings 2k and 2k+1) and 8 E-cores (CPUs 16-23). The fix is checked by computing the
placement it asks for with pinlab's own strategy and watching the same threads there.
"""

from __future__ import annotations

import shlex

from pinlab.doctor.checks import diagnose
from pinlab.doctor.machine_checks import kinds_split, smt_shared
from pinlab.doctor.observe import ProcessObservation, Sample
from pinlab.measure.threads import LiveThread
from pinlab.placement import make_placement
from pinlab.topology.sources import load_preset

ALDER = load_preset("alderlake-i9")
ALL = frozenset(range(24))


def _window(
    masks: list[frozenset[int]], *, shares: list[float] | None = None, ran_on: list[list[int]] | None = None, topology=ALDER, files=()
) -> ProcessObservation:
    """Threads 101.. with these masks, each using ``shares[k]`` of a CPU, on ``ran_on[k][i]`` at sample i
    (default: the smallest CPU of its mask); main thread 100 idle."""
    obs = ProcessObservation(100, "prog", ["prog", "--size", "big"], {}, list(files), ALL, topology=topology)
    shares = shares or [1.0] * len(masks)
    for i in range(10):
        threads = [LiveThread(100, 100, "prog", "main", 0, None, 0, ALL, 0, 0.0, "S")]
        for k, mask in enumerate(masks):
            cpu = ran_on[k][i] if ran_on else min(mask)
            threads.append(LiveThread(101 + k, 100, "prog", "worker", k + 1, None, cpu, mask, 0, 0.1 * i * shares[k], "R" if shares[k] > 0 else "S"))
        obs.samples.append(Sample(i * 0.1, threads))
    return obs


def _pinned(cpus) -> list[frozenset[int]]:
    return [frozenset({c}) for c in cpus]


def test_two_busy_threads_on_one_cores_siblings_while_cores_idle_are_found():
    (found,) = smt_shared(_window(_pinned([0, 1])))
    assert found.code == "smt-siblings-shared" and found.severity == "warning"
    assert found.evidence["shared_cores"] == ["0-1"]
    assert len(found.evidence["idle_cores"]) == 15 and "2-3" in found.evidence["idle_cores"]
    assert found.fix[0] == "pinlab run -s compact -n 2 -- prog --size big"


def test_the_fix_one_thread_per_core_makes_it_go_away():
    (found,) = smt_shared(_window(_pinned([0, 1])))
    words = shlex.split(found.fix[0])
    plan = make_placement(ALDER, strategy=words[words.index("-s") + 1], threads=int(words[words.index("-n") + 1]))
    assert smt_shared(_window(_pinned(plan.cpus))) == []


def test_a_mask_of_one_cores_siblings_for_two_busy_threads_is_found_as_taskset_gives_it():
    sibling_pair = frozenset({4, 5})
    (found,) = smt_shared(_window([sibling_pair, sibling_pair], ran_on=[[4] * 10, [5] * 10]))
    assert found.evidence["shared_cores"] == ["4-5"]


def test_openmp_programs_also_get_the_variables_that_give_a_core_each():
    (found,) = smt_shared(_window(_pinned([0, 1]), files=["/usr/lib/x86_64-linux-gnu/libgomp.so.1"]))
    assert found.fix[1] == "OMP_NUM_THREADS=2 OMP_PLACES=cores OMP_PROC_BIND=close prog --size big"


def test_no_smt_finding_when_each_thread_has_a_core_or_there_are_too_many_threads_or_no_topology():
    assert smt_shared(_window(_pinned([0, 2, 4]))) == []  # a core each
    assert smt_shared(_window(_pinned(range(24)))) == []  # 24 threads, 16 cores: sharing cannot be avoided
    assert smt_shared(_window(_pinned([0, 1]), topology=None)) == []  # hwloc could not say
    assert smt_shared(_window(_pinned([0, 1]), shares=[1.0, 0.0])) == []  # one busy thread only
    assert smt_shared(_window(_pinned([0, 1]), topology=load_preset("nehalem-ep"))) == []  # no SMT in that file


def test_equal_work_on_p_and_e_cores_is_found_and_the_p_core_fix_makes_it_go_away():
    obs = _window(_pinned([0, 2, 16, 17]))
    (found,) = kinds_split(obs)
    assert found.code == "split-over-core-kinds" and found.severity == "warning"
    assert {name: len(ts) for name, ts in found.evidence["threads_by_kind"].items()} == {"IntelCore": 2, "IntelAtom": 2}
    assert found.fix[0] == "pinlab run -s compact -n 4 --cpu-kind IntelCore -- prog --size big"
    plan = make_placement(ALDER, strategy="compact", threads=4, cpu_kind="IntelCore")
    assert set(plan.cpus) <= set(range(16))
    assert kinds_split(_window(_pinned(plan.cpus))) == []


def test_unpinned_threads_are_judged_by_where_they_ran_most():
    anywhere = [ALL] * 2
    obs = _window(anywhere, ran_on=[[0] * 10, [16] * 7 + [2] * 3])
    assert [f.code for f in kinds_split(obs)] == ["split-over-core-kinds"]
    obs = _window(anywhere, ran_on=[[0] * 10, [16] * 3 + [2] * 7])
    assert kinds_split(obs) == []


def test_no_kinds_finding_for_unequal_work_one_kind_or_a_machine_of_one_kind():
    assert kinds_split(_window(_pinned([0, 16]), shares=[1.0, 0.3])) == []  # the E-core thread does less: not an even split
    assert kinds_split(_window(_pinned([0, 2, 4]))) == []
    assert kinds_split(_window(_pinned([0, 16]), topology=load_preset("nehalem-ep"))) == []


def test_openmp_fix_names_one_place_per_p_core():
    (found,) = kinds_split(_window(_pinned([0, 16]), files=["/usr/lib/x86_64-linux-gnu/libgomp.so.1"]))
    assert found.fix[1] == "OMP_NUM_THREADS=2 'OMP_PLACES={0},{2},{4},{6},{8},{10},{12},{14}' OMP_PROC_BIND=close prog --size big"  # quoted: braces


def test_both_findings_come_through_diagnose_on_one_window():
    codes = {f.code for f in diagnose(_window(_pinned([0, 1, 16])))}
    assert {"smt-siblings-shared", "split-over-core-kinds"} <= codes
