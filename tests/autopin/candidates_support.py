"""Machines built for the candidate tests: a hybrid one, an irregular one, random automorphisms."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

from pinlab.autopin.symmetry import structure
from pinlab.topology import load_topology
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import Topology, TopoObject


def _mask(cpus) -> str:
    return hex(sum(1 << c for c in cpus))


def hybrid(description: str = "pack:1 [numa] l3:2 core:4 pu:2", performance_l3: int = 0) -> Topology:
    """A synthetic machine made hybrid: the PUs of L3 number ``performance_l3`` are P-cores
    (efficiency 1, hwloc's IntelCore), the others E-cores (efficiency 0, IntelAtom), recorded as
    hwloc 2.4+ records them (``<cpukind>``). At most 32 PUs (one bitmap word)."""
    plain = load_topology("synthetic:" + description)
    assert len(plain.pus) <= 32
    p_cores = plain.objects("L3")[performance_l3].cpus
    e_cores = plain.root.cpus - p_cores
    kinds = (
        f'<cpukind cpuset="{_mask(e_cores)}" forced_efficiency="0"><info name="CoreType" value="IntelAtom"/></cpukind>'
        f'<cpukind cpuset="{_mask(p_cores)}" forced_efficiency="1"><info name="CoreType" value="IntelCore"/></cpukind>'
    )
    text = plain.xml.replace("</topology>", kinds + "</topology>")
    return parse_xml(text, source=f"hybrid:{description}")


def without_cores(description: str, drop: list[tuple[int, int]]) -> Topology:
    """A synthetic machine with some cores removed: ``(package, core within it)`` pairs, so the
    packages differ in size (an irregular tree, as a machine with cores disabled in firmware)."""
    plain = load_topology("synthetic:" + description)
    root = ET.fromstring(plain.xml)
    packages = [el for el in root.iter("object") if el.get("type") == "Package"]
    for package, index in sorted(drop, reverse=True):
        cores = [el for el in packages[package].iter("object") if el.get("type") == "Core"]
        victim = cores[index]
        parent = next(el for el in packages[package].iter("object") if victim in list(el))
        parent.remove(victim)
    return parse_xml(ET.tostring(root, encoding="unicode"), source=f"irregular:{description}")


def random_automorphism(topo: Topology, rnd: random.Random) -> dict[int, int]:
    """PU -> PU of a random automorphism of the tree: at every object, children of equal
    structure are shuffled among themselves, recursively."""
    return _iso(topo, topo.root, topo.root, rnd)


def _iso(topo: Topology, a: TopoObject, b: TopoObject, rnd: random.Random) -> dict[int, int]:
    if a.type == "PU":
        return {a.os_index: b.os_index}
    targets: dict[tuple, list[TopoObject]] = {}
    for child in b.children:
        targets.setdefault(structure(topo, child), []).append(child)
    for group in targets.values():
        rnd.shuffle(group)
    mapping: dict[int, int] = {}
    for child in a.children:
        mapping.update(_iso(topo, child, targets[structure(topo, child)].pop(), rnd))
    return mapping
