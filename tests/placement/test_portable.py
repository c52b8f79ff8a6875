"""A placement written relative to the tree: the same placement on the machine it was made on, the
same shape on another numbering, and a one-line refusal where it cannot hold.

Machines: the presets, the real nodes' hwloc files the suite keeps (tests/ranks/data,
tests/placement/data), and hwloc synthetic machines of one shape numbered two ways (Intel's
hardware threads N apart, and next to each other).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pinlab.autopin.candidates import auto_candidates
from pinlab.autopin.symmetry import signature
from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.placement.plan import plan_cpus
from pinlab.placement.portable import describe, resolve
from pinlab.topology import load_topology, preset_names
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import Topology
from tests.conftest import run_pinlab, with_allowed

DATA = Path(__file__).resolve().parents[1]
REAL = sorted(str(p) for p in [*(DATA / "ranks" / "data").glob("*.xml"), *(DATA / "placement" / "data").glob("*.xml")])
MACHINES = list(preset_names()) + REAL

#: One shape, two numberings: 2 packages x 4 cores x 2 hardware threads.
NEXT_TO_EACH_OTHER = "synthetic:pack:2 l3:1 l2:2 core:2 pu:2"
N_APART = "synthetic:pack:2 l3:1 l2:2 core:2 pu:2(indexes=" + ",".join(f"{c},{c + 8}" for c in range(8)) + ")"


def placements(topo):
    """Placements of several sizes: autopin's structurally different ones, compact and scatter, two threads per CPU."""
    allowed = len(topo.allowed_cpus)
    for threads in sorted({1, 2, 3, max(1, allowed // 2), allowed}):
        for candidate in auto_candidates(topo, threads, max_candidates=6):
            yield list(candidate.cpus)
        for strategy in ("compact", "scatter"):
            yield make_placement(topo, strategy=strategy, threads=threads, smt=True).cpus
    first = sorted(topo.allowed_cpus)[0]
    yield [first, first]


@pytest.mark.parametrize("source", MACHINES, ids=lambda s: Path(s).stem)
def test_the_description_gives_back_the_placement_on_its_own_machine(source):
    topo = load_topology(source)
    for cpus in placements(topo):
        description = describe(topo, cpus)
        assert json.loads(json.dumps(description)) == description
        assert resolve(topo, description) == cpus, (cpus, description)


def test_the_same_placement_on_another_numbering_has_the_same_description_and_other_cpus():
    made, other = load_topology(N_APART), load_topology(NEXT_TO_EACH_OTHER)
    assert made.pu(8).parent is made.pu(0).parent  # hwloc took the numbering: CPU 8 is CPU 0's sibling there
    moved = 0
    for cpus in placements(made):
        description = describe(made, cpus)
        here = resolve(other, description)
        assert describe(other, here)["slots"] == description["slots"]
        moved += here != cpus
    assert moved > 10


def test_a_placement_keeps_its_shape_where_the_tree_is_the_same_but_numbered_otherwise():
    """The twin of a placement on the other numbering is in the same class under the machine's symmetry."""
    made, other = load_topology(N_APART), load_topology(NEXT_TO_EACH_OTHER)
    renumber = {made.pus[i].os_index: other.pus[i].os_index for i in range(len(made.pus))}  # same logical PU
    for cpus in placements(made):
        assert signature(other, resolve(other, describe(made, cpus))) == signature(other, [renumber[c] for c in cpus])


def test_ranks_count_the_allowed_cpus_so_a_plan_moves_between_allocations():
    """A plan made in a job given cores 4-7 resolves, in a job given 0-3, to the same cores of its allocation."""
    full = load_topology("synthetic:pack:1 core:8 pu:1")
    first, second = with_allowed(full, range(4, 8)), with_allowed(full, range(4))
    description = describe(first, [5, 7])
    assert description["slots"] == [[1, 0], [3, 0]]
    assert resolve(second, description) == [1, 3]
    assert resolve(full, description) == [1, 3]


def test_words_say_the_shape():
    topo = load_topology(NEXT_TO_EACH_OTHER)
    assert describe(topo, [0, 8, 4, 12])["words"] == (
        "4 threads: 2 packages (2 threads each), 4 L2 caches (1 thread each), 4 cores (1 thread each), 1 hardware thread per core"
    )
    assert describe(topo, [0, 1, 0])["words"] == (
        "3 threads: 1 package (3 threads), 1 L2 cache (3 threads), 1 core (3 threads), 2 hardware threads per core, 1-2 threads per hardware thread"
    )


@pytest.mark.parametrize(
    "made, cpus, there, message",
    [
        ("synthetic:pack:2 core:8 pu:1", list(range(8)), "synthetic:pack:2 core:4 pu:1", "thread 4 on core #4 in package #0, and this machine"),
        ("synthetic:pack:2 core:2 pu:2", [0, 1], "synthetic:pack:2 core:2 pu:1", "hardware thread #1 in package #0 core #0"),
        ("synthetic:pack:1 l3:2 core:2 pu:1", [0, 2], "synthetic:pack:1 core:4 pu:1", "places threads by L3 caches, and this machine"),
        ("synthetic:pack:4 core:1 pu:1", [3], "synthetic:pack:2 core:2 pu:1", "thread 0 on package #3"),
    ],
    ids=["fewer cores", "no SMT", "no such level", "fewer packages"],
)
def test_where_the_placement_cannot_hold_it_says_why_in_one_line(made, cpus, there, message):
    description = describe(load_topology(made), cpus)
    with pytest.raises(UsageError) as refused:
        resolve(load_topology(there), description, "plan file p.json")
    text = str(refused.value)
    assert message in text and "\n" not in text and text.startswith("plan file p.json")
    assert "cannot hold here" in text


def test_a_plan_on_its_own_machine_keeps_its_cpus_and_says_nothing():
    topo = load_topology(N_APART)
    plan = make_placement(topo, strategy="scatter", threads=4).to_json()
    assert plan_cpus(plan, topo) == (plan["cpus"], None)
    elsewhere, said = plan_cpus(plan, load_topology(NEXT_TO_EACH_OTHER), "plan file p.json")
    assert elsewhere != plan["cpus"] and said is not None
    assert f"CPUs {','.join(map(str, elsewhere))} on this machine" in said


def test_a_damaged_description_is_refused_in_one_line():
    topo = load_topology("clovertown")
    for broken in ({"levels": "Core", "slots": [[0]]}, {"levels": ["Core", "PU"], "slots": [[0]]}, {"levels": ["Core", "PU"], "slots": [[0, -1]]}):
        with pytest.raises(UsageError, match="write it again"):
            resolve(topo, broken, "plan file p.json")


# -- kinds of core ---------------------------------------------------------------------------------
def hybrid(performance: list[int], description: str = "pack:1 [numa] l3:1 core:8 pu:1") -> Topology:
    """A synthetic machine made hybrid as hwloc 2.4+ records one (``<cpukind>``): ``performance``
    are P-cores (efficiency 1, IntelCore), the others E-cores (efficiency 0, IntelAtom), all under
    one L3 (as on Alder Lake), so that no level of the tree tells the kinds apart."""
    plain = load_topology("synthetic:" + description)
    p_cores = frozenset(performance)
    e_cores = plain.root.cpus - p_cores

    def mask(cpus) -> str:
        return hex(sum(1 << c for c in cpus))

    kinds = (
        f'<cpukind cpuset="{mask(e_cores)}" forced_efficiency="0"><info name="CoreType" value="IntelAtom"/></cpukind>'
        f'<cpukind cpuset="{mask(p_cores)}" forced_efficiency="1"><info name="CoreType" value="IntelCore"/></cpukind>'
    )
    return parse_xml(plain.xml.replace("</topology>", kinds + "</topology>"), source=f"hybrid P-cores {format_cpulist(p_cores)}")


def test_on_a_hybrid_machine_each_thread_keeps_its_kind_of_core_on_another_numbering():
    """P-cores numbered first on one machine and last on the next: the plan's two P-cores and one
    E-core stay so, where ranks by the tree alone (one L3 for all) would swap them."""
    first, last = hybrid([0, 1, 2, 3]), hybrid([4, 5, 6, 7])
    description = describe(first, [0, 1, 4])
    assert description["kinds"] == [0, 0, 1] and description["slots"] == [[0, 0], [1, 0], [0, 0]]  # core, PU: among its kind
    assert description["words"].endswith("; by kind of core, the most powerful first: 2, 1 threads")
    assert resolve(first, description) == [0, 1, 4]
    assert resolve(last, description) == [4, 5, 0]
    without = {k: v for k, v in description.items() if k != "kinds"}
    assert resolve(last, without) != [4, 5, 0]  # the tree alone cannot tell the kinds apart


def test_kinds_count_the_cores_of_each_kind_so_a_plan_moves_to_a_machine_of_other_counts():
    """2 P-cores + 6 E-cores: the plan's E-cores #0 and #1 of 4 are that machine's E-cores #0 and #1."""
    plan = describe(hybrid([0, 1, 2, 3]), [4, 5])
    assert resolve(hybrid([0, 1]), plan) == [2, 3]
    with pytest.raises(UsageError, match=r"core #2, and this machine \(hybrid P-cores 0-1\) has 2 cores"):
        resolve(hybrid([0, 1]), describe(hybrid([0, 1, 2, 3]), [0, 1, 2]))


def test_a_hybrid_plan_on_a_machine_of_one_kind_holds_on_the_most_powerful_kind_only():
    plain = load_topology("synthetic:pack:1 [numa] l3:1 core:8 pu:1")
    assert resolve(plain, describe(hybrid([0, 1, 2, 3]), [2, 3])) == [2, 3]  # P-cores #2 and #3: all are the most powerful there
    with pytest.raises(UsageError) as refused:
        resolve(plain, describe(hybrid([0, 1, 2, 3]), [0, 4]), "plan file p.json")
    text = str(refused.value)
    assert text.startswith("plan file p.json puts thread 1 on the kind of core ranked 2 by power") and "has 1 kind of core" in text
    assert "cannot hold here" in text and "\n" not in text


def test_a_plan_of_a_machine_of_one_kind_has_no_kinds_and_resolves_by_the_tree_alone():
    plain = load_topology("synthetic:pack:1 [numa] l3:1 core:8 pu:1")
    description = describe(plain, [0, 1])
    assert "kinds" not in description and "kind of core" not in description["words"]
    assert resolve(hybrid([4, 5, 6, 7]), description) == [0, 1]


def test_pinlab_place_plan_keeps_the_kinds_of_core_on_a_hybrid_xml(tmp_path):
    first, last = tmp_path / "first.xml", tmp_path / "last.xml"
    first.write_text(hybrid([0, 1, 2, 3]).xml)
    last.write_text(hybrid([4, 5, 6, 7]).xml)
    plan = tmp_path / "plan.json"
    made = run_pinlab("place", "-t", str(first), "-c", "0,1,4", "-f", "json")
    assert made.returncode == 0, made.stderr
    plan.write_text(made.stdout)
    assert json.loads(made.stdout)["portable"]["kinds"] == [0, 0, 1]
    there = run_pinlab("place", "-t", str(last), "--plan", str(plan))
    assert (there.returncode, there.stdout.strip()) == (0, "4,5,0"), there.stderr


# -- the command line -------------------------------------------------------------------------------
def test_pinlab_place_plan_resolves_a_plan_of_another_machine(tmp_path):
    plan = tmp_path / "plan.json"
    made = run_pinlab("place", "-t", "clovertown", "-s", "scatter", "-n", "4", "-f", "json")
    assert made.returncode == 0, made.stderr
    plan.write_text(made.stdout)
    assert json.loads(made.stdout)["cpus"] == [0, 4, 1, 5]
    same = run_pinlab("place", "-t", "clovertown", "--plan", str(plan))
    assert (same.returncode, same.stdout.strip(), same.stderr) == (0, "0,4,1,5", "")
    there = run_pinlab("place", "-t", "opteron-4x4", "--plan", str(plan), "-f", "json")
    assert there.returncode == 0, there.stderr
    assert json.loads(there.stdout)["cpus"] == [0, 1, 4, 5]  # package 0 cores 0-1, package 1 cores 0-1, in the plan's order
    assert "was made on clovertown (allowed CPUs 0-7) with CPUs 0,4,1,5" in there.stderr
    assert "is CPUs 0,1,4,5 on this machine (opteron-4x4, allowed CPUs 0-15)" in there.stderr
    refused = run_pinlab("place", "-t", "synthetic:pack:1 core:2 pu:1", "--plan", str(plan))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "cannot hold here" in refused.stderr


def test_pinlab_place_plan_refuses_another_placement_beside_it(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(run_pinlab("place", "-t", "clovertown", "-s", "compact", "-n", "2", "-f", "json").stdout)
    for extra in (["-s", "compact"], ["-c", "0"], ["-n", "2"]):
        refused = run_pinlab("place", "-t", "clovertown", "--plan", str(plan), *extra)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "--plan FILE" in refused.stderr


def test_an_old_plan_without_a_description_runs_its_cpus_or_says_which_cpu_is_missing(tmp_path):
    plan = tmp_path / "plan.json"
    data = json.loads(run_pinlab("place", "-t", "opteron-4x4", "-c", "9,12", "-f", "json").stdout)
    data.pop("portable")
    plan.write_text(json.dumps(data))
    assert run_pinlab("place", "-t", "opteron-4x4", "--plan", str(plan)).stdout.strip() == "9,12"
    refused = run_pinlab("place", "-t", "clovertown", "--plan", str(plan))
    assert refused.returncode == 2 and "pins to CPU 9, which this machine (clovertown) does not have" in refused.stderr


def test_pinlab_run_plan_runs_the_plan_resolved_in_this_allocation(tmp_path):
    """A plan made where only the last allowed CPU was allowed puts its thread on the first one of a
    wider allocation; its record holds the CPUs it ran and where it ran says so."""
    allowed = sorted(os.sched_getaffinity(0))
    last = allowed[-1]
    plan, record = tmp_path / "plan.json", tmp_path / "r.json"
    made = run_pinlab("place", "-c", str(last), "-f", "json", prefix=["taskset", "-c", str(last)])
    assert made.returncode == 0, made.stderr
    plan.write_text(made.stdout)
    assert json.loads(made.stdout)["portable"]["slots"] == [[0, 0]]
    ran = run_pinlab("run", "--plan", str(plan), "--record", str(record), "--", sys.executable, "-c", "pass")
    assert ran.returncode == 0, ran.stderr
    data = json.loads(record.read_text())
    main = data["threads"][0]
    assert data["plan"]["cpus"] == [allowed[0]] and main["planned_cpu"] == allowed[0] and main["cpu_at_start"] == allowed[0]
    if len(allowed) > 1:
        assert f"with CPUs {last}; its placement" in ran.stderr and f"is CPUs {allowed[0]} on this machine" in ran.stderr
    quiet = run_pinlab("run", "-q", "--plan", str(plan), "--", sys.executable, "-c", "pass")
    assert (quiet.returncode, quiet.stderr) == (0, "")
