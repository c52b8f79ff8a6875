"""Show a topology: an indented text tree like lstopo's, and pinlab's stable JSON format."""

from __future__ import annotations

from typing import Any

from pinlab.cpuset import format_cpulist
from pinlab.topology.model import Topology, TopoObject

JSON_FORMAT_VERSION = 1


def format_size(nbytes: int) -> str:
    """A byte count in the largest binary unit that divides it exactly (1280KiB, not 1.2MiB),
    as lstopo does for caches; other sizes (memory) get one decimal (5.1GiB)."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0 and nbytes // factor < 10_000:
            return f"{nbytes // factor}{unit}"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f}{unit}"
    return f"{nbytes}B"


def describe(obj: TopoObject) -> str:
    """One object as lstopo writes it: ``L3 L#0 (8MiB)``, ``PU L#3 (P#6)``, ``NUMANode L#1 (P#1 12GiB)``."""
    details = []
    if obj.type == "NUMANode":
        if obj.os_index is not None:
            details.append(f"P#{obj.os_index}")
        if obj.attributes.get("local_memory"):
            details.append(format_size(int(obj.attributes["local_memory"])))
    elif obj.type in ("Package", "Die", "Core", "PU") and obj.os_index is not None:
        details.append(f"P#{obj.os_index}")
    if obj.is_cache and obj.attributes.get("cache_size"):
        details.append(format_size(int(obj.attributes["cache_size"])))
    text = obj.kind if obj.type == "Machine" else f"{obj.kind} L#{obj.logical_index}"
    if details:
        text += f" ({' '.join(details)})"
    if not obj.allowed:
        text += " [unavailable]"
    return text


def render_tree(topo: Topology) -> str:
    """An indented tree; a chain of single children is merged on one line with ``+`` as lstopo does."""
    lines: list[str] = []
    summary = topo.summary()
    lines.append(
        f"# {topo.name}: {summary['packages']} package(s), {summary['numa_nodes']} NUMA node(s), "
        f"{summary['cores']} cores, {summary['pus']} PUs; allowed CPUs {format_cpulist(topo.allowed_cpus) or 'none'}"
    )

    def visit(obj: TopoObject, indent: int) -> None:
        chain = [obj]
        while len(chain[-1].children) == 1 and not chain[-1].memory_children:
            chain.append(chain[-1].children[0])
        lines.append("  " * indent + " + ".join(describe(o) for o in chain))
        last = chain[-1]
        for node in last.memory_children:
            lines.append("  " * (indent + 1) + describe(node))
        for child in last.children:
            visit(child, indent + 1)

    visit(topo.root, 0)
    for matrix in topo.all_distances:
        lines.append(f"NUMA distances ({matrix.name}, {matrix.meaning}, by node OS index):")
        width = max(len(str(v)) for row in matrix.matrix for v in row) + 2
        lines.append("  node" + "".join(f"{n:>{width}}" for n in matrix.nodes))
        for node, row in zip(matrix.nodes, matrix.matrix):
            lines.append(f"  {node:>4}" + "".join(f"{v:>{width}}" for v in row))
    if topo.cpu_latency is not None:
        lines.extend(_cpu_latency_lines(topo))
    if topo.measured_memory is not None:
        lines.extend(_measured_memory_lines(topo))
    for kind in topo.cpu_kinds if len(topo.cpu_kinds) > 1 else []:
        lines.append(f"CPU kind {kind.name} (efficiency {kind.efficiency}): CPUs {format_cpulist(kind.cpus)}")
    return "\n".join(lines)


def _cpu_latency_lines(topo: Topology) -> list[str]:
    """The measured core-to-core latency matrix (pinlab calibrate) and what it changed in the tree."""
    latency = topo.cpu_latency
    lines = [f"Measured CPU latency (one-way, ns, by PU OS index; {latency.name}):"]
    width = max(6, max(len(str(c)) for c in latency.cpus) + 2)
    lines.append("   cpu" + "".join(f"{c:>{width}}" for c in latency.cpus))
    for cpu, row in zip(latency.cpus, latency.matrix):
        lines.append(f"  {cpu:>4}" + "".join(f"{v:>{width}.1f}" for v in row))
    lines.extend(topo.measured_notes or ["measured grouping: the tree already has the groups the matrix shows; nothing added"])
    return lines


def _measured_memory_lines(topo: Topology) -> list[str]:
    memory = topo.measured_memory
    lines = ["Measured memory (pinlab calibrate): read bandwidth MB/s / latency ns, row = CPUs read from, column = NUMA node read:"]
    for initiator, bandwidth, latency in zip(memory.initiators, memory.bandwidth_mbps, memory.latency_ns):
        cells = "".join(f"  node {n}: {b:.0f} / {lat:.1f}" for n, b, lat in zip(memory.nodes, bandwidth, latency))
        lines.append(f"  CPUs {format_cpulist(initiator)}:{cells}")
    return lines


def object_to_json(obj: TopoObject) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": obj.type,
        "kind": obj.kind,
        "logical_index": obj.logical_index,
        "os_index": obj.os_index,
        "cpus": format_cpulist(obj.cpus),
        "allowed": obj.allowed,
    }
    if obj.nodes:
        data["numa_nodes"] = sorted(obj.nodes)
    if obj.attributes:
        data["attributes"] = dict(obj.attributes)
    if obj.infos:
        data["infos"] = dict(obj.infos)
    if obj.memory_children:
        data["memory"] = [object_to_json(n) for n in obj.memory_children]
    if obj.children:
        data["children"] = [object_to_json(c) for c in obj.children]
    return data


def topology_to_json(topo: Topology) -> dict[str, Any]:
    """pinlab's topology JSON (format version 1, documented in the README)."""
    return {
        "pinlab_topology": JSON_FORMAT_VERSION,
        "source": topo.source,
        "name": topo.name,
        "summary": topo.summary(),
        "allowed_cpus": format_cpulist(topo.allowed_cpus),
        "allowed_numa_nodes": sorted(topo.allowed_nodes),
        "levels": topo.kinds(),
        "distances": None if topo.distances is None else _matrix_json(topo.distances),
        "distance_matrices": [_matrix_json(m) for m in topo.all_distances],
        "cpu_latency": None
        if topo.cpu_latency is None
        else {
            "name": topo.cpu_latency.name,
            "unit": "ns",
            "cpus": topo.cpu_latency.cpus,
            "matrix": topo.cpu_latency.matrix,
            "notes": topo.measured_notes,
        },
        "measured_memory": None
        if topo.measured_memory is None
        else {
            "nodes": topo.measured_memory.nodes,
            "initiators": [format_cpulist(i) for i in topo.measured_memory.initiators],
            "bandwidth_mbps": topo.measured_memory.bandwidth_mbps,
            "latency_ns": topo.measured_memory.latency_ns,
        },
        "cpu_kinds": [{"cpus": format_cpulist(k.cpus), "efficiency": k.efficiency, "infos": k.infos} for k in topo.cpu_kinds],
        "root": object_to_json(topo.root),
    }


def _matrix_json(matrix) -> dict[str, Any]:
    return {"name": matrix.name, "meaning": matrix.meaning, "kind": matrix.kind, "nodes": matrix.nodes, "matrix": matrix.matrix}
