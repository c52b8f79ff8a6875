"""CPU lists and likwid-style domain expressions."""

from pathlib import Path

import pytest

from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.placement.expressions import resolve
from pinlab.topology import load_topology
from tests.conftest import with_allowed


@pytest.fixture(scope="module")
def x7560():
    return load_topology("x7560-4x8")


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("0,32,4-5", [0, 32, 4, 5]),
        ("S1:0-3", [1, 5, 9, 13]),  # first four cores of socket 1
        ("S1:8-9", [33, 37]),  # past the cores come the hardware-thread siblings, as in likwid
        ("M0:0-1@M1:0-1", [0, 4, 1, 5]),
        ("L3_2:0-3", [2, 6, 10, 14]),
        ("C3:0", [3]),
        ("N:0-3", [0, 4, 8, 12]),
        # E: counts hardware threads in hardware order (core 0's PUs 0 and 32, then core 1's 4 and 36...)
        ("E:N:4:1:2", [0, 4, 8, 12]),  # one thread in every two: the first four physical cores
        ("E:S0:4:2:4", [0, 32, 8, 40]),  # two threads (a core's pair), skip to the 5th thread
        ("E:S0:2", [0, 32]),  # the first two hardware threads: both of core 0
        ("E:S1:3:1:2", [1, 5, 9]),
        ("L:N:0-3", [0, 4, 8, 12]),  # logical numbering, physical cores first, as N:0-3
        ("L:0-1", [0, 4]),  # domain N when none is named
        ("L:S1:8-9", [33, 37]),
        ("S:scatter", [0, 1, 2, 3, 4, 5, 6, 7] + [8, 9, 10, 11]),  # the first 12 of it: one core per socket in turn
    ],
)
def test_expressions(x7560, expression, expected):
    assert resolve(x7560, expression)[: len(expected)] == expected


def test_likwid_man_page_examples_on_a_machine_numbered_as_there():
    """likwid-pin's manual: a domain holding 0,4,1,5,2,6,3,7 (each core's two hardware threads
    together) sorts to 0,1,2,3,4,5,6,7 for logical numbering, so L:P:0-2 is 0,1,2; E:P:4:2:4 is
    0,4,2,6; and sockets S0 = 0,4,1,5 and S1 = 2,6,3,7 give S:scatter = 0,2,1,3,4,6,5,7."""
    one_socket = load_topology("synthetic:pack:1 core:4 pu:2(indexes=0,4,1,5,2,6,3,7)")
    assert resolve(one_socket, "L:S0:0-2") == [0, 1, 2]
    assert resolve(one_socket, "E:S0:4:2:4") == [0, 4, 2, 6]
    assert resolve(one_socket, "E:N:4:1:2") == [0, 1, 2, 3]  # "the first four physical CPUs"
    two_sockets = load_topology("synthetic:pack:2 [numa] core:2 pu:2(indexes=0,4,1,5,2,6,3,7)")
    assert resolve(two_sockets, "S:scatter") == [0, 2, 1, 3, 4, 6, 5, 7]
    assert resolve(two_sockets, "M:scatter") == [0, 2, 1, 3, 4, 6, 5, 7]  # a node per socket


def test_numa_domains_are_named_by_the_os_node_number():
    """M<i> is the node numactl, --mem, /sys and numa_maps call i, even where hwloc's logical
    order differs (KNL SNC4, POWER, machines with offline or sparse nodes)."""
    topo = load_topology("synthetic:pack:2 [numa(indexes=3,1)] core:2 pu:1")
    assert [n.os_index for n in topo.numa_nodes] == [3, 1]  # logical order: node 3 first
    assert resolve(topo, "M3:0-1") == [0, 1] and resolve(topo, "M1:0-1") == [2, 3]
    assert resolve(topo, "M1") == [2, 3]
    with pytest.raises(UsageError, match=r"there is no NUMA node 0 .* this machine's nodes: 1,3"):
        resolve(topo, "M0")


def test_whole_domain_is_one_pu_per_core_unless_smt(x7560):
    assert resolve(x7560, "S0") == list(range(0, 32, 4))
    assert resolve(x7560, "S0", smt=True) == list(range(0, 32, 4)) + list(range(32, 64, 4))


def test_die_and_group_domains():
    epyc = load_topology("epyc-7763-2s")
    assert resolve(epyc, "G1:0-1") == [16, 17]
    assert resolve(epyc, "M5:0") == [80]


@pytest.mark.parametrize("preset", ["epyc-7763-2s", "nehalem-ep", "x7560-4x8"])
def test_without_die_objects_each_package_is_one_die_as_likwid_counts(preset):
    topo = load_topology(preset)
    assert not topo.objects("Die") and len(topo.objects("Package")) > 1
    assert resolve(topo, "D1:0-1") == resolve(topo, "S1:0-1")
    assert resolve(topo, "D1") == resolve(topo, "S1")
    assert resolve(topo, "D:scatter") == resolve(topo, "S:scatter")
    with pytest.raises(UsageError, match=f"domain D9 does not exist: this topology has {len(topo.objects('Package'))}"):
        resolve(topo, "D9")


HETEROMEM = Path(__file__).parent / "data" / "64intel64-heteromem.xml"


@pytest.mark.parametrize(
    "source, first",
    [
        # hwloc's test machine: one package in four quadrants, each with a DDR and an MCDRAM node over its 4 cores x 4 PUs
        (str(HETEROMEM), [0, 4, 8, 12, 1, 5, 9, 13]),
        ("synthetic:pack:2 [numa] [numa] core:4 pu:2", [0, 8, 2, 10, 4, 12, 6, 14]),  # DDR and HBM nodes of each package
    ],
)
def test_m_scatter_deals_each_cpu_once_where_numa_nodes_share_their_cpus(source, first):
    topo = load_topology(source)
    assert len(topo.numa_nodes) == 2 * len({n.cpus for n in topo.numa_nodes})  # every node shares its CPUs with another
    dealt = resolve(topo, "M:scatter")
    assert sorted(dealt) == sorted(topo.allowed_cpus) and dealt[: len(first)] == first
    assert make_placement(topo, cpus="M:scatter", threads=len(first)).cpus == first


def test_m_numbers_are_the_os_node_numbers_on_the_quadrant_machine():
    """The README's example: hwloc's logical node 1 (likwid's M1) is OS node 7, quadrant 0's MCDRAM."""
    topo = load_topology(str(HETEROMEM))
    assert [n.os_index for n in topo.numa_nodes][:2] == [0, 7]
    assert resolve(topo, "M7:0-3") == resolve(topo, "M0:0-3") == [0, 1, 2, 3]
    assert resolve(topo, "M1:0-3") == [4, 5, 6, 7]


def test_domain_lists_skip_cpus_that_are_not_allowed(x7560):
    narrowed = with_allowed(x7560, [1, 9, 13, 33])
    assert resolve(narrowed, "S1:0-2") == [1, 9, 13]
    with pytest.raises(UsageError, match="index 4 is out of range, S1 has 4 allowed CPUs"):
        resolve(narrowed, "S1:4")
    with pytest.raises(UsageError, match="CPU 5 is not allowed"):
        resolve(narrowed, "5")
    for expression in ("S0", "S0:0", "E:S0:1", "M2:0-1"):
        with pytest.raises(UsageError, match=r"domain (S0|M2) has no CPU this process may use \(allowed CPUs: 1,9,13,33\)"):
            resolve(narrowed, expression)


@pytest.mark.parametrize(
    "expression, message",
    [
        ("X0:1", "unknown domain 'X0'"),
        ("S9:0", "domain S9 does not exist: this topology has 4"),
        ("S0:0-99", "out of range"),
        ("S0:a", "malformed index list"),
        ("E:S0", "malformed expression"),
        ("E:S0:0", "must be at least 1"),
        ("E:S0:99", "needs more CPUs than S0 has"),
        ("X:scatter", "scatter works over S, M, D or C domains"),
        ("L:S0", "use L:INDEXES or L:DOMAIN:INDEXES"),
        ("M7:0", "there is no NUMA node 7"),
        ("L9_0", "no level-9 cache"),
        ("64", "CPU 64 does not exist"),
        ("1-", "malformed CPU list"),
        ("", "empty CPU list"),
    ],
)
def test_bad_expressions(x7560, expression, message):
    with pytest.raises(UsageError, match=message):
        resolve(x7560, expression)


def test_explicit_placement_thread_count_and_duplicates(x7560):
    assert make_placement(x7560, cpus="S0:0-3", threads=2).cpus == [0, 4]
    assert make_placement(x7560, cpus="0,4", threads=5, oversubscribe=True).cpus == [0, 4, 0, 4, 0]
    with pytest.raises(UsageError, match="selects only 2 CPUs"):
        make_placement(x7560, cpus="0,4", threads=3)
    with pytest.raises(UsageError, match="CPU 0 is selected twice"):
        make_placement(x7560, cpus="0,0")
    assert make_placement(x7560, cpus="0,0", oversubscribe=True).cpus == [0, 0]
    with pytest.raises(UsageError, match="not both"):
        make_placement(x7560, strategy="compact", cpus="0")
