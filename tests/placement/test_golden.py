"""Placements on the bundled machines, checked against what the source papers and the tools do."""

import pytest

from pinlab.placement import make_placement
from pinlab.topology import load_topology


def cpus(preset, strategy, n, **kw):
    return make_placement(load_topology(preset), strategy=strategy, threads=n, **kw).cpus


def test_clovertown_scatter_4_touches_both_sockets_and_four_l2():
    topo = load_topology("clovertown")
    placed = cpus("clovertown", "scatter", 4)
    assert placed == [0, 4, 1, 5]
    assert {topo.pu(c).ancestor("Package").logical_index for c in placed} == {0, 1}
    assert len({topo.pu(c).ancestor("L2").logical_index for c in placed}) == 4


def test_clovertown_compact_fills_an_l2_pair_then_the_socket():
    assert cpus("clovertown", "compact", 2) == [0, 2]  # one shared L2
    assert cpus("clovertown", "compact", 4) == [0, 2, 4, 6]  # socket 0
    assert cpus("clovertown", "compact", 8) == [0, 2, 4, 6, 1, 3, 5, 7]


def test_clovertown_inter_and_intra_socket():
    assert cpus("clovertown", "inter-socket", 4) == [0, 1, 4, 5]
    assert cpus("clovertown", "intra-socket", 4) == [0, 2, 4, 6]
    with pytest.raises(Exception, match="in any one package"):
        cpus("clovertown", "intra-socket", 5)


def test_x7560_intra_and_inter_socket_are_the_nas_study_pinnings():
    # [ribeiro2012], section 4.1: --physcpubind=0,4,8,12 (intra) and 0,1,2,3 (inter) on the Intel NUMA machine
    assert cpus("x7560-4x8", "intra-socket", 4) == [0, 4, 8, 12]
    assert cpus("x7560-4x8", "inter-socket", 4) == [0, 1, 2, 3]


def test_smt_fills_hardware_threads_only_when_asked():
    assert cpus("x7560-4x8", "compact", 2) == [0, 4]
    assert cpus("x7560-4x8", "compact", 2, smt=True) == [0, 32]
    topo = load_topology("x7560-4x8")
    spread = cpus("x7560-4x8", "scatter", 32, smt=True)  # every core once before any sibling
    assert len({id(topo.core_of(topo.pu(c))) for c in spread}) == 32
    assert len(cpus("x7560-4x8", "compact", 64, smt=True)) == 64
    with pytest.raises(Exception, match="only 32 cores"):
        cpus("x7560-4x8", "compact", 33)


def test_epyc_scatter_takes_one_core_per_numa_node_then_per_l3():
    topo = load_topology("epyc-7763-2s")
    eight = cpus("epyc-7763-2s", "scatter", 8)
    assert sorted({n for c in eight for n in topo.pu(c).nodes}) == list(range(8))
    sixteen = cpus("epyc-7763-2s", "scatter", 16)
    assert len({topo.pu(c).ancestor("L3").logical_index for c in sixteen}) == 16
    assert cpus("epyc-7763-2s", "compact", 8) == list(range(8))  # one CCD


def test_dunnington_scatter_and_compact():
    topo = load_topology("dunnington-96")
    four = cpus("dunnington-96", "scatter", 4)
    assert len({n for c in four for n in topo.pu(c).nodes}) == 4
    six = cpus("dunnington-96", "compact", 6)
    assert len({topo.pu(c).ancestor("Package").logical_index for c in six}) == 1


def test_hybrid_compact_uses_p_cores_first():
    assert cpus("alderlake-i9", "compact", 9) == [0, 2, 4, 6, 8, 10, 12, 14, 16]
    assert cpus("alderlake-i9", "compact", 16, smt=True) == list(range(16))


def test_nehalem_scatter_two_threads_one_per_socket():
    assert cpus("nehalem-ep", "scatter", 2) == [0, 4]


def test_random_default_seed_is_recorded_and_reproduces():
    topo = load_topology("dunnington-96")
    first = make_placement(topo, strategy="random", threads=12)
    assert first.seed is not None
    assert make_placement(topo, strategy="random", threads=12, seed=first.seed).cpus == first.cpus
