"""Shapes real machines have and small test machines rarely do, each built here as hwloc XML.

- more than 10 NUMA nodes (4-socket EPYC in NPS4 mode: 16; 8-socket Xeon with sub-NUMA
  clustering: 16 to 32; hwloc then writes the distance matrix's indexes over several elements);
- several matrices between NUMA nodes (hwloc 2.3+ on machines with HMAT: latency and bandwidth);
- matrices indexed by hwloc's global persistent index rather than by OS index.

Machines are made by hwloc itself where it can (``lstopo -i`` synthetic, ``hwloc-annotate``
for distances), otherwise written by hand in hwloc's format.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pinlab.errors import UsageError
from pinlab.topology import load_topology
from pinlab.topology.render import render_tree, topology_to_json
from tests.conftest import run_pinlab

needs_hwloc = pytest.mark.skipif(
    not (shutil.which("lstopo-no-graphics") and shutil.which("hwloc-annotate")), reason="hwloc's tools are not installed (make install installs them)"
)


def two_level_distance(i: int, j: int, per_group: int) -> int:
    """10 within a node, 12 within its group (socket), 32 across: the SLIT of a multi-socket server."""
    return 10 if i == j else 12 if i // per_group == j // per_group else 32


def annotated_machine(tmp_path, synthetic: str, nodes: int, per_group: int, name: str = "NUMALatency", kind: int = 5) -> str:
    """hwloc's XML of ``synthetic`` with a distance matrix added by hwloc-annotate; returns the path."""
    plain, annotated = tmp_path / "plain.xml", tmp_path / f"{name}.xml"
    subprocess.run(["lstopo-no-graphics", "-i", synthetic, "--of", "xml", str(plain)], check=True)
    lines = [f"name={name}", str(kind), str(nodes), *(f"NUMANode:{i}" for i in range(nodes))]
    lines += [str(two_level_distance(i, j, per_group)) for i in range(nodes) for j in range(nodes)]
    (tmp_path / "distances.txt").write_text("\n".join(lines) + "\n")
    subprocess.run(["hwloc-annotate", str(plain), str(annotated), "--", "root", "--", "distances", str(tmp_path / "distances.txt")], check=True)
    return str(annotated)


@needs_hwloc
@pytest.mark.parametrize("sockets, per_socket", [(4, 4), (8, 3), (2, 6)], ids=["16 nodes", "24 nodes", "12 nodes"])
def test_more_than_ten_numa_nodes_with_their_distances(tmp_path, sockets, per_socket):
    nodes = sockets * per_socket
    path = annotated_machine(tmp_path, f"pack:{sockets} die:{per_socket} [numa] core:2 pu:1", nodes, per_socket)
    assert open(path).read().count("<indexes") > 1  # hwloc split the indexes: the case that failed
    topo = load_topology(path)
    assert len(topo.numa_nodes) == nodes
    assert topo.distances.nodes == list(range(nodes))
    for i in range(nodes):
        for j in range(nodes):
            assert topo.distances.between(i, j) == two_level_distance(i, j, per_socket)
    result = run_pinlab("topology", "-t", path)
    assert result.returncode == 0, result.stderr
    assert f"{nodes - 1:>4}" in result.stdout.splitlines()[-1]  # the matrix's last row, printed whole


def hand_written(nodes_os: list[int], matrices: str, numa_attrs=lambda os, gp: "") -> str:
    """A one-package machine with one core per NUMA node (node OS indexes as given, gp_index 100+i)."""
    objects = []
    for i, os_index in enumerate(nodes_os):
        objects.append(
            f'<object type="Core" os_index="{i}" cpuset="0x{1 << i:x}">'
            f'<object type="NUMANode" os_index="{os_index}" gp_index="{100 + i}" cpuset="0x{1 << i:x}" nodeset="0x{1 << os_index:x}" local_memory="1073741824"{numa_attrs(os_index, 100 + i)}/>'
            f'<object type="PU" os_index="{i}" cpuset="0x{1 << i:x}"/></object>'
        )
    full = (1 << len(nodes_os)) - 1
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n'
        f'<object type="Machine" os_index="0" cpuset="0x{full:x}" complete_cpuset="0x{full:x}" allowed_cpuset="0x{full:x}">'
        f'<object type="Package" os_index="0" cpuset="0x{full:x}">{"".join(objects)}</object></object>\n{matrices}</topology>\n'
    )


def split(numbers: list[int], sizes: list[int]) -> list[list[int]]:
    parts, at = [], 0
    for size in sizes:
        parts.append(numbers[at : at + size])
        at += size
    assert at == len(numbers)
    return parts


def matrix_xml(tag_attrs: str, indexes: list[int], values: list[int], index_parts: list[int], value_parts: list[int]) -> str:
    body = "".join(f'<indexes length="{len(" ".join(map(str, p)))}">{" ".join(map(str, p))} </indexes>' for p in split(indexes, index_parts))
    body += "".join(f'<u64values length="{len(" ".join(map(str, p)))}">{" ".join(map(str, p))} </u64values>' for p in split(values, value_parts))
    return f"<distances2 {tag_attrs}>{body}</distances2>\n"


def test_every_index_and_value_element_is_read_whatever_their_split(tmp_path):
    nodes = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]  # sparse OS numbers, as on machines with offline nodes
    n = len(nodes)
    latency = [10 if i == j else 20 + abs(i - j) for i in range(n) for j in range(n)]
    bandwidth = [100_000 if i == j else 50_000 - 1000 * abs(i - j) for i in range(n) for j in range(n)]
    matrices = matrix_xml(f'type="NUMANode" nbobjs="{n}" kind="9" name="NUMABandwidth" indexing="os"', nodes, bandwidth, [n], [n * n]) + matrix_xml(
        f'type="NUMANode" nbobjs="{n}" kind="5" name="NUMALatency" indexing="os"', nodes, latency, [5, 1, 6], [7, 60, 77]
    )
    path = tmp_path / "m.xml"
    path.write_text(hand_written(nodes, matrices))
    topo = load_topology(str(path))
    assert topo.distances.name == "NUMALatency" and topo.distances.meaning == "latency"
    assert topo.distances.nodes == nodes
    assert topo.distances.between(8, 13) == 20 + abs(nodes.index(8) - nodes.index(13))
    assert [m.name for m in topo.all_distances] == ["NUMALatency", "NUMABandwidth"]
    assert topo.all_distances[1].meaning == "bandwidth" and topo.all_distances[1].between(0, 1) == 49_000
    data = topology_to_json(topo)
    assert data["distances"]["matrix"][0][:2] == [10, 21]
    assert [m["meaning"] for m in data["distance_matrices"]] == ["latency", "bandwidth"]
    assert "NUMA distances (NUMABandwidth, bandwidth, by node OS index):" in render_tree(topo)


def test_unnamed_matrices_of_early_hwloc_2_and_gp_indexing(tmp_path):
    """hwloc 2.0/2.1 wrote no name; some exports index by gp_index: both end up by OS index."""
    nodes = [3, 7]
    values = [10, 31, 31, 10]
    matrices = matrix_xml('type="NUMANode" nbobjs="2" kind="5" indexing="gp"', [100, 101], values, [2], [4])
    path = tmp_path / "m.xml"
    path.write_text(hand_written(nodes, matrices))
    topo = load_topology(str(path))
    assert topo.distances.name == "NUMALatency" and topo.distances.nodes == [3, 7] and topo.distances.between(7, 3) == 31


@pytest.mark.parametrize("index_parts, value_parts", [([3], [16]), ([4], [15])], ids=["an index missing", "a value missing"])
def test_a_matrix_that_does_not_add_up_is_refused_in_one_line(tmp_path, index_parts, value_parts):
    nodes = [0, 1, 2, 3]
    indexes = nodes[: sum(index_parts)]
    values = list(range(sum(value_parts)))
    matrices = matrix_xml('type="NUMANode" nbobjs="4" kind="5" name="NUMALatency" indexing="os"', indexes, values, index_parts, value_parts)
    path = tmp_path / "m.xml"
    path.write_text(hand_written(nodes, matrices))
    with pytest.raises(UsageError, match=r"malformed NUMA distance matrix 'NUMALatency' \(4 nodes announced"):
        load_topology(str(path))


@pytest.mark.parametrize("description", ["pack:2 core:4 l1d:2 pu:1", "pack:1 l3:2 core:3 l1d:1 pu:1", "pack:2 l2:2 core:2 l1i:2 pu:1"])
def test_cores_whose_pus_sit_below_a_cache_are_cores_with_their_pus(description):
    """CPUID leaf 0x1F parts, some AMD/Hygon and QEMU guests put a cache between a core and its
    PUs: every core is still a unit (its first PU), for every strategy, and with --smt every PU."""
    from pinlab.placement import make_placement
    from pinlab.placement.strategies import STRATEGIES, UNPINNED

    topo = load_topology(f"synthetic:{description}")
    firsts = [min(core.cpus) for core in topo.cores]
    for strategy in STRATEGIES:
        if strategy in UNPINNED:
            continue
        n = len(topo.cores) // len(topo.packages) if strategy == "intra-socket" else len(topo.cores)
        cpus = make_placement(topo, strategy=strategy, threads=n).cpus
        assert len(set(cpus)) == n and set(cpus) <= set(firsts), strategy
    every = make_placement(topo, strategy="compact", threads=len(topo.pus), smt=True).cpus
    assert sorted(every) == sorted(topo.pu_by_os)
    result = run_pinlab("place", "-t", f"synthetic:{description}", "-s", "scatter", "-n", str(len(topo.cores)))
    assert result.returncode == 0, result.stderr


def memory_machine(allowed_cpus: str, allowed_nodes: str | None) -> str:
    """Two packages of two cores, a node each (0 and 1); node 2 memory-only at the machine level
    (CXL), node 3 memory-only in a Group with no CPU (how some exports hold an HBM or CXL node)."""

    def core(i: int) -> str:
        return (
            f'<object type="Core" os_index="{i}" cpuset="{hex(1 << i)}" complete_cpuset="{hex(1 << i)}">'
            f'<object type="PU" os_index="{i}" cpuset="{hex(1 << i)}" complete_cpuset="{hex(1 << i)}"/></object>'
        )

    nodeset = f' allowed_nodeset="{allowed_nodes}"' if allowed_nodes else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n'
        f'<object type="Machine" os_index="0" cpuset="0xf" complete_cpuset="0xf" allowed_cpuset="{allowed_cpus}"{nodeset}>'
        '<object type="NUMANode" os_index="2" cpuset="0x0" complete_cpuset="0x0" nodeset="0x4" local_memory="1073741824" subtype="CXL"/>'
        f'<object type="Package" os_index="0" cpuset="0x3" complete_cpuset="0x3">'
        f'<object type="NUMANode" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" local_memory="1073741824"/>{core(0)}{core(1)}</object>'
        f'<object type="Package" os_index="1" cpuset="0xc" complete_cpuset="0xc">'
        f'<object type="NUMANode" os_index="1" cpuset="0xc" complete_cpuset="0xc" nodeset="0x2" local_memory="1073741824"/>{core(2)}{core(3)}</object>'
        '<object type="Group" cpuset="0x0" complete_cpuset="0x0">'
        '<object type="NUMANode" os_index="3" cpuset="0x0" complete_cpuset="0x0" nodeset="0x8" local_memory="1073741824" subtype="HBM"/></object>'
        "</object>\n</topology>\n"
    )


@pytest.mark.parametrize(
    "allowed_nodes, expected",
    [("0xf", {0, 1, 2, 3}), ("0x6", {1, 2}), (None, {0, 1, 2, 3})],
    ids=["all nodes allowed", "a cgroup's mems 1-2", "no nodeset recorded"],
)
def test_a_node_is_allowed_when_its_number_is_in_the_allowed_nodeset_whatever_its_cpus(tmp_path, allowed_nodes, expected):
    path = tmp_path / "m.xml"
    path.write_text(memory_machine("0x3", allowed_nodes))  # only package 0's CPUs are allowed
    topo = load_topology(str(path))
    assert len(topo.numa_nodes) == 4
    assert topo.allowed_nodes == expected
    assert {n.os_index for n in topo.numa_nodes if n.allowed} == expected
    assert topology_to_json(topo)["allowed_numa_nodes"] == sorted(expected)
    tree = render_tree(topo)
    for node in range(4):
        line = next(line for line in tree.splitlines() if f"(P#{node} " in line and "NUMANode" in line)
        assert ("[unavailable]" in line) == (node not in expected), line


def test_narrowing_to_mems_allowed_keeps_memory_only_nodes():
    """For this machine pinlab narrows hwloc's sets to the process's Mems_allowed: a memory-only
    node in it stays allowed even when hwloc recorded no allowed nodeset."""
    from pinlab.topology.hwloc_xml import parse_xml

    topo = parse_xml(memory_machine("0xf", None), source="test", narrow_nodes=frozenset({0, 2, 3}))
    assert topo.allowed_nodes == {0, 2, 3}


def v1_machine(allowed: int) -> str:
    """hwloc 1.x XML (no version attribute, Socket objects, online/allowed sets on every object):
    two sockets of two cores, the PUs outside ``allowed`` disallowed (a cgroup-restricted export)."""

    def sets(mask: int) -> str:
        return f'cpuset="{hex(mask)}" complete_cpuset="{hex(mask)}" online_cpuset="{hex(mask)}" allowed_cpuset="{hex(mask & allowed)}"'

    body = ""
    for socket in range(2):
        cores = "".join(
            f'<object type="Core" os_index="{c}" {sets(1 << (2 * socket + c))}><object type="PU" os_index="{2 * socket + c}" '
            f"{sets(1 << (2 * socket + c))}/></object>"
            for c in range(2)
        )
        body += f'<object type="Socket" os_index="{socket}" {sets(3 << (2 * socket))}>{cores}</object>'
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc.dtd">\n<topology>\n'
        f'<object type="Machine" os_index="0" {sets(0xF)}>{body}</object>\n</topology>\n'
    )


@needs_hwloc
def test_hwloc_1_files_keep_their_disallowed_cpus(tmp_path):
    path = tmp_path / "v1.xml"
    path.write_text(v1_machine(allowed=0x3))
    topo = load_topology(str(path))
    assert sorted(topo.pu_by_os) == [0, 1, 2, 3]  # all four, as hwloc 2.x files keep them
    assert topo.allowed_cpus == {0, 1}
    assert [p.allowed for p in topo.packages] == [True, False]


def v3_machine() -> str:
    """What hwloc 3.0 writes: version 3.0 (DOCTYPE still hwloc2.dtd), an id per object, the
    topology-wide infos under <topology> after the objects."""

    def obj(kind: str, os_index: int, mask: int, gp: int, inner: str = "") -> str:
        return (
            f'<object type="{kind}" os_index="{os_index}" cpuset="{hex(mask)}" complete_cpuset="{hex(mask)}" '
            f'nodeset="0x1" complete_nodeset="0x1" gp_index="{gp}" id="obj{gp}">{inner}</object>'
        )

    cores = "".join(obj("Core", c, 1 << c, 10 + c, obj("PU", c, 1 << c, 20 + c)) for c in range(4))
    numa = '<object type="NUMANode" os_index="0" cpuset="0xf" complete_cpuset="0xf" nodeset="0x1" complete_nodeset="0x1" gp_index="2" id="obj2" local_memory="1073741824"/>'
    machine = (
        '<object type="Machine" os_index="0" cpuset="0xf" complete_cpuset="0xf" allowed_cpuset="0xf" nodeset="0x1" '
        f'complete_nodeset="0x1" allowed_nodeset="0x1" gp_index="1" id="obj1">{numa}{obj("Package", 0, 0xF, 3, cores)}</object>'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="3.0">\n'
        f'{machine}\n<support name="custom.exported_support"/>\n<info name="HostName" value="node042"/>\n'
        '<info name="Backend" value="Linux"/>\n</topology>\n'
    )


def test_hwloc_3_files_are_read(tmp_path):
    path = tmp_path / "v3.xml"
    path.write_text(v3_machine())
    topo = load_topology(str(path))
    assert topo.summary()["pus"] == 4 and topo.summary()["numa_nodes"] == 1
    assert topo.name == "node042"  # the host name from <topology>'s own infos
    result = run_pinlab("place", "-t", str(path), "-s", "scatter", "-n", "4")
    assert result.returncode == 0, result.stderr


def test_an_xml_version_pinlab_cannot_read_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "v4.xml"
    path.write_text(v3_machine().replace('version="3.0"', 'version="4.1"'))
    result = run_pinlab("topology", "-t", str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "hwloc XML version 4.1" in result.stderr and "--export-xml-flags v2" in result.stderr and "minimalistic" not in result.stderr
