"""--cpu-kind: placements on one kind of core of a hybrid processor (the bundled alderlake-i9:
8 P-cores with two hardware threads each, CPUs 0-15, and 8 E-cores, CPUs 16-23)."""

from __future__ import annotations

import pytest

from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.placement.strategies import STRATEGIES, UNPINNED
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, with_allowed

P_CORES, E_CORES = set(range(16)), set(range(16, 24))


@pytest.fixture(scope="module")
def hybrid():
    topo = load_topology("alderlake-i9")
    assert {k.name: set(k.cpus) for k in topo.cpu_kinds} == {"IntelCore": P_CORES, "IntelAtom": E_CORES}
    return topo


@pytest.mark.parametrize(
    "word, cpus",
    [
        ("performance", P_CORES),
        ("P", P_CORES),
        ("IntelCore", P_CORES),
        ("1", P_CORES),
        ("efficiency", E_CORES),
        ("e", E_CORES),
        ("intelatom", E_CORES),
        ("0", E_CORES),
    ],
)
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s not in (*UNPINNED, "intra-socket")])
def test_every_strategy_stays_on_the_chosen_kind(hybrid, word, cpus, strategy):
    placement = make_placement(hybrid, strategy=strategy, threads=8, cpu_kind=word, seed=1)
    assert set(placement.cpus) <= cpus and len(set(placement.cpus)) == 8


def test_without_a_kind_scatter_mixes_them_which_is_why_the_option_exists(hybrid):
    cpus = make_placement(hybrid, strategy="scatter", threads=8).cpus
    assert set(cpus) & P_CORES and set(cpus) & E_CORES


def test_expressions_select_within_the_kind(hybrid):
    assert make_placement(hybrid, cpus="N:0-3", cpu_kind="E").cpus == [16, 17, 18, 19]
    assert set(make_placement(hybrid, cpus="E:N:4:1:2", cpu_kind="P").cpus) == {0, 2, 4, 6}


def test_a_kind_outside_the_allowed_cpus_is_refused(hybrid):
    narrowed = with_allowed(hybrid, range(16))
    with pytest.raises(UsageError, match=r"none of the IntelAtom CPUs \(16-23\) is allowed"):
        make_placement(narrowed, strategy="compact", threads=1, cpu_kind="E")


@pytest.mark.parametrize(
    "args, message",
    [
        (["-t", "alderlake-i9", "--cpu-kind", "medium"], "unknown --cpu-kind 'medium': use performance (P), efficiency (E)"),
        (["-t", "clovertown", "--cpu-kind", "P"], "clovertown has a single kind of core"),
    ],
)
def test_bad_kinds_are_one_line(args, message):
    result = run_pinlab("place", "-s", "compact", "-n", "2", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_run_takes_the_option_and_refuses_it_with_a_given_plan(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(run_pinlab("place", "-s", "compact", "-n", "1", "-f", "json").stdout)
    result = run_pinlab("run", "-q", "--cpu-kind", "P", "--plan", str(plan), "--", "true")
    assert result.returncode == 2 and "does not apply to a given plan" in result.stderr, result.stderr
    result = run_pinlab("run", "-q", "--cpu-kind", "P", "-s", "compact", "-n", "1", "--", "true")
    if len(load_topology("this").cpu_kinds) > 1:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2 and "has a single kind of core" in result.stderr, result.stderr


def test_a_study_places_every_configuration_on_the_kind_and_stores_it(hybrid, tmp_path):
    from pinlab.study.plan import Program, StudyPlan, plan_from_parameters

    def plan(kind, threads):
        return StudyPlan(
            name="k", programs=[Program("true", ["/bin/true"])], strategies=["compact", "scatter"], threads=[threads], runs=3, cpu_kind=kind
        )

    plan(None, 9).validate(topology=hybrid)  # 9 threads fit the whole machine...
    with pytest.raises(UsageError, match="placement compact with 9 threads does not fit this machine: 9 threads but only 8 cores are available"):
        plan("E", 9).validate(topology=hybrid)  # ...not its 8 E-cores
    plan("E", 8).validate(topology=hybrid)
    with pytest.raises(UsageError, match="unknown --cpu-kind 'huge'"):
        plan("huge", 2).validate(topology=hybrid)
    stored = plan("E", 8).parameters()
    assert stored["cpu_kind"] == "E" and "cpu_kind" not in plan(None, 8).parameters()  # older studies keep matching
    assert plan_from_parameters("k", stored, 0, 10).cpu_kind == "E"
