"""Read hwloc's XML (versions 2 and 3) into a :class:`~pinlab.topology.model.Topology`.

One parser serves every source (this machine, a file, a synthetic string, a preset): they are
all hwloc XML by the time they reach here. Only what placement needs is kept: the CPU tree,
NUMA nodes as memory children, cache attributes, NUMA distances and CPU kinds. I/O objects
(bridges, PCI and OS devices) and Misc objects are skipped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pinlab.cpuset import parse_hwloc_bitmap
from pinlab.errors import UsageError
from pinlab.topology.measured import apply_measured_groups
from pinlab.topology.model import CpuKind, NumaDistances, Topology, TopoObject
from pinlab.topology.user_distances import read_cpu_latency, read_measured_memory

_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc"})
_MEMORY_TYPES = frozenset({"NUMANode", "MemCache"})
_INT_ATTRIBUTES = ("cache_size", "cache_linesize", "cache_associativity", "cache_type", "local_memory")


def parse_xml(
    text: str,
    *,
    source: str,
    narrow_cpus: frozenset[int] | None = None,
    narrow_nodes: frozenset[int] | None = None,
) -> Topology:
    """Build a topology from hwloc 2.x or 3.x XML. ``source`` says where it came from, for messages.

    The allowed sets are the ones hwloc recorded (the cgroup's, for this machine), narrowed
    further by ``narrow_cpus``/``narrow_nodes`` when given (this process's affinity mask and
    Mems_allowed).
    """
    try:
        root_el = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UsageError(f"{source}: not valid XML ({exc}); give an XML file written by hwloc's lstopo") from None
    if root_el.tag != "topology":
        raise UsageError(f"{source}: not an hwloc topology (root element <{root_el.tag}>); export one with `lstopo-no-graphics --of xml FILE`")
    machine_el = root_el.find("object")
    if machine_el is None:
        raise UsageError(f"{source}: hwloc XML without any object; export it again with `lstopo-no-graphics --of xml FILE`")
    try:
        root = _build(machine_el, parent=None, depth=0)
    except (ValueError, KeyError) as exc:
        raise UsageError(f"{source}: malformed hwloc XML ({exc}); export it again with `lstopo-no-graphics --of xml FILE`") from None
    if not root.cpus:
        raise UsageError(f"{source}: the topology has no PU (processing unit); it cannot be used for placement")
    _fill_nodes(root)
    for info in root_el.findall("info"):  # hwloc 3.x keeps topology-wide infos (HostName...) here, not on the Machine
        root.infos.setdefault(info.get("name", ""), info.get("value", ""))
    allowed_cpus = _bitmap_attr(machine_el, "allowed_cpuset")
    allowed_nodes = _bitmap_attr(machine_el, "allowed_nodeset")
    if narrow_cpus is not None:
        allowed_cpus = (root.cpus if allowed_cpus is None else allowed_cpus) & narrow_cpus
    cpu_latency, measured_notes = _measured(root_el, root, source)
    if narrow_nodes is not None:
        every_node = frozenset(n.os_index for o in root.walk() for n in o.memory_children if n.os_index is not None)
        allowed_nodes = (every_node if allowed_nodes is None else allowed_nodes) & narrow_nodes
    return Topology(
        root,
        source=source,
        xml=text,
        allowed_cpus=allowed_cpus,
        allowed_nodes=allowed_nodes,
        distances=_distances(root_el, root),
        cpu_kinds=_cpu_kinds(root_el),
        cpu_latency=cpu_latency,
        measured_notes=measured_notes,
        measured_memory=read_measured_memory(root_el, source),
    )


def _measured(root_el: ET.Element, root: TopoObject, source: str):
    """The CPU latency matrix ``pinlab calibrate`` stored in the file, if any, and the Group objects
    it reveals put into the tree (so that every strategy follows the machine as measured)."""
    latency = read_cpu_latency(root_el, source)
    if latency is None:
        return None, []
    unknown = sorted(set(latency.cpus) - root.cpus)
    if unknown:
        raise UsageError(
            f"{source}: the measured CPU latency matrix names PUs {unknown} that the topology does not have; "
            "measure this machine again with `pinlab calibrate -o FILE.xml`"
        )
    return latency, apply_measured_groups(root, latency)


def _bitmap_attr(el: ET.Element, name: str) -> frozenset[int] | None:
    value = el.get(name)
    return parse_hwloc_bitmap(value) if value else None


def _build(el: ET.Element, parent: TopoObject | None, depth: int) -> TopoObject:
    """Create the object for ``el`` and, recursively, its CPU and memory children.

    Each element's children are scanned once (infos, CPU objects, memory objects), which
    matters on machines with thousands of PUs.
    """
    attrib = el.attrib
    obj_type = attrib["type"]
    os_index = attrib.get("os_index")
    obj = TopoObject(type=obj_type, os_index=int(os_index) if os_index is not None else None, parent=parent, depth=depth)
    for name in _INT_ATTRIBUTES:
        if name in attrib:
            obj.attributes[name] = int(attrib[name])
    if obj_type == "Group" and "depth" in attrib:
        obj.attributes["group_depth"] = int(attrib["depth"])
    for name in ("subtype", "name"):
        if name in attrib:
            obj.attributes[name] = attrib[name]
    for child_el in el:
        if child_el.tag == "info":
            obj.infos[child_el.get("name", "")] = child_el.get("value", "")
            continue
        if child_el.tag != "object":
            continue
        child_type = child_el.get("type", "")
        if child_type in _IO_TYPES:
            continue
        if child_type in _MEMORY_TYPES:
            obj.memory_children.extend(_memory_objects(child_el, obj))
            continue
        obj.children.append(_build(child_el, parent=obj, depth=depth + 1))
    if obj_type == "PU":
        if obj.os_index is None:
            raise ValueError("a PU without os_index")
        obj.cpus = frozenset((obj.os_index,))
    elif len(obj.children) == 1:
        obj.cpus = obj.children[0].cpus
    else:
        obj.cpus = frozenset().union(*(child.cpus for child in obj.children))
    return obj


def _memory_objects(el: ET.Element, holder: TopoObject) -> list[TopoObject]:
    """NUMA nodes under ``el`` (a NUMANode, or a memory-side cache holding NUMA nodes)."""
    if el.get("type") == "MemCache":
        found: list[TopoObject] = []
        for child in el.findall("object"):
            found.extend(_memory_objects(child, holder))
        return found
    os_index = el.get("os_index")
    node = TopoObject(type="NUMANode", os_index=int(os_index) if os_index is not None else None, parent=holder, depth=holder.depth + 1)
    if "local_memory" in el.attrib:
        node.attributes["local_memory"] = int(el.attrib["local_memory"])
    if "subtype" in el.attrib:
        node.attributes["subtype"] = el.attrib["subtype"]
    for info in el.findall("info"):
        node.infos[info.get("name", "")] = info.get("value", "")
    cpuset = el.get("complete_cpuset") or el.get("cpuset")
    node.cpus = parse_hwloc_bitmap(cpuset) if cpuset else holder.cpus
    node.nodes = frozenset(() if node.os_index is None else (node.os_index,))
    return [node]


def _fill_nodes(root: TopoObject) -> None:
    """Give every CPU object the set of NUMA nodes local to its PUs (hwloc's nodeset).

    Computed bottom-up from each PU's nodes, so the cost grows with the number of objects,
    not objects times nodes.
    """
    nodes: list[TopoObject] = []
    for obj in root.walk():
        nodes.extend(obj.memory_children)
    nodes_of_cpu: dict[int, set[int]] = {}
    for node in nodes:
        if not node.cpus:  # a CPU-less node (memory expander): local to the object holding it
            node.cpus = node.parent.cpus if node.parent is not None else frozenset()
        if node.os_index is not None:
            for cpu in node.cpus:
                nodes_of_cpu.setdefault(cpu, set()).add(node.os_index)
    empty: frozenset[int] = frozenset()

    def fill(obj: TopoObject) -> frozenset[int]:
        if obj.type == "PU":
            obj.nodes = frozenset(nodes_of_cpu.get(obj.os_index, empty))
        elif len(obj.children) == 1:
            obj.nodes = fill(obj.children[0])
        else:
            obj.nodes = frozenset().union(*(fill(child) for child in obj.children))
        return obj.nodes

    fill(root)


def _numbers(el: ET.Element | None) -> list[int]:
    return [int(v) for v in (el.text or "").split()] if el is not None else []


# Bits of a distances structure's ``kind`` (hwloc/distances.h).
KIND_FROM_OS, KIND_FROM_USER, KIND_MEANS_LATENCY, KIND_MEANS_BANDWIDTH, KIND_HETEROGENEOUS = 1, 2, 4, 8, 16


def _distances(root_el: ET.Element, root: TopoObject) -> list[NumaDistances]:
    """Every matrix between NUMA nodes hwloc recorded, latency first.

    hwloc 2.x writes each as ``<distances2 type="NUMANode" nbobjs=N kind=K name=...
    indexing="os"|"gp">`` holding the N node indexes and the N*N values split over as many
    ``<indexes>`` and ``<u64values>`` elements as it likes (ten numbers each, so a machine of
    more than 10 nodes has several ``<indexes>``): all of them are read, in order. Matrices
    between objects of other or mixed types (GPUs, ``<distances2hetero>``) are not NUMA
    distances and are skipped. Files of hwloc 2.0 and 2.1 name no matrix: the name then comes
    from the kind (``NUMALatency``, ``NUMABandwidth``).
    """
    gp_to_os: dict[int, int] | None = None
    found = []
    for el in root_el.findall("distances2"):
        if el.get("type") != "NUMANode":
            continue
        count = int(el.get("nbobjs", "0"))
        kind = int(el.get("kind", "0"))
        indexes = [n for part in el.findall("indexes") for n in _numbers(part)]
        values = [n for part in el.findall("u64values") for n in _numbers(part)]
        name = el.get("name") or ("NUMABandwidth" if kind & KIND_MEANS_BANDWIDTH else "NUMALatency")
        if count == 0 or len(indexes) != count or len(values) != count * count:
            raise UsageError(
                f"hwloc XML has a malformed NUMA distance matrix {name!r} ({count} nodes announced, "
                f"{len(indexes)} indexes, {len(values)} values for {count * count}); export it again with lstopo"
            )
        if el.get("indexing", "os") == "gp":  # by global persistent index: map to OS index
            if gp_to_os is None:
                gp_to_os = {
                    int(o.get("gp_index")): int(o.get("os_index", "0"))
                    for o in root_el.iter("object")
                    if o.get("type") == "NUMANode" and o.get("gp_index") is not None
                }
            indexes = [gp_to_os.get(i, i) for i in indexes]
        matrix = [values[i * count : (i + 1) * count] for i in range(count)]
        found.append(NumaDistances(nodes=indexes, matrix=matrix, name=name, kind=kind))
    # The latency matrix is the one placement reads: the one hwloc calls NUMALatency, else any of latency kind.
    found.sort(key=lambda d: (d.name != "NUMALatency", not d.kind & KIND_MEANS_LATENCY))
    return found


def _cpu_kinds(root_el: ET.Element) -> list[CpuKind]:
    kinds = []
    for el in root_el.findall("cpukind"):
        infos = {i.get("name", ""): i.get("value", "") for i in el.findall("info")}
        kinds.append(CpuKind(cpus=parse_hwloc_bitmap(el.attrib["cpuset"]), efficiency=int(el.get("forced_efficiency", "-1")), infos=infos))
    # hwloc lists kinds from least to most efficient; "efficiency" -1 means "unknown": rank by order.
    for rank, kind in enumerate(kinds):
        if kind.efficiency < 0:
            kind.efficiency = rank
    return kinds
