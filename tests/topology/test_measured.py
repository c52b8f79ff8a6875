"""The measured grouping: a CPU latency matrix stored in hwloc XML becomes Group objects the strategies follow."""

from __future__ import annotations

import itertools
import random

import pytest

from pinlab.errors import UsageError
from pinlab.placement.strategies import compact, scatter
from pinlab.topology import load_topology
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.measured import LEVEL_JUMP, latency_levels, measured_latency
from pinlab.topology.model import CpuLatency
from pinlab.topology.sources import _synthetic_xml
from pinlab.topology.user_distances import cpu_latency_element, with_measurements
from tests.conftest import run_pinlab


def matrix_from(cpus, distance, noise=0.0, seed=1):
    """A symmetric matrix of ``distance(a, b)`` with multiplicative noise of +-``noise``."""
    rng = random.Random(seed)
    m = [[0.0] * len(cpus) for _ in cpus]
    for i, j in itertools.combinations(range(len(cpus)), 2):
        m[i][j] = m[j][i] = distance(cpus[i], cpus[j]) * rng.uniform(1 - noise, 1 + noise)
    return CpuLatency(cpus=list(cpus), matrix=m)


def measured_topology(description, latency, source="test"):
    xml = with_measurements(_synthetic_xml(description), cpu_latency_element(latency))
    return parse_xml(xml, source=source)


def groups_of(topo):
    return sorted(sorted(o.cpus) for o in topo.root.walk() if o.type == "Group")


# Two clusters of 4 that interleave the OS numbering (0,2,4,6 | 1,3,5,7): the flat tree order
# (0,1,2,...) would mix them, so following the tree as loaded proves the groups are used.
def two_clusters(a, b):
    return 40.0 if a % 2 == b % 2 else 120.0


@pytest.mark.parametrize("noise", [0.0, 0.1])
def test_a_flat_machine_gets_the_clusters_the_matrix_shows(noise):
    topo = measured_topology("core:8 pu:1", matrix_from(range(8), two_clusters, noise))
    assert groups_of(topo) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert any("measured grouping: added" in note for note in topo.measured_notes)
    clusters = [{0, 2, 4, 6}, {1, 3, 5, 7}]
    # compact with 4 threads stays in one cluster
    assert set(compact(topo, 4)) in clusters
    # scatter with 2 threads takes one CPU per cluster
    first, second = scatter(topo, 2)
    assert {first % 2, second % 2} == {0, 1}


def test_without_the_matrix_the_same_flat_machine_mixes_the_clusters():
    """The control: the flat tree alone puts compact's 4 threads on CPUs of both clusters."""
    flat = load_topology("synthetic:core:8 pu:1")
    assert {cpu % 2 for cpu in compact(flat, 4)} == {0, 1}
    assert {cpu % 2 for cpu in scatter(flat, 2)} == {0}


def test_nested_levels_give_nested_groups():
    """Pairs sharing an L2 (10 ns) inside quads sharing an L3 (40 ns), across sockets (150 ns)."""

    def distance(a, b):
        return 10.0 if a // 2 == b // 2 else 40.0 if a // 4 == b // 4 else 150.0

    topo = measured_topology("core:8 pu:1", matrix_from(range(8), distance, 0.05))
    assert groups_of(topo) == [[0, 1], [0, 1, 2, 3], [2, 3], [4, 5], [4, 5, 6, 7], [6, 7]]
    pair = next(o for o in topo.root.walk() if o.type == "Group" and o.cpus == {0, 1})
    assert pair.parent.type == "Group" and pair.parent.cpus == {0, 1, 2, 3}
    assert [len(level) for level in latency_levels(topo.cpu_latency)] == [4, 8, 16]


def test_a_matrix_that_matches_the_tree_adds_nothing():
    """Two packages of four cores, and latencies that say just that."""
    topo = measured_topology("pack:2 core:4 pu:1", matrix_from(range(8), lambda a, b: 30.0 if a // 4 == b // 4 else 110.0, 0.05))
    assert groups_of(topo) == []
    assert not any("added" in note for note in topo.measured_notes)
    assert topo.cpu_latency is not None


def test_noise_below_the_threshold_adds_nothing():
    """One level of latencies with noise: neighbouring values never jump by LEVEL_JUMP, so one level."""
    latency = matrix_from(range(8), lambda a, b: 50.0, noise=0.15, seed=7)
    assert len(latency_levels(latency)) == 1
    topo = measured_topology("core:8 pu:1", latency)
    assert groups_of(topo) == []


def test_a_jump_just_under_the_threshold_is_one_level_and_just_over_is_two():
    under = matrix_from(range(4), lambda a, b: 50.0 if a // 2 == b // 2 else 50.0 * LEVEL_JUMP * 0.98)
    over = matrix_from(range(4), lambda a, b: 50.0 if a // 2 == b // 2 else 50.0 * LEVEL_JUMP * 1.05)
    assert groups_of(measured_topology("core:4 pu:1", under)) == []
    assert groups_of(measured_topology("core:4 pu:1", over)) == [[0, 1], [2, 3]]


def test_a_group_cutting_through_the_tree_is_left_out_with_a_note():
    """Two packages {0-3}, {4-7}, but a matrix claiming {2,3,4,5} share something: contradicts the tree."""

    def distance(a, b):
        return 20.0 if a in (2, 3, 4, 5) and b in (2, 3, 4, 5) else 100.0

    topo = measured_topology("pack:2 core:4 pu:1", matrix_from(range(8), distance))
    assert groups_of(topo) == []
    assert any("cuts through" in note for note in topo.measured_notes)


def test_measured_latency_for_the_cost_model():
    latency = matrix_from(range(8), two_clusters)
    topo = measured_topology("core:8 pu:1", latency)
    assert measured_latency(topo, 0, 2) == pytest.approx(40.0, abs=0.001)
    assert measured_latency(topo, 1, 2) == pytest.approx(120.0, abs=0.001)
    assert measured_latency(topo, 3, 3) == 0.0
    assert measured_latency(load_topology("synthetic:core:8 pu:1"), 0, 1) is None


def test_a_partial_matrix_groups_only_the_cpus_it_measured():
    """Only CPUs 0-3 measured (the others not allowed when calibrating): groups among them, the rest untouched."""
    topo = measured_topology("core:8 pu:1", matrix_from(range(4), lambda a, b: 10.0 if a // 2 == b // 2 else 50.0))
    assert groups_of(topo) == [[0, 1], [2, 3]]
    assert measured_latency(topo, 0, 5) is None


def test_strategies_work_on_presets_with_a_matrix_from_their_own_tree():
    """A matrix derived from each preset's tree (latency by the depth of the shared object) adds no group."""
    from pinlab.topology import preset_names

    for name in preset_names():
        base = load_topology(name)
        cpus = sorted(base.pu_by_os)[:32]

        def distance(a, b, topo=base):
            pa, pb = topo.pu(a), topo.pu(b)
            common = pa
            while not pb.cpus <= common.cpus:
                common = common.parent
            return 10.0 * 2 ** (pa.depth - common.depth)

        topo = parse_xml(with_measurements(base.xml, cpu_latency_element(matrix_from(cpus, distance))), source=name)
        assert groups_of(topo) == groups_of(base), name
        assert compact(topo, 2) == compact(base, 2)


def test_topology_command_shows_the_matrix_and_the_grouping(tmp_path):
    xml = with_measurements(_synthetic_xml("core:8 pu:1"), cpu_latency_element(matrix_from(range(8), two_clusters)))
    path = tmp_path / "measured.xml"
    path.write_text(xml)
    proc = run_pinlab("topology", "-t", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "Measured CPU latency" in proc.stdout
    assert "measured grouping: added Group0 objects for CPUs 0,2,4,6 | 1,3,5,7" in proc.stdout
    assert proc.stdout.count("Group0 L#") == 2
    placed = run_pinlab("place", "-t", str(path), "-s", "compact", "-n", "4")
    assert placed.returncode == 0, placed.stderr
    assert {int(c) % 2 for c in placed.stdout.replace(",", " ").split()} in ({0}, {1})


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda x: x.replace('nbobjs="8" kind="6"', 'nbobjs="9" kind="6"'), "malformed measured CPU latency matrix"),
        (lambda x: x.replace('<indexes length="16">0 1', '<indexes length="16">0 x'), "malformed measured CPU latency matrix"),
        (lambda x: x.replace('<indexes length="16">0 1 2 3 4 5 6 7', '<indexes length="16">0 1 2 3 4 5 6 70'), "names PUs [70]"),
    ],
)
def test_a_damaged_matrix_is_refused_in_one_line(tmp_path, mangle, message):
    xml = with_measurements(_synthetic_xml("core:8 pu:1"), cpu_latency_element(matrix_from(range(8), two_clusters)))
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_xml(mangle(xml), source="damaged")
    path = tmp_path / "damaged.xml"
    path.write_text(mangle(xml))
    proc = run_pinlab("topology", "-t", str(path))
    assert proc.returncode == 2 and proc.stderr.startswith("pinlab: error:") and "Traceback" not in proc.stderr


def test_the_cost_model_and_graph_strategies_follow_the_measured_latencies():
    """On a flat machine, the measured matrix alone tells which CPUs are close: the cost model
    prices a pair inside a cluster below a pair across, and lpgp puts planted pairs inside clusters."""
    from pinlab.graph.model import graph_from_matrix
    from pinlab.placement import make_placement
    from pinlab.placement.cost import distance_table, placement_cost

    topo = measured_topology("core:8 pu:1", matrix_from(range(8), two_clusters, 0.05))
    table = distance_table(topo)
    assert table.distance(0, 2) < table.distance(0, 1) and table.distance(1, 3) < table.distance(2, 3)
    flat = load_topology("synthetic:core:8 pu:1")
    assert distance_table(flat).distance(0, 2) == distance_table(flat).distance(0, 1)  # the tree alone cannot tell
    w = [[0.0] * 8 for _ in range(8)]
    for a, b in ((0, 1), (2, 3), (4, 5), (6, 7)):
        w[a][b] = w[b][a] = 100.0
    graph = graph_from_matrix(w)
    placed = make_placement(topo, strategy="lpgp", threads=8, graph=graph).cpus
    for a, b in ((0, 1), (2, 3), (4, 5), (6, 7)):
        assert placed[a] % 2 == placed[b] % 2, placed  # each pair inside one measured cluster
    assert placement_cost(topo, graph, placed) < placement_cost(topo, graph, list(range(8)))
