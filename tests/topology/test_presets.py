"""The bundled machines: each loads, hwloc accepts it, and it says what the source papers say."""

import shutil
import subprocess
from importlib import resources

import pytest

from pinlab.cpuset import format_cpulist
from pinlab.topology import load_topology, preset_names

PRESETS = preset_names()


def test_the_presets_the_issue_asks_for_are_bundled():
    required = {"clovertown", "nehalem-ep", "dunnington-96", "opteron-4x4", "x7560-4x8"}
    assert required <= set(PRESETS)
    assert len(PRESETS) >= len(required) + 2


@pytest.mark.parametrize("name", PRESETS)
def test_hwloc_itself_accepts_every_preset(name):
    if not shutil.which("lstopo-no-graphics"):
        pytest.skip("hwloc's lstopo-no-graphics is not installed")
    path = resources.files("pinlab.topology") / "presets" / f"{name}.xml"
    out = subprocess.run(["lstopo-no-graphics", "-i", str(path), "--of", "console"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    topo = load_topology(name)
    assert out.stdout.count("PU L#") == len(topo.pus)


def packages_as_lists(topo):
    return [format_cpulist(p.cpus) for p in topo.packages]


def test_clovertown_numbering_is_the_one_linux_and_autopin_use():
    topo = load_topology("clovertown")
    assert [sorted(p.cpus) for p in topo.packages] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert [sorted(c.cpus) for c in topo.objects("L2")] == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert len(topo.numa_nodes) == 1 and topo.distances is None


def test_nehalem_ep_has_one_numa_node_and_one_l3_per_socket():
    topo = load_topology("nehalem-ep")
    assert topo.summary()["cores"] == 8
    assert [n.cpus for n in topo.numa_nodes] == [p.cpus for p in topo.packages] == [c.cpus for c in topo.objects("L3")]
    assert topo.distances.matrix == [[10, 21], [21, 10]]


def test_dunnington_96_is_4_nodes_of_4_sockets_of_6_cores_with_paired_l2():
    topo = load_topology("dunnington-96")
    s = topo.summary()
    assert (s["numa_nodes"], s["packages"], s["cores"], s["pus"]) == (4, 16, 96, 96)
    assert all(len(c.cpus) == 2 for c in topo.objects("L2"))
    assert all(len(c.cpus) == 6 for c in topo.objects("L3"))
    assert all(len(n.cpus) == 24 for n in topo.numa_nodes)


def test_opteron_4x4_numa_per_socket_with_hop_distances():
    topo = load_topology("opteron-4x4")
    assert [n.cpus for n in topo.numa_nodes] == [p.cpus for p in topo.packages]
    assert topo.distances.between(0, 3) > topo.distances.between(0, 1) > topo.distances.between(0, 0)


def test_x7560_numbering_matches_the_nas_study():
    # Seed 001 pins intra-socket with CPUs 0,4,8,12 and inter-socket with 0,1,2,3 on this machine.
    topo = load_topology("x7560-4x8")
    assert topo.summary()["pus"] == 64
    assert {0, 4, 8, 12} <= topo.packages[0].cpus
    assert [topo.pu(c).ancestor("Package").logical_index for c in (0, 1, 2, 3)] == [0, 1, 2, 3]
    assert topo.core_of(topo.pu(0)).cpus == {0, 32}


def test_modern_server_has_several_l3_domains_and_numa_nodes_per_socket():
    topo = load_topology("epyc-7763-2s")
    s = topo.summary()
    assert (s["packages"], s["numa_nodes"], s["cores"], s["pus"]) == (2, 8, 128, 256)
    assert len(topo.objects("L3")) == 16
    for package in topo.packages:
        assert len([n for n in topo.numa_nodes if n.cpus <= package.cpus]) == 4
        assert len([c for c in topo.objects("L3") if c.cpus <= package.cpus]) == 8
    assert topo.distances.between(0, 1) < topo.distances.between(0, 4)


def test_hybrid_desktop_has_two_cpu_kinds():
    topo = load_topology("alderlake-i9")
    kinds = sorted(topo.cpu_kinds, key=lambda k: k.efficiency)
    assert [k.name for k in kinds] == ["IntelAtom", "IntelCore"]
    assert kinds[1].cpus == set(range(16)) and kinds[0].cpus == set(range(16, 24))
    assert topo.summary()["cores"] == 16
    # E-cores come in clusters of four sharing an L2; P-cores have their own.
    assert sorted(len(c.cpus) for c in topo.objects("L2")) == [2] * 8 + [4, 4]
