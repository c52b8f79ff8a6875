"""The cost model: distances by the deepest shared level, scaled by NUMA distances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pinlab.placement.cost import SCALE, cpu_distance, distance_table, placement_cost
from pinlab.topology.sources import load_preset, load_topology


def test_distance_ordering_on_a_synthetic_machine():
    topo = load_topology("synthetic:pack:2 l3:2 l2:2 core:2 pu:2")
    pus = {pu.os_index: pu for pu in topo.pus}

    def where(cpu):
        pu = pus[cpu]
        return (pu.ancestor("Package"), pu.ancestor("L3"), pu.ancestor("L2"), topo.core_of(pu))

    seen = {}
    for a, b in itertools.combinations_with_replacement(sorted(pus), 2):
        pa, l3a, l2a, ca = where(a)
        pb, l3b, l2b, cb = where(b)
        level = "pu" if a == b else "core" if ca is cb else "l2" if l2a is l2b else "l3" if l3a is l3b else "package" if pa is pb else "machine"
        assert cpu_distance(topo, a, b) == SCALE[level], (a, b, level)
        assert cpu_distance(topo, a, b) == cpu_distance(topo, b, a)
        seen[level] = True
    assert set(seen) == {"pu", "core", "l2", "l3", "package", "machine"}
    assert SCALE["pu"] < SCALE["core"] < SCALE["l2"] < SCALE["l3"] < SCALE["numa"] < SCALE["package"] < SCALE["machine"]


def test_numa_distances_scale_remote_pairs():
    topo = load_preset("opteron-4x4")  # 4 nodes, SLIT 10 / 16 / 22
    assert topo.distances is not None
    node_of = {pu.os_index: min(pu.nodes) for pu in topo.pus}
    d = topo.distances
    for a, b in itertools.combinations(sorted(node_of), 2):
        na, nb = node_of[a], node_of[b]
        if na != nb:
            ratio = d.between(na, nb) / d.between(na, na)
            assert cpu_distance(topo, a, b) == pytest.approx(SCALE["machine"] * ratio)
    far = max(d.between(a, b) for a in d.nodes for b in d.nodes)
    near = min(d.between(a, b) for a in d.nodes for b in d.nodes if a != b)
    assert far > near  # the preset has two hop counts, so two remote distances
    values = {round(cpu_distance(topo, a, b), 6) for a in node_of for b in node_of if node_of[a] != node_of[b]}
    assert len(values) >= 2


def test_sub_numa_nodes_sit_between_l3_and_package():
    topo = load_preset("epyc-7763-2s")  # NPS4: 4 nodes per package, 2 L3 per node
    table = distance_table(topo)
    pus = topo.pus
    by = {}
    for a in pus[:64]:
        for b in pus[:64]:
            same_l3 = a.ancestor("L3") is b.ancestor("L3")
            same_node = a.nodes == b.nodes
            if not same_l3 and a is not b and topo.core_of(a) is not topo.core_of(b):
                by.setdefault(same_node, set()).add(table.distance(a.os_index, b.os_index))
    assert max(by[True]) < min(by[False])


def test_placement_cost_is_the_weighted_sum():
    topo = load_topology("synthetic:pack:2 core:2 pu:1")
    cpus = [pu.os_index for pu in topo.pus]
    w = np.array([[0, 3, 1, 0], [3, 0, 0, 0], [1, 0, 0, 2], [0, 0, 2, 0]], dtype=float)
    expected = sum(w[i, j] * cpu_distance(topo, cpus[i], cpus[j]) for i in range(4) for j in range(i + 1, 4))
    assert placement_cost(topo, w, cpus) == pytest.approx(expected)
    # Moving the heavy pair apart costs more.
    assert placement_cost(topo, w, [cpus[0], cpus[2], cpus[1], cpus[3]]) > expected


def test_table_is_cached_and_covers_1024_cpus():
    topo = load_topology("synthetic:pack:8 l3:8 core:16 pu:1")
    table = distance_table(topo)
    assert table is distance_table(topo)
    assert table.matrix.shape == (1024, 1024)
    assert np.allclose(table.matrix, table.matrix.T)
    assert (np.diag(table.matrix) == 0).all()


def _enclosing_chain(topo, cpu):
    """The objects above ``cpu``'s PU, innermost first, one per distinct CPU set (L1d, L2 and core
    of one core are one step): the levels an independent cost counts to the lowest common ancestor."""
    chain, obj = [], topo.pu(cpu)
    while obj is not None:
        if not chain or obj.cpus != chain[-1].cpus:
            chain.append(obj)
        obj = obj.parent
    return chain


@pytest.mark.parametrize(
    "source",
    [
        "epyc-7763-2s",
        "nehalem-ep",
        "x7560-4x8",
        "dunnington-96",
        "opteron-4x4",
        "clovertown",
        "alderlake-i9",
        # Groups and dies above the L3, inside a node or holding it; a group that is the only cache-less cluster.
        "synthetic:pack:2 [numa] group:2 l3:2 core:4 pu:1",
        "synthetic:pack:2 group:2 [numa] l3:2 core:4 pu:1",
        "synthetic:pack:2 [numa] die:2 l3:2 core:2 pu:2",
        "synthetic:pack:2 [numa] group:2 core:4 pu:1",
    ],
)
def test_a_pair_whose_common_ancestor_is_lower_in_the_tree_is_strictly_closer(source):
    """From the first CPU of every package: every CPU under a smaller common ancestor is closer than
    every CPU under a larger one, so the cost's optimum is the optimum of weight x tree levels."""
    topo = load_preset(source) if ":" not in source else load_topology(source)
    table = distance_table(topo)
    for package in topo.packages:
        a = min(package.cpus)
        chain = _enclosing_chain(topo, a)
        by_level: dict[int, list[float]] = {}
        for b in topo.pu_by_os:
            if b != a:
                level = next(i for i, obj in enumerate(chain) if b in obj.cpus)
                by_level.setdefault(level, []).append(table.distance(a, b))
        levels = sorted(by_level)
        for inner, outer in zip(levels, levels[1:]):
            assert max(by_level[inner]) < min(by_level[outer]), (a, chain[inner].kind, chain[outer].kind)


def test_two_ccds_of_one_epyc_quadrant_are_further_apart_than_one_ccd():
    topo = load_preset("epyc-7763-2s")  # CPUs 0-7 share an L3 (a CCD), 8-15 the next one, same NUMA node
    assert topo.pu(0).ancestor("L3") is not topo.pu(8).ancestor("L3") and topo.pu(0).nodes == topo.pu(8).nodes
    assert cpu_distance(topo, 0, 1) < cpu_distance(topo, 0, 8) < cpu_distance(topo, 0, 16)
    # Two heavy pairs on CPUs 0, 1, 8, 9: every placement the cost calls optimal keeps each pair in a CCD.
    w = np.zeros((4, 4))
    w[0, 1] = w[1, 0] = w[2, 3] = w[3, 2] = 10
    costs = {p: placement_cost(topo, w, p) for p in itertools.permutations([0, 1, 8, 9])}
    best = min(costs.values())
    for placement, cost in costs.items():
        if cost == best:
            assert {placement[0], placement[1]} in ({0, 1}, {8, 9}), placement
