"""pinlab calibrate on the emulated NUMA machine (tests/vm/numavm): 2 sockets, 2 NUMA nodes, 4 CPUs.

Inside the guest: ``pinlab calibrate --quick -o FILE.xml``, then ``pinlab topology -t FILE.xml -f
json`` and hwloc's own reading of the file. Checked: a latency row for every CPU, one memory row
per package (read from one of its CPUs) with a bandwidth and a latency for every node, and the
file accepted by lstopo. The packages and nodes expected come from the guest's kernel (sysfs).
"""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.vm

SHAPE = {"nodes": 2, "sockets": 2, "cpus": 4}

KERNEL = r"""
for c in /sys/devices/system/cpu/cpu[0-9]*; do echo "cpu ${c##*cpu} $(cat $c/topology/physical_package_id)"; done
for d in /sys/devices/system/node/node[0-9]*; do echo "node ${d##*node} $(cat $d/cpulist)"; done
"""


@pytest.fixture(scope="module")
def guest(numavm, pinlab_cmd):
    commands = {
        "kernel": KERNEL,
        "calibrate": f"{pinlab_cmd} calibrate --quick -o /tmp/measured.xml && {pinlab_cmd} topology -t /tmp/measured.xml -f json > /tmp/topo.json "
        "&& cat /tmp/topo.json && lstopo-no-graphics -i /tmp/measured.xml --memattrs > /tmp/memattrs.txt 2>&1 && cat /tmp/memattrs.txt >&2",
    }
    return numavm.batch([numavm.Group("all", commands, parallel=False)], **SHAPE)


def test_calibrate_measures_every_cpu_and_every_node_from_every_package(guest):
    kernel = guest["kernel"].check("reading the guest's sysfs").stdout.split("\n")
    package_of = {int(w[1]): int(w[2]) for w in (line.split() for line in kernel) if w and w[0] == "cpu"}
    nodes = sorted(int(w[1]) for w in (line.split() for line in kernel) if w and w[0] == "node")
    assert len(set(package_of.values())) == 2 and len(nodes) == 2
    result = guest["calibrate"].check("pinlab calibrate in the guest")
    topo = json.loads(result.stdout[result.stdout.index("{") :])
    latency = topo["cpu_latency"]
    assert latency["cpus"] == sorted(package_of)
    for i, row in enumerate(latency["matrix"]):
        assert row[i] == 0 and all(v > 0 and math.isfinite(v) for j, v in enumerate(row) if j != i)
    memory = topo["measured_memory"]
    assert memory["nodes"] == nodes
    # one row per package: the initiators are the packages' CPU sets
    packages = sorted({p for p in package_of.values()})
    expected = sorted(",".join(str(c) for c in sorted(cpu for cpu, p in package_of.items() if p == package)) for package in packages)
    assert sorted(_expand(i) for i in memory["initiators"]) == expected
    for rows in (memory["bandwidth_mbps"], memory["latency_ns"]):
        assert len(rows) == 2 and all(len(row) == 2 and all(v > 0 for v in row) for row in rows)
    # hwloc reads the file and lists pinlab's memory attributes for both nodes
    for name in ("PinlabReadBandwidth", "PinlabMemoryLatency"):
        section = result.stderr.split(f"name `{name}'")[1].split("Memory attribute")[0]
        assert section.count("NUMANode L#0 =") == 2 and section.count("NUMANode L#1 =") == 2, section  # from both packages


def _expand(cpulist: str) -> str:
    cpus = []
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return ",".join(map(str, cpus))
