"""Every way to name a topology, bad ones included, and the two ways to print it."""

import json
import shutil

import pytest

from pinlab.errors import UsageError
from pinlab.topology import load_topology
from pinlab.topology.render import render_tree, topology_to_json
from tests.conftest import run_pinlab

SYNTH = "pack:2 [numa] l3:1 core:4 pu:2"


def test_synthetic_string_as_in_the_issue():
    topo = load_topology(f"synthetic:{SYNTH}")
    assert topo.summary() == {"packages": 2, "dies": 0, "numa_nodes": 2, "cores": 8, "pus": 16, "allowed_pus": 16, "allowed_numa_nodes": 2}
    assert topo.kinds() == ["Machine", "Package", "L3", "Core", "PU"]
    assert [n.cpus for n in topo.numa_nodes] == [p.cpus for p in topo.packages]


def test_xml_file_round_trip_through_the_cli(tmp_path):
    xml = run_pinlab("topology", "-t", "x7560-4x8", "-f", "xml")
    assert xml.returncode == 0
    path = tmp_path / "machine.xml"
    path.write_text(xml.stdout)
    assert topology_to_json(load_topology(str(path)))["root"] == topology_to_json(load_topology("x7560-4x8"))["root"]


def test_hwloc_1_xml_is_converted(tmp_path):
    if not shutil.which("lstopo-no-graphics"):
        pytest.skip("hwloc not installed")
    v1 = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc.dtd">\n<topology>\n'
        '  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" online_cpuset="0x00000003" allowed_cpuset="0x00000003">\n'
        '    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" online_cpuset="0x00000003" allowed_cpuset="0x00000003">\n'
        '      <object type="Core" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" online_cpuset="0x00000003" allowed_cpuset="0x00000003">\n'
        '        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" online_cpuset="0x00000001" allowed_cpuset="0x00000001"/>\n'
        '        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" online_cpuset="0x00000002" allowed_cpuset="0x00000002"/>\n'
        "      </object>\n    </object>\n  </object>\n</topology>\n"
    )
    path = tmp_path / "v1.xml"
    path.write_text(v1)
    topo = load_topology(str(path))
    assert topo.summary()["pus"] == 2 and topo.summary()["cores"] == 1


@pytest.mark.parametrize("keep", ["inside the topology tag", "after the topology tag", "in the middle"])
@pytest.mark.parametrize("version", ["2", "1"])
def test_a_truncated_file_is_said_to_be_cut_short_not_blamed_on_its_version(tmp_path, keep, version):
    """Cut anywhere (inside '<topology version=...', just after it, or half way), a file is reported
    as not valid XML at the line where it stops, never as 'hwloc 1.x file ... minimalistic parser'."""
    text = load_topology("clovertown").xml
    if version == "1":
        text = text.replace('<topology version="2.0">', "<topology>")
    start = text.index("<topology")
    cut = {
        "inside the topology tag": start + len("<topology ve") if version == "2" else start + len("<topolo"),
        "after the topology tag": text.index(">", start) + 1,
        "in the middle": len(text) // 2,
    }[keep]
    path = tmp_path / "cut.xml"
    path.write_text(text[:cut])
    with pytest.raises(UsageError) as caught:
        load_topology(str(path))
    message = str(caught.value)
    assert "not valid XML" in message and "line " in message and "1.x" not in message and "minimalistic" not in message


def test_tree_reads_like_lstopo():
    tree = render_tree(load_topology("clovertown")).splitlines()
    assert tree[0].startswith("# clovertown: 2 package(s), 1 NUMA node(s), 8 cores, 8 PUs; allowed CPUs 0-7")
    assert "  Package L#1 (P#1)" in tree
    assert "      L1d L#4 (32KiB) + Core L#4 (P#4) + PU L#4 (P#1)" in tree
    assert any(line.strip() == "NUMANode L#0 (P#0 4GiB)" for line in tree)


def test_tree_shows_distances_and_cpu_kinds():
    assert "NUMA distances" in render_tree(load_topology("opteron-4x4"))
    assert "CPU kind IntelCore (efficiency 1): CPUs 0-15" in render_tree(load_topology("alderlake-i9"))


def test_json_format_is_complete_and_consistent():
    data = json.loads(run_pinlab("topology", "-t", "epyc-7763-2s", "-f", "json").stdout)
    assert data["pinlab_topology"] == 1
    assert data["source"] == "preset:epyc-7763-2s"
    assert data["summary"]["pus"] == 256
    assert data["levels"] == ["Machine", "Package", "Group0", "L3", "L2", "L1d", "Core", "PU"]
    assert data["distances"]["nodes"] == list(range(8)) and len(data["distances"]["matrix"]) == 8
    pus, nodes = [], []

    def walk(obj):
        if obj["kind"] == "PU":
            pus.append(obj)
        nodes.extend(obj.get("memory", []))
        for child in obj.get("children", []):
            walk(child)

    walk(data["root"])
    assert len(pus) == 256 and len(nodes) == 8
    assert [p["logical_index"] for p in pus] == list(range(256))
    assert sorted(p["os_index"] for p in pus) == list(range(256))
    assert nodes[1]["cpus"] == "16-31,144-159"


def test_synthetic_format_round_trips_through_hwloc():
    out = run_pinlab("topology", "-t", f"synthetic:{SYNTH}", "-f", "synthetic")
    assert out.returncode == 0, out.stderr
    again = load_topology("synthetic:" + out.stdout.strip())
    assert again.summary() == load_topology(f"synthetic:{SYNTH}").summary()


@pytest.mark.parametrize(
    "source, message",
    [
        ("no-such-preset", "unknown topology 'no-such-preset'"),
        ("preset:nope", "unknown preset 'nope'"),
        ("synthetic:pack:x", "hwloc could not read synthetic topology"),
        ("synthetic:blah:2 pu:1", "hwloc could not read synthetic topology"),
        ("synthetic:", "empty synthetic topology"),
        ("synthetic:pack:2;rm -rf /", "malformed synthetic topology"),
        ("/no/such/file.xml", "does not exist"),
    ],
)
def test_bad_sources_give_one_clear_line(source, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        load_topology(source)
    result = run_pinlab("topology", "-t", source)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert message in result.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("this is not xml", "not valid XML"),
        ("<html><body/></html>", "not an hwloc topology"),
        ("<topology version='2.0'></topology>", "without any object"),
        ("<topology version='2.0'><object type='Machine'><object type='PU'/></object></topology>", "malformed hwloc XML"),
        ("<topology version='2.0'><object type='Machine'/></topology>", "has no PU"),
    ],
)
def test_invalid_xml_files_give_one_clear_line(tmp_path, content, message):
    path = tmp_path / "bad.xml"
    path.write_text(content)
    result = run_pinlab("topology", "-t", str(path))
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_unreadable_xml_file(tmp_path):
    path = tmp_path / "binary.xml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    result = run_pinlab("topology", "-t", str(path))
    assert result.returncode == 2 and "cannot read topology file" in result.stderr


def test_sizes_are_written_in_exact_units_where_possible():
    from pinlab.topology.render import format_size

    assert format_size(1280 * 1024) == "1280KiB"  # alder lake's P-core L2, as lstopo shows it
    assert format_size(4 << 30) == "4GiB"
    assert format_size(5463289856) == "5.1GiB"
    assert format_size(512) == "512B"
    assert "L2 L#0 (1280KiB)" in render_tree(load_topology("alderlake-i9"))
