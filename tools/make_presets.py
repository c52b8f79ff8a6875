#!/usr/bin/env python3
"""Regenerate the bundled topology presets (src/pinlab/topology/presets/*.xml).

Each preset starts as an hwloc synthetic description (with the OS numbering the real machine
has, where the seed papers give it), is expanded to XML by lstopo-no-graphics, and is then
completed with what synthetic strings cannot say: NUMA distances, CPU kinds of hybrid
processors, a CPU model name, and an irregular core layout (the hybrid desktop). The result is
read back by lstopo once more, so every preset is XML that hwloc itself accepts.

Run: python3 tools/make_presets.py   (needs lstopo-no-graphics)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from pinlab.cpuset import format_hwloc_bitmap  # noqa: E402

OUT = ROOT / "src" / "pinlab" / "topology" / "presets"


def os_numbers(shape: list[int], formula) -> str:
    """OS index of every PU, in hwloc's logical order, as `pu:N(indexes=...)` wants it.

    ``shape`` is the arity of each level down to the PUs; ``formula(coords)`` gives the OS
    index of the PU at those coordinates.
    """
    out = []

    def rec(prefix):
        if len(prefix) == len(shape):
            out.append(formula(prefix))
            return
        for i in range(shape[len(prefix)]):
            rec(prefix + [i])

    rec([])
    return ",".join(map(str, out))


def synthetic(desc: str) -> ET.Element:
    xml = subprocess.run(["lstopo-no-graphics", "-i", desc, "--of", "xml", "-"], check=True, capture_output=True, text=True).stdout
    return ET.fromstring(xml)


def machine(root: ET.Element) -> ET.Element:
    return root.find("object")


def set_infos(root: ET.Element, name: str, description: str, cpu_model: str) -> None:
    top = machine(root)
    for info in list(top.findall("info")):
        if info.get("name") in ("SyntheticDescription", "Backend", "ProcessName", "hwlocVersion"):
            top.remove(info)
    for key, value in (("PinlabPreset", name), ("PinlabDescription", description), ("Backend", "pinlab-preset")):
        ET.SubElement(top, "info", name=key, value=value)
    # Move the infos before the child objects, where hwloc writes them.
    infos = top.findall("info")
    for info in infos:
        top.remove(info)
    for i, info in enumerate(infos):
        top.insert(i, info)
    for pack in root.iter("object"):
        if pack.get("type") == "Package":
            pack.insert(0, ET.Element("info", name="CPUModel", value=cpu_model))


def add_distances(root: ET.Element, matrix: list[list[int]]) -> None:
    n = len(matrix)
    nodes = sorted(int(o.get("os_index")) for o in root.iter("object") if o.get("type") == "NUMANode")
    assert len(nodes) == n, (nodes, n)
    dist = ET.Element("distances2", type="NUMANode", nbobjs=str(n), kind="5", name="NUMALatency", indexing="os")
    # hwloc's `length` attribute is the length of the text content, in characters.
    for tag, numbers in (("indexes", nodes), ("u64values", [v for row in matrix for v in row])):
        text = " ".join(map(str, numbers)) + " "
        ET.SubElement(dist, tag, length=str(len(text))).text = text
    root.insert(1, dist)


def recompute_cpusets(el: ET.Element) -> set[int]:
    """Recompute cpuset/complete_cpuset bottom-up after the tree was edited."""
    if el.get("type") == "PU":
        cpus = {int(el.get("os_index"))}
    else:
        cpus = set()
        for child in el.findall("object"):
            if child.get("type") != "NUMANode":
                cpus |= recompute_cpusets(child)
        for child in el.findall("object"):
            if child.get("type") == "NUMANode":
                child.set("cpuset", format_hwloc_bitmap(cpus))
                child.set("complete_cpuset", format_hwloc_bitmap(cpus))
    el.set("cpuset", format_hwloc_bitmap(cpus))
    el.set("complete_cpuset", format_hwloc_bitmap(cpus))
    if el.get("allowed_cpuset") is not None:
        el.set("allowed_cpuset", format_hwloc_bitmap(cpus))
    return cpus


def hybrid_alder_lake() -> ET.Element:
    """Core i9-12900K: 8 P-cores with 2 threads and a private L2 each, 8 E-cores in two
    clusters of 4 sharing an L2; one L3 for all. Linux numbers the P-core threads 0-15 (siblings
    adjacent), then the E-cores 16-23."""
    root = synthetic("[numa(memory=64GiB)] pack:1 l3:1(size=30MiB) l2:10(size=1280KiB) core:1 l1d:1(size=48KiB) pu:2")
    l3 = next(o for o in root.iter("object") if o.get("type") == "L3Cache")
    l2s = [o for o in l3.findall("object") if o.get("type") == "L2Cache"]
    pu_number = iter(range(10_000))
    # P-cores: the first 8 L2s keep their one core with 2 PUs.
    for l2 in l2s[:8]:
        for pu in l2.iter("object"):
            if pu.get("type") == "PU":
                pu.set("os_index", str(next(pu_number)))
    # E-cores: the last two L2s become 2 MiB clusters of 4 single-thread cores.
    core_number = 8
    for l2 in l2s[8:]:
        l2.set("cache_size", str(2 * 1024 * 1024))
        template_l1 = l2.find("object")
        l2.remove(template_l1)
        for _ in range(4):
            l1 = ET.SubElement(l2, "object", dict(template_l1.attrib, cache_size=str(32 * 1024)))
            core = ET.SubElement(l1, "object", type="Core", os_index=str(core_number))
            core_number += 1
            ET.SubElement(core, "object", type="PU", os_index=str(next(pu_number)))
    for i, obj in enumerate(root.iter("object")):
        obj.set("gp_index", str(i + 1))
    all_cpus = recompute_cpusets(machine(root))
    p_cpus, e_cpus = set(range(16)), set(range(16, 24))
    assert all_cpus == p_cpus | e_cpus
    for cpus, eff, core_type, fmax in ((e_cpus, 0, "IntelAtom", 3900), (p_cpus, 1, "IntelCore", 5200)):
        kind = ET.SubElement(root, "cpukind", cpuset=format_hwloc_bitmap(cpus), forced_efficiency=str(eff))
        ET.SubElement(kind, "info", name="CoreType", value=core_type)
        ET.SubElement(kind, "info", name="FrequencyMaxMHz", value=str(fmax))
    return root


PRESETS = {
    "clovertown": dict(
        description="Core2 workstation (Mazouz et al. 2011, autopin's Clovertown): 2 x Xeon E5345, 2 L2 pairs per socket; socket 0 holds CPUs 0,2,4,6 (L2 pairs {0,2},{4,6}), socket 1 holds 1,3,5,7",
        cpu_model="Intel(R) Xeon(R) CPU E5345 @ 2.33GHz",
        synthetic="[numa(memory=4GiB)] pack:2 l2:2(size=4MiB) core:2 l1d:1(size=32KiB) pu:1(indexes={})",
        # socket s, L2 pair c, core k -> CPU 4c + 2k + s
        indexes=([2, 2, 2, 1], lambda c: 4 * c[1] + 2 * c[2] + c[0]),
    ),
    "nehalem-ep": dict(
        description="Nehalem server (Mazouz et al. 2011): 2 x Xeon X5570, 4 cores and an 8 MiB L3 per socket, one NUMA node per socket",
        cpu_model="Intel(R) Xeon(R) CPU X5570 @ 2.93GHz",
        synthetic="pack:2 [numa(memory=12GiB)] l3:1(size=8MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:1",
        distances=[[10, 21], [21, 10]],
    ),
    "dunnington-96": dict(
        description="IBM x3950 M2 ccNUMA (Mazouz et al. 2011): 4 NUMA nodes x 4 Xeon X7460 sockets x 6 cores, 3 MiB L2 per core pair, 16 MiB L3 per socket",
        cpu_model="Intel(R) Xeon(R) CPU X7460 @ 2.66GHz",
        synthetic="group:4 [numa(memory=47GiB)] pack:4 l3:1(size=16MiB) l2:3(size=3MiB) core:2 l1d:1(size=32KiB) pu:1",
        distances=[[10 if a == b else 20 for b in range(4)] for a in range(4)],
    ),
    "opteron-4x4": dict(
        description="Quad-socket quad-core Opteron 8347HE (Broquedis et al. 2010, ForestGOMP): 4 NUMA nodes, 2 MiB L3 per socket, HyperTransport square (1 hop 16, 2 hops 22)",
        cpu_model="Quad-Core AMD Opteron(tm) Processor 8347 HE",
        synthetic="pack:4 [numa(memory=8GiB)] l3:1(size=2MiB) l2:4(size=512KiB) l1d:1(size=64KiB) core:1 pu:1",
        distances=[[10, 16, 16, 22], [16, 10, 22, 16], [16, 22, 10, 16], [22, 16, 16, 10]],
    ),
    "x7560-4x8": dict(
        description="Dell R910 (Ribeiro et al. 2012, Intel NUMA): 4 x Xeon X7560, 8 cores x 2 threads and a 24 MiB L3 per socket; Linux numbers CPU c on socket c mod 4, SMT siblings 32 apart",
        cpu_model="Intel(R) Xeon(R) CPU X7560 @ 2.27GHz",
        synthetic="pack:4 [numa(memory=16GiB)] l3:1(size=24MiB) l2:8(size=256KiB) l1d:1(size=32KiB) core:1 pu:2(indexes={})",
        # socket s, core k, thread t -> CPU 32t + 4k + s
        indexes=([4, 8, 2], lambda c: 32 * c[2] + 4 * c[1] + c[0]),
        distances=[[10 if a == b else 20 for b in range(4)] for a in range(4)],
    ),
    "epyc-7763-2s": dict(
        description="Modern 2-socket server: 2 x AMD EPYC 7763 (64 cores, 2 threads each) in NPS4 mode: per socket 4 NUMA nodes, 8 L3 domains (CCDs) of 8 cores; siblings of CPU c at c+128",
        cpu_model="AMD EPYC 7763 64-Core Processor",
        synthetic="pack:2 group:4 [numa(memory=64GiB)] l3:2(size=32MiB) l2:8(size=512KiB) l1d:1(size=32KiB) core:1 pu:2(indexes={})",
        # socket p, node g, CCD c, core k, thread t -> CPU 128t + 64p + 16g + 8c + k
        indexes=([2, 4, 2, 8, 2], lambda c: 128 * c[4] + 64 * c[0] + 16 * c[1] + 8 * c[2] + c[3]),
        distances=[[10 if a == b else (12 if a // 4 == b // 4 else 32) for b in range(8)] for a in range(8)],
    ),
    "alderlake-i9": dict(
        description="Hybrid desktop: Core i9-12900K, 8 P-cores x 2 threads (CPUs 0-15, private 1.25 MiB L2) + 8 E-cores (CPUs 16-23, two clusters of 4 sharing 2 MiB L2), 30 MiB L3",
        cpu_model="12th Gen Intel(R) Core(TM) i9-12900K",
        builder=hybrid_alder_lake,
    ),
}


def build(name: str, spec: dict) -> str:
    if "builder" in spec:
        root = spec["builder"]()
    else:
        desc = spec["synthetic"]
        if "indexes" in spec:
            shape, formula = spec["indexes"]
            desc = desc.format(os_numbers(shape, formula))
        root = synthetic(desc)
    set_infos(root, name, spec["description"], spec["cpu_model"])
    if "distances" in spec:
        add_distances(root, spec["distances"])
    ET.indent(root)
    text = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n' + ET.tostring(root, encoding="unicode") + "\n"
    # Round-trip through hwloc: it must accept the file as it is.
    with tempfile.NamedTemporaryFile("w", suffix=".xml") as tmp:
        tmp.write(text)
        tmp.flush()
        subprocess.run(["lstopo-no-graphics", "-i", tmp.name, "--of", "console"], check=True, capture_output=True)
    return text


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, spec in PRESETS.items():
        (OUT / f"{name}.xml").write_text(build(name, spec), encoding="utf-8")
        print(f"wrote {name}.xml")


if __name__ == "__main__":
    main()
