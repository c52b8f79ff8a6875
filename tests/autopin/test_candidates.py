"""The placements autopin probes: chosen from the topology, written out, or named by strategies.

Golden data for every bundled preset (candidates_golden.txt, regenerate with
PINLAB_UPDATE_GOLDEN=1 after a deliberate change and read the diff), the autopin study's
Table 2 on Clovertown, a synthetic machine per property claimed, and properties over random
synthetic machines.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinlab.autopin.candidates import DOUBLED, Candidate, auto_candidates, parse_candidates, signature, strategy_candidates
from pinlab.autopin.shape import shape
from pinlab.errors import UsageError
from pinlab.placement import strategies, units
from pinlab.topology import load_topology, preset_names
from tests.autopin.candidates_support import hybrid, random_automorphism, without_cores
from tests.conftest import run_pinlab, with_allowed
from tests.placement.strategies_support import machines

GOLDEN = Path(__file__).with_name("candidates_golden.txt")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cores(topo) -> int:
    return len(units.units_under(topo, topo.root, smt=False))


def signatures(topo, candidates) -> Counter:
    return Counter(signature(topo, c.cpus) for c in candidates)


def structural(found: list[Candidate]) -> list[Candidate]:
    """The candidates with one thread per CPU (all but the one with two threads on each)."""
    return [c for c in found if c.name != DOUBLED]


def check_doubled(found: list[Candidate], n: int, max_candidates: int = 8) -> None:
    """Two threads or more and room left: the last candidate puts two threads on each of the
    first candidate's first CPUs; one thread: none does."""
    doubled = [c for c in found if c.name == DOUBLED]
    if n == 1 or len(found) - len(doubled) >= max_candidates:
        assert doubled == [], found
        return
    half = found[0].cpus[: (n + 1) // 2]
    assert doubled == [found[-1]] and found[-1].cpus == tuple(half[i // 2] for i in range(n)), found


# -- golden data on the presets ----------------------------------------------------------------------
def golden_thread_counts(topo) -> list[int]:
    n_cores, n_pus = cores(topo), len(topo.allowed_cpus)
    return sorted({1, 2, 3, 4, 8, n_cores // 2, n_cores, n_pus} & set(range(1, n_pus + 1)))


def golden_text() -> str:
    lines = ["# auto_candidates(topo, threads) on every preset: name | CPUs (worker order) | describe()", ""]
    for name in preset_names():
        topo = load_topology(name)
        for n in golden_thread_counts(topo):
            lines.append(f"## {name}, {n} thread{'s' if n > 1 else ''}")
            for c in auto_candidates(topo, n):
                lines.append(f"{c.name} | {','.join(map(str, c.cpus))} | {c.describe(topo)}")
            lines.append("")
    return "\n".join(lines)


def test_candidates_on_every_preset_match_the_golden_data():
    text = golden_text()
    if os.environ.get("PINLAB_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "candidates changed: run with PINLAB_UPDATE_GOLDEN=1 and review the diff of candidates_golden.txt"


@pytest.mark.parametrize("preset", preset_names())
def test_preset_candidates_are_valid_distinct_and_leave_core_0_alone_when_there_is_room(preset):
    topo = load_topology(preset)
    core_0 = topo.core_of(topo.pu(0)).cpus
    for n in golden_thread_counts(topo):
        found = auto_candidates(topo, n)
        assert 1 <= len(found) <= 8
        check_doubled(found, n)
        found = structural(found)
        assert all(len(set(c.cpus)) == n and set(c.cpus) <= topo.allowed_cpus for c in found)
        assert max(signatures(topo, found).values()) == 1
        assert len({c.name for c in found}) == len(found)
        if n < cores(topo) / 2:  # the autopin study keeps core #0 for the OS
            assert all(not set(c.cpus) & core_0 for c in found), (n, found)


# -- the autopin study, Table 2 (Clovertown) ---------------------------------------------------------
# Linux numbering of the preset: package 0 holds CPUs 0,2,4,6 with L2 pairs {0,2} and {4,6},
# package 1 holds 1,3,5,7 with {1,3} and {5,7} (the paper: "core #0 and core #2" share a cache).
TABLE_2_CLOVERTOWN = {
    2: [(2, 6), (4, 5), (4, 6)],  # one package with separate L2s, two packages, one shared L2
    4: [(4, 5, 6, 7), (2, 3, 6, 7), (1, 3, 5, 7)],  # two packages sharing L2s, two packages one core per L2, one package
}


def test_the_preset_shares_l2_as_the_paper_says():
    topo = load_topology("clovertown")
    l2 = {frozenset(o.cpus) for o in topo.objects("L2")}
    assert l2 == {frozenset({0, 2}), frozenset({4, 6}), frozenset({1, 3}), frozenset({5, 7})}


@pytest.mark.parametrize("threads", sorted(TABLE_2_CLOVERTOWN))
def test_clovertown_candidates_are_the_papers_table_2(threads):
    topo = load_topology("clovertown")
    paper = signatures(topo, [Candidate("paper", cpus) for cpus in TABLE_2_CLOVERTOWN[threads]])
    found = auto_candidates(topo, threads)
    assert len(paper) == 3 and signatures(topo, structural(found)) == paper and found[-1].name == DOUBLED


def test_clovertown_names_say_where_the_threads_are():
    topo = load_topology("clovertown")
    by_class = {signature(topo, c.cpus): c.name for c in auto_candidates(topo, 2)}
    assert by_class[signature(topo, (4, 6))] == "compact"
    assert by_class[signature(topo, (4, 5))] == "scatter"
    assert by_class[signature(topo, (2, 6))] == "1 package, 1 thread per L2"
    four = {signature(topo, c.cpus): c for c in auto_candidates(topo, 4)}
    assert four[signature(topo, (4, 5, 6, 7))].name == "2 packages, 2 threads per L2"
    assert four[signature(topo, (2, 3, 6, 7))].describe(topo) == "2 packages (2 threads each), 4 L2 caches (1 thread each)"


def test_two_threads_per_cpu_come_last_when_there_is_room_in_a_kept_place_or_never():
    topo = load_topology("clovertown")
    no_room = auto_candidates(topo, 4, max_candidates=3)
    assert [c.name for c in no_room] == ["compact", "scatter", "2 packages, 2 threads per L2"]
    kept = auto_candidates(topo, 4, max_candidates=3, doubled=True)
    assert [c.name for c in kept] == ["compact", "scatter", DOUBLED] and kept[-1].cpus == (1, 1, 3, 3)  # compact's first two CPUs
    assert DOUBLED not in {c.name for c in auto_candidates(topo, 4, doubled=False)}
    assert auto_candidates(topo, 3)[-1].cpus == (1, 1, 3)  # an odd count: the last CPU has one
    on_two = auto_candidates(load_topology("synthetic:pack:1 core:2 pu:1"), 2)  # was a single candidate
    assert [(c.name, c.cpus) for c in on_two] == [("compact = scatter", (0, 1)), (DOUBLED, (0, 0))]


def test_one_thread_on_a_symmetric_machine_is_one_candidate_away_from_cpu_0():
    for preset in ("clovertown", "epyc-7763-2s", "x7560-4x8"):
        topo = load_topology(preset)
        (only,) = auto_candidates(topo, 1)
        assert "symmetric machine" in only.name and only.cpus != (0,)
        assert not set(only.cpus) & topo.core_of(topo.pu(0)).cpus


# -- synthetic machines, one per property --------------------------------------------------------------
NUMA_SMT = "pack:2 group:2 [numa] l3:2 core:2 pu:2"  # 2 packages x 2 NUMA nodes x 2 L3 x 2 cores x SMT2


def features(topo, cpus):
    """(packages, NUMA nodes, L3 caches, cores) used, and whether two threads share a core."""
    used = [len({id(topo.pu(c).ancestor(kind)) for c in cpus}) for kind in ("Package", "Group0", "L3", "Core")]
    return (*used, len(used) and used[3] < len(cpus))


def test_packages_numa_nodes_caches_and_smt_are_all_tried():
    topo = load_topology("synthetic:" + NUMA_SMT)
    found = {features(topo, c.cpus): c.name for c in structural(auto_candidates(topo, 4))}
    assert (1, 1, 2, 4, False) in found  # compact: one NUMA node, its two L3s
    assert (2, 4, 4, 4, False) in found  # scatter: every NUMA node
    assert (1, 2, 2, 4, False) in found  # one package, both its NUMA nodes, L3 shared
    assert (1, 2, 4, 4, False) in found  # one package, both NUMA nodes, one thread per L3
    assert (2, 2, 2, 4, False) in found  # two packages, one NUMA node each
    smt = [name for key, name in found.items() if key[4]]
    assert smt == ["1 package, 1 NUMA node, 4 threads per L3, SMT siblings"]  # one L3: 2 cores x 2 PUs


def test_smt_siblings_appear_once_by_default_never_with_smt_false_and_fully_with_smt_true():
    topo = load_topology("x7560-4x8")

    def sharing(found):
        return [c for c in structural(found) if shape(topo, c.cpus).smt_shared]

    default, off, full = (auto_candidates(topo, 4, smt=s, max_candidates=50) for s in (None, False, True))
    assert len(sharing(default)) == 1 and sharing(off) == []
    assert len(sharing(full)) > 1 and signatures(topo, default) - signatures(topo, full) == Counter()
    assert signatures(topo, structural(off)) + signatures(topo, sharing(default)) == signatures(topo, structural(default))


def test_threads_beyond_the_cores_need_smt():
    topo = load_topology("synthetic:pack:2 core:2 pu:2")
    found = auto_candidates(topo, 6)
    assert all(shape(topo, c.cpus).smt_shared for c in found)
    with pytest.raises(UsageError, match="6 threads but only 4 cores are allowed .* SMT siblings are excluded"):
        auto_candidates(topo, 6, smt=False)


def test_a_hybrid_machine_gets_one_candidate_per_kind_of_core_for_one_thread():
    topo = hybrid()
    p_cores, e_cores = topo.objects("L3")[0].cpus, topo.objects("L3")[1].cpus
    found = auto_candidates(topo, 1)
    assert sorted(c.name for c in found) == ["1 thread, E-core", "1 thread, P-core"]
    assert {bool(set(c.cpus) <= p_cores) for c in found} == {True, False}
    two = auto_candidates(topo, 2, max_candidates=50)
    kinds = {tuple(shape(topo, c.cpus).kinds) for c in two}
    assert kinds == {("P",), ("E",), ("P", "E")}
    assert all(set(c.cpus) <= e_cores for c in auto_candidates(topo, 2, cpu_kind="E"))


def test_the_bundled_hybrid_prefers_each_kind_in_turn():
    topo = load_topology("alderlake-i9")
    found = auto_candidates(topo, 4)
    kinds = [shape(topo, c.cpus).kinds for c in found]
    assert ("P",) in kinds and ("E",) in kinds
    e_only = [c for c in found if set(c.cpus) >= {16} and set(c.cpus) <= set(range(16, 24))]
    assert {len({id(topo.pu(x).ancestor("L2")) for x in c.cpus}) for c in e_only} == {1, 2}  # one E cluster, or two


def test_a_restricted_machine_uses_only_its_allowed_cpus():
    topo = with_allowed(load_topology("clovertown"), {1, 2, 3, 5, 7})
    found = auto_candidates(topo, 2, max_candidates=50)
    assert all(set(c.cpus) <= {1, 2, 3, 5, 7} for c in found)
    # package 0 is down to one core: two threads there are impossible, one there is a new class
    assert any(2 in c.cpus for c in found)
    with pytest.raises(UsageError, match=r"6 threads but only 5 CPUs are allowed \(1-3,5,7\); autopin pins one thread per CPU"):
        auto_candidates(topo, 6)


def test_an_irregular_tree_tells_packages_of_different_sizes_apart():
    topo = without_cores("pack:2 l2:2 core:2 pu:1", [(1, 0)])  # package 0: 4 cores, package 1: 3
    assert sorted(len(p.cpus) for p in topo.packages) == [3, 4]
    found = auto_candidates(topo, 1)
    assert len(found) == 3  # the big package, the small package's full L2, its half L2
    assert sorted(c.name for c in found) == [
        "1 thread in package of 3 cores, L2 of 1 core",
        "1 thread in package of 3 cores, L2 of 2 cores",
        "1 thread in package of 4 cores, L2 of 2 cores",
    ]
    three = auto_candidates(topo, 3, max_candidates=50)
    assert max(signatures(topo, three).values()) == 1
    assert any(set(c.cpus) == topo.packages[1].cpus for c in three)  # the small package, full


def test_max_candidates_keeps_the_first_ones():
    topo = load_topology("epyc-7763-2s")
    every = auto_candidates(topo, 8, max_candidates=50)
    assert len(every) > 8
    assert auto_candidates(topo, 8, max_candidates=3) == every[:3]
    assert [c.name for c in every[:2]] == ["compact", "scatter"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"threads": 0}, "autopin needs at least 1 thread"),
        ({"threads": 9}, "9 threads but only 8 CPUs are allowed"),
        ({"threads": 2, "max_candidates": 0}, "--max-candidates must be at least 1"),
        ({"threads": 2, "cpu_kind": "P"}, "has a single kind of core"),
    ],
)
def test_auto_refuses_in_one_line(kwargs, message):
    with pytest.raises(UsageError) as error:
        auto_candidates(load_topology("clovertown"), **kwargs)
    assert message in str(error.value) and "\n" not in str(error.value)


# -- properties over random machines ------------------------------------------------------------------
@SETTINGS
@given(topo=machines(), data=st.data())
def test_candidates_are_valid_distinct_and_include_compact_and_scatter(topo, data):
    n = data.draw(st.integers(1, len(topo.allowed_cpus)), label="threads")
    found = auto_candidates(topo, n, max_candidates=100)
    check_doubled(found, n, 100)
    assert auto_candidates(topo, n, max_candidates=100) == found  # deterministic
    found = structural(found)
    assert found and all(len(c.cpus) == n == len(set(c.cpus)) and set(c.cpus) <= topo.allowed_cpus for c in found)
    assert max(signatures(topo, found).values()) == 1
    assert len({c.name for c in found}) == len(found)
    smt = n > cores(topo)
    wanted = {signature(topo, strategies.compact(topo, n, smt)), signature(topo, strategies.scatter(topo, n, smt))}
    assert {signature(topo, c.cpus) for c in found[: len(wanted)]} == wanted


@SETTINGS
@given(topo=machines(), data=st.data())
def test_an_automorphism_keeps_the_signature(topo, data):
    cpus = data.draw(st.lists(st.sampled_from(sorted(topo.allowed_cpus)), min_size=1, unique=True), label="cpus")
    mapping = random_automorphism(topo, random.Random(data.draw(st.integers(0, 2**32 - 1))))
    assert sorted(mapping) == sorted(mapping.values()) == sorted(topo.pu_by_os)
    assert signature(topo, [mapping[c] for c in cpus]) == signature(topo, cpus)


def equivalent(topo, a, b) -> bool:
    """Whether an automorphism of the tree maps placement ``a`` onto ``b``, decided directly: two
    objects correspond when their labels agree and their children can be paired off so that each
    pair corresponds (a perfect matching found by backtracking), which is another algorithm than
    the sorted canonical forms behind :func:`signature`."""
    efficiency = {cpu: kind.efficiency for kind in topo.cpu_kinds for cpu in kind.cpus}

    def label(obj, chosen):
        pu = obj.os_index if obj.type == "PU" else None
        return (
            obj.kind,
            obj.attributes.get("cache_size"),
            len(obj.memory_children),
            efficiency.get(pu),
            pu in topo.allowed_cpus,
            pu in chosen,
            len(obj.children),
            len(obj.cpus & chosen),
        )

    def match(x, y) -> bool:
        if label(x, a) != label(y, b):
            return False
        return pair(list(x.children), list(y.children))

    def pair(xs, ys) -> bool:
        if not xs:
            return True
        return any(match(xs[0], y) and pair(xs[1:], ys[:i] + ys[i + 1 :]) for i, y in enumerate(ys))

    return match(topo.root, topo.root)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=machines(), data=st.data())
def test_equal_signatures_exactly_when_an_automorphism_maps_one_onto_the_other(topo, data):
    if len(topo.pus) > 32:  # keep the backtracking small
        topo = with_allowed(load_topology("synthetic:pack:2 l2:2 core:2 pu:2"), {0, 1, 2, 3, 5, 6, 9, 12, 13})
    pick = st.lists(st.sampled_from(sorted(topo.allowed_cpus)), min_size=1, max_size=4, unique=True)
    a = data.draw(pick, label="a")
    b = data.draw(st.one_of(pick, st.just([random_automorphism(topo, random.Random(len(a)))[c] for c in a])), label="b")
    assert (signature(topo, a) == signature(topo, b)) == equivalent(topo, set(a), set(b))


def test_renumbering_the_cpus_gives_the_same_classes():
    plain = load_topology("synthetic:pack:2 l3:2 core:2 pu:2")
    order = [5, 12, 0, 9, 3, 14, 7, 1, 10, 2, 15, 6, 13, 4, 8, 11]
    renumbered = load_topology(f"synthetic:pack:2 l3:2 core:2 pu:2(indexes={','.join(map(str, order))})")
    for n in (1, 2, 3, 4, 6, 8, 12):
        assert set(signatures(plain, auto_candidates(plain, n))) == set(signatures(renumbered, auto_candidates(renumbered, n)))


# -- written out ------------------------------------------------------------------------------------
def test_parse_the_papers_style_with_expressions_and_ranges():
    topo = load_topology("clovertown")
    assert parse_candidates("0,1;0,2; 4-5", topo, None) == [
        Candidate("CPUs 0,1", (0, 1)),
        Candidate("CPUs 0,2", (0, 2)),
        Candidate("CPUs 4-5", (4, 5)),
    ]
    assert [c.cpus for c in parse_candidates("S1:0-1;S0", topo, 2)] == [(1, 3), (0, 2)]  # S0 whole, first 2 taken
    assert [c.cpus for c in parse_candidates("3,1;2,0", {0, 1, 2, 3}, None)] == [(3, 1), (2, 0)]
    # Threads sharing a CPU on purpose: "both on CPU 0, or one per CPU?"
    assert [c.cpus for c in parse_candidates("0,0;0,1", topo, None)] == [(0, 0), (0, 1)]


@pytest.mark.parametrize(
    "text, threads, message",
    [
        ("0,,1;", None, "candidate 1 ('0,,1'): malformed CPU list '0,,1'"),
        ("0,1;;0,2", None, "candidate 2 is empty"),
        ("0,1;", None, "candidate 2 is empty"),
        ("", 2, "no candidates given"),
        ("0,1;0,x", None, "candidate 2 ('0,x'): malformed"),
        ("0,1;0,9", None, "candidate 2 ('0,9'): CPU 9 does not exist on clovertown"),
        ("0,1;2,3,4", 3, "more threads than candidate 1 has CPUs: 3 threads, candidate 1 ('0,1') has 2"),
        ("0,1;2,3,4", None, "candidates have different numbers of CPUs (2 in candidate 1, 3 in candidate 2)"),
        ("0,1", 0, "autopin needs at least 1 thread"),
        ("S9:0", None, "candidate 1 ('S9:0'): domain S9 does not exist"),
    ],
)
def test_parse_refuses_in_one_line(text, threads, message):
    with pytest.raises(UsageError) as error:
        parse_candidates(text, load_topology("clovertown"), threads)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_parse_refuses_cpus_outside_the_allowed_set():
    topo = with_allowed(load_topology("clovertown"), {1, 2, 3})
    with pytest.raises(UsageError, match=r"candidate 2 \('0,1'\): CPU 0 is not allowed for this process \(allowed: 1-3\)"):
        parse_candidates("1,2;0,1", topo, None)
    with pytest.raises(UsageError, match=r"candidate 1 \('4'\): CPU 4 is not allowed for this process \(allowed: 1-3\)"):
        parse_candidates("4", {1, 2, 3}, 1)


# -- from strategies ----------------------------------------------------------------------------------
def test_strategies_become_candidates_and_identical_ones_are_probed_once():
    topo = load_topology("clovertown")
    found = strategy_candidates(topo, ["compact,scatter", "intra-socket"], 4)
    assert found == [Candidate("compact = intra-socket", (0, 2, 4, 6)), Candidate("scatter", (0, 4, 1, 5))]
    assert strategy_candidates(topo, ["close", "compact"], 2) == [Candidate("compact", (0, 2))]


@pytest.mark.parametrize(
    "names, threads, message",
    [
        (["compact", "none"], 2, "strategy none leaves the threads to the OS"),
        (["compact", "tight"], 2, "unknown strategy 'tight'"),
        ([" , "], 2, "no strategies given"),
        (["compact"], 9, "9 threads but only 8 cores are available"),
    ],
)
def test_strategies_refused_in_one_line(names, threads, message):
    with pytest.raises(UsageError) as error:
        strategy_candidates(load_topology("clovertown"), names, threads)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


# -- previewing the candidates: pinlab autopin --dry-run [--topology] ----------------------------------------
@pytest.mark.parametrize("preset, threads", [("clovertown", 4), ("nehalem-ep", 2), ("opteron-4x4", 8)])
def test_dry_run_lists_the_candidates_autopin_would_probe_on_another_machine(preset, threads):
    result = run_pinlab("autopin", "--dry-run", "-n", str(threads), "--topology", preset)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    topo = load_topology(preset)
    expected = auto_candidates(topo, threads)
    assert lines[0] == f"{len(expected)} candidates for {threads} threads on {preset}:"
    for i, (line, candidate) in enumerate(zip(lines[1:], expected)):
        assert line == f"  #{i} {candidate.name}: CPUs {','.join(map(str, candidate.cpus))} ({candidate.describe(topo)})"


def test_dry_run_takes_explicit_candidates_and_says_when_there_is_one_only():
    explicit = run_pinlab("autopin", "--dry-run", "-C", "0,1;0,0", "--topology", "clovertown")
    assert explicit.returncode == 0, explicit.stderr
    topo = load_topology("clovertown")
    assert explicit.stdout.splitlines()[1:] == [
        f"  #{i} {c.name} ({c.describe(topo)})" for i, c in enumerate(parse_candidates("0,1;0,0", topo, None))
    ]
    assert "#1 CPUs 0,0 (" in explicit.stdout
    single = run_pinlab("autopin", "--dry-run", "-n", "1", "--topology", "synthetic:pack:1 core:2 pu:1")
    assert single.returncode == 0 and "only one candidate: autopin would measure it once" in single.stdout, single.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topology", "clovertown", "--", "true"], "--topology previews the candidates of another machine: it goes with --dry-run"),
        (["--dry-run", "--pid", "1"], "--dry-run previews the candidates for -n threads"),
        (["--dry-run", "-n", "9", "--topology", "clovertown"], "9 threads but only 8 CPUs are allowed"),
    ],
)
def test_dry_run_refusals_are_one_line(args, message):
    result = run_pinlab("autopin", *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
