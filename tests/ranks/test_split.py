"""A node split among local ranks, on the presets and on machines with restricted CPUs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinlab.errors import UsageError
from pinlab.ranks.split import split_node
from pinlab.topology import load_topology
from pinlab.topology.sources import preset_names
from tests.conftest import run_pinlab, with_allowed


def test_four_ranks_on_dunnington_get_one_numa_node_each():
    topo = load_topology("dunnington-96")
    split = split_node(topo, 4)
    assert len(topo.numa_nodes) == 4
    for domain, node in zip(split.domains, topo.numa_nodes):
        assert domain.cpus == node.cpus and domain.nodes == {node.os_index} and domain.how == f"NUMA node {node.os_index}"


def test_two_ranks_on_x7560_get_two_sockets_each():
    topo = load_topology("x7560-4x8")
    packages = topo.packages
    split = split_node(topo, 2)
    assert [d.cpus for d in split.domains] == [packages[0].cpus | packages[1].cpus, packages[2].cpus | packages[3].cpus]
    assert [d.how for d in split.domains] == ["packages 0-1", "packages 2-3"]


def test_more_ranks_than_numa_nodes_split_each_node_by_its_caches_then_cores():
    topo = load_topology("epyc-7763-2s")  # 2 packages x 4 NUMA nodes x 2 L3 of 8 cores, SMT 2
    split = split_node(topo, 16)
    l3s = topo.objects("L3")
    assert [d.cpus for d in split.domains] == [l3.cpus for l3 in l3s]
    split = split_node(topo, 32)
    for i, d in enumerate(split.domains):
        assert d.cpus <= l3s[i // 2].cpus and len({id(topo.core_of(topo.pu(c))) for c in d.cpus}) == 4, d


def test_counts_that_fit_no_level_get_contiguous_blocks_of_whole_cores_first_ranks_larger():
    topo = load_topology("x7560-4x8")  # 32 cores
    split = split_node(topo, 3)
    cores = [len({id(topo.core_of(topo.pu(c))) for c in d.cpus}) for d in split.domains]
    assert cores == [11, 11, 10]
    order = [topo.core_of(pu) for pu in topo.pus]
    first_core_of = [min(order.index(topo.core_of(topo.pu(c))) for c in d.cpus) for d in split.domains]
    assert first_core_of == sorted(first_core_of)  # in logical order


def test_more_ranks_than_cores_share_cores_by_hardware_thread():
    topo = load_topology("x7560-4x8")  # 32 cores, SMT 2
    assert len(topo.pus) == 2 * len(topo.cores)
    split = split_node(topo, len(topo.cores) + 1)
    sizes = [len(d.cpus) for d in split.domains]
    assert sum(sizes) == len(topo.pus) and max(sizes) - min(sizes) <= 1
    assert any(d.how.startswith("2 hardware threads") or d.how.startswith("1 core") for d in split.domains), [d.how for d in split.domains]


def test_more_ranks_than_cpus_is_refused():
    topo = load_topology("clovertown")
    with pytest.raises(UsageError, match=f"{len(topo.pus) + 1} local ranks but only {len(topo.pus)} allowed CPUs"):
        split_node(topo, len(topo.pus) + 1)


def test_only_allowed_cpus_are_split_and_evenly():
    topo = with_allowed(load_topology("dunnington-96"), range(12, 72))  # half of node 0, nodes 1-2
    split = split_node(topo, 3)
    # whole nodes would give 12, 24 and 24 cores: even blocks of 20 instead
    assert [d.cpus for d in split.domains] == [frozenset(range(12, 32)), frozenset(range(32, 52)), frozenset(range(52, 72))]
    split = split_node(with_allowed(load_topology("dunnington-96"), range(24, 72)), 2)  # nodes 1-2 whole: one each
    assert [d.how for d in split.domains] == ["NUMA node 1", "NUMA node 2"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(preset_names()), st.integers(1, 80))
def test_every_split_is_disjoint_covers_the_allowed_cpus_and_keeps_cores_whole(name, ranks):
    topo = load_topology(name)
    ranks = min(ranks, len(topo.allowed_cpus))
    split = split_node(topo, ranks)
    assert len(split.domains) == ranks and all(d.cpus for d in split.domains)
    seen: set[int] = set()
    for d in split.domains:
        assert not seen & d.cpus
        seen |= d.cpus
        assert d.nodes == frozenset(n for c in d.cpus for n in topo.pu(c).nodes)
    assert seen == topo.allowed_cpus
    if ranks <= len(topo.cores):
        for d in split.domains:
            for c in d.cpus:
                assert topo.core_of(topo.pu(c)).cpus <= d.cpus


def test_place_ranks_prints_the_table_and_json(tmp_path):
    result = run_pinlab("place", "--ranks", "4", "-t", "dunnington-96")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "dunnington-96: 4 local ranks"
    assert lines[2].split() == ["0", "0-23", "24", "NUMA", "node", "0", "0"]
    result = run_pinlab("place", "--ranks", "2", "-t", "x7560-4x8", "-s", "compact", "-n", "3", "-f", "json")
    import json

    data = json.loads(result.stdout)
    topo = load_topology("x7560-4x8")
    for d in data["domains"]:
        domain = split_node(topo, 2).domains[d["rank"]]
        assert d["placement"]["threads"] == 3 and set(d["placement"]["cpus"]) <= domain.cpus


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ranks", "97", "-t", "dunnington-96"], "97 local ranks but only 96 allowed CPUs on dunnington-96"),
        (["--ranks", "0", "-t", "dunnington-96"], "the number of ranks must be at least 1"),
        (["--gpus", "-t", "dunnington-96"], "give the number of ranks with --ranks R"),
        (["--ranks", "2", "-t", "dunnington-96", "-f", "omp"], "--ranks prints a table (-f list) or JSON (-f json)"),
        (["--ranks", "4", "-t", "dunnington-96", "-s", "compact", "-n", "25"], "rank 0 of 4 (CPUs 0-23, NUMA node 0):"),
        (
            ["--ranks", "2", "--rank", "0/2", "-t", "dunnington-96"],
            "--ranks 2 previews the split among all the ranks and --rank 0/2 places one rank: give one of them",
        ),
    ],
)
def test_place_ranks_refuses_bad_input_in_one_line(args, message):
    result = run_pinlab("place", *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_numa_nodes_that_share_their_cpus_count_once():
    """A DDR node and an HBM node over the same cores (flat-mode HBM): one part, not two."""
    topo = load_topology("synthetic:pack:2 [numa] [numa] core:4 pu:2")
    split = split_node(topo, 4)
    assert [sorted(d.cpus) for d in split.domains] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]


def test_objects_left_unequal_by_the_allowed_set_give_way_to_even_blocks_of_cores():
    topo = load_topology("synthetic:pack:2 [numa] core:4 pu:2")  # PUs 0-7 on node 0, 8-15 on node 1
    split = split_node(with_allowed(topo, [0, 2, 4, 6, 8]), 2)  # 4 cores of node 0, 1 of node 1
    assert [sorted(d.cpus) for d in split.domains] == [[0, 2, 4], [6, 8]]
    split = split_node(with_allowed(topo, [0, 1, 2, 3, 4, 5, 8, 9]), 4)  # 3 cores and 1
    assert [len({topo.core_of(topo.pu(c)).logical_index for c in d.cpus}) for d in split.domains] == [1, 1, 1, 1]
