"""Topology discovery on the machine the tests run on, checked against what the kernel says in /sys."""

import json
import os
from pathlib import Path

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, this_cpus

SYS_CPU = Path("/sys/devices/system/cpu")


def sys_list(path: Path) -> set[int]:
    return set(parse_cpulist(path.read_text()))


@pytest.fixture(scope="module")
def this():
    return load_topology("this")


def test_pus_are_the_online_cpus_and_allowed_is_the_affinity_mask(this):
    assert set(this.pu_by_os) == sys_list(SYS_CPU / "online")
    assert this.allowed_cpus == set(os.sched_getaffinity(0))
    for pu in this.pus:
        assert pu.allowed == (pu.os_index in os.sched_getaffinity(0))


def test_cores_and_packages_match_the_kernel(this):
    for pu in this.pus:
        topo_dir = SYS_CPU / f"cpu{pu.os_index}" / "topology"
        assert this.core_of(pu).cpus == sys_list(topo_dir / "thread_siblings_list")
        package = pu.ancestor("Package")
        assert package is not None
        assert package.cpus == sys_list(topo_dir / "core_siblings_list") or package.cpus == sys_list(topo_dir / "package_cpus_list")


def test_data_caches_are_shared_by_the_cpus_the_kernel_says(this):
    checked = 0
    for pu in this.pus:
        for index in sorted((SYS_CPU / f"cpu{pu.os_index}" / "cache").glob("index*")):
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((index / "level").read_text())
            cache = next(o for o in _ancestors(pu) if o.is_data_cache and o.cache_level == level)
            assert cache.cpus == sys_list(index / "shared_cpu_list") & set(this.pu_by_os)
            assert cache.attributes["cache_size"] > 0
            checked += 1
    assert checked > 0 or not any((SYS_CPU / "cpu0" / "cache").glob("index*"))


def test_numa_nodes_match_the_kernel(this):
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert len(this.numa_nodes) == len(nodes)
    for node_dir in nodes:
        os_index = int(node_dir.name[4:])
        assert this.node_by_os[os_index].cpus == sys_list(node_dir / "cpulist")
    if this.distances is not None:
        for a in this.distances.nodes:
            row = [int(v) for v in Path(f"/sys/devices/system/node/node{a}/distance").read_text().split()]
            assert [this.distances.between(a, b) for b in this.distances.nodes] == row


def _ancestors(obj):
    while obj is not None:
        yield obj
        obj = obj.parent


def test_a_narrower_affinity_mask_marks_the_other_cpus_unavailable():
    cpus = this_cpus()
    first = cpus[0]
    result = run_pinlab("topology", "-f", "json", prefix=["taskset", "-c", str(first)])
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["allowed_cpus"] == str(first)
    assert data["summary"]["allowed_pus"] == 1
    pus = list(_json_objects(data["root"], "PU"))
    assert {p["os_index"] for p in pus if p["allowed"]} == {first}
    assert len(pus) == len(load_topology("this").pus)
    if len(cpus) > 1:
        tree = run_pinlab("topology", prefix=["taskset", "-c", str(first)]).stdout
        assert "[unavailable]" in tree
        placed = run_pinlab("place", "-s", "compact", "-n", "2", prefix=["taskset", "-c", str(first)])
        assert placed.returncode == 2
        assert "only 1 cores are available" in placed.stderr and f"allowed CPUs: {first}" in placed.stderr
        assert run_pinlab("place", "-c", str(cpus[1]), prefix=["taskset", "-c", str(first)]).returncode == 2


def _json_objects(node, kind):
    if node["kind"] == kind:
        yield node
    for child in node.get("children", []):
        yield from _json_objects(child, kind)


def test_hwloc_environment_variables_do_not_replace_this_machine(tmp_path):
    env = dict(os.environ, HWLOC_SYNTHETIC="pack:7 pu:1", HWLOC_XMLFILE=str(tmp_path / "nothing.xml"))
    result = run_pinlab("topology", "-f", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["pus"] == len(load_topology("this").pus)
