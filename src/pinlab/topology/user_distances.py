"""Distances measured by ``pinlab calibrate``, kept in the topology's hwloc XML where hwloc keeps its own.

- **Core-to-core latency** is a matrix between PUs: an hwloc 2 ``<distances2 type="PU">`` element,
  named ``PinlabCPULatency``, kind FROM_USER (2) + MEANS_LATENCY (4). hwloc's values are unsigned
  integers without a unit, so the values are picoseconds (nanoseconds would round away the
  differences that matter between close cores).
- **Memory bandwidth and latency** are per NUMA node *from an initiator* (a package): hwloc's
  memory attributes (``<memattr>``, what ``lstopo --memattrs`` shows, the home of the firmware's
  HMAT bandwidth and latency), under pinlab's own names so that they never mix with the firmware's:
  ``PinlabReadBandwidth`` (MB/s, flags HIGHER_FIRST 1 + NEED_INITIATOR 4) and
  ``PinlabMemoryLatency`` (picoseconds, flags LOWER_FIRST 2 + NEED_INITIATOR 4), each value with
  the initiator's cpuset. (A ``<distances2>`` matrix between nodes cannot hold them: it is square
  over nodes, and hwloc drops a matrix of one node, the common case.)

A file written so is still an ordinary hwloc file: ``lstopo -i FILE.xml`` reads it and keeps all
of it when it exports it again, and every pinlab command given ``--topology FILE.xml`` finds them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pinlab.cpuset import format_hwloc_bitmap, parse_hwloc_bitmap
from pinlab.errors import UsageError
from pinlab.topology.model import CpuLatency, MeasuredMemory

KIND_FROM_USER, KIND_MEANS_LATENCY = 2, 4
MEMATTR_HIGHER_FIRST, MEMATTR_LOWER_FIRST, MEMATTR_NEED_INITIATOR = 1, 2, 4
CPU_LATENCY = "PinlabCPULatency"
READ_BANDWIDTH = "PinlabReadBandwidth"
MEMORY_LATENCY = "PinlabMemoryLatency"
PICOSECONDS_PER_NS = 1000
#: hwloc writes at most this many numbers per <indexes>/<u64values> element; we do the same.
_PER_ELEMENT = 10

_PINLAB_ELEMENTS = re.compile(r'[ \t]*<(distances2|memattr)\b[^>]*\bname="Pinlab[A-Za-z]*"[^>]*>.*?</\1>[ \t]*\n?', re.S)


def _element(obj_type: str, name: str, kind: int, indexes: list[int], values: list[int]) -> str:
    """One ``<distances2>`` element in hwloc's own layout (``length`` = characters of the text)."""
    lines = [f'  <distances2 type="{obj_type}" nbobjs="{len(indexes)}" kind="{kind}" name="{name}" indexing="os">']
    for tag, numbers in (("indexes", indexes), ("u64values", values)):
        for start in range(0, len(numbers), _PER_ELEMENT):
            text = "".join(f"{n} " for n in numbers[start : start + _PER_ELEMENT])
            lines.append(f'    <{tag} length="{len(text)}">{text}</{tag}>')
    lines.append("  </distances2>")
    return "\n".join(lines) + "\n"


def cpu_latency_element(latency: CpuLatency) -> str:
    values = [max(0, round(v * PICOSECONDS_PER_NS)) for row in latency.matrix for v in row]
    return _element("PU", CPU_LATENCY, KIND_FROM_USER | KIND_MEANS_LATENCY, list(latency.cpus), values)


def memory_elements(xml_root: ET.Element, memory: MeasuredMemory) -> str:
    """The two ``<memattr>`` elements of ``memory``; targets named by their gp_index in ``xml_root``."""
    gp_of_node = {int(o.get("os_index", "-1")): o.get("gp_index") for o in xml_root.iter("object") if o.get("type") == "NUMANode"}
    parts = []
    for name, flags, rows, scale in (
        (READ_BANDWIDTH, MEMATTR_HIGHER_FIRST | MEMATTR_NEED_INITIATOR, memory.bandwidth_mbps, 1),
        (MEMORY_LATENCY, MEMATTR_LOWER_FIRST | MEMATTR_NEED_INITIATOR, memory.latency_ns, PICOSECONDS_PER_NS),
    ):
        parts.append(f'  <memattr name="{name}" flags="{flags}">')
        for initiator, row in zip(memory.initiators, rows):
            for node, value in zip(memory.nodes, row):
                if value <= 0 or gp_of_node.get(node) is None:
                    continue  # not measured (no CPU to read from), or a node hwloc's file does not number
                parts.append(
                    f'    <memattr_value target_obj_type="NUMANode" target_obj_gp_index="{gp_of_node[node]}" '
                    f'value="{round(value * scale)}" initiator_cpuset="{format_hwloc_bitmap(initiator)}"/>'
                )
        parts.append("  </memattr>")
    return "\n".join(parts) + "\n"


def read_measured_memory(root_el: ET.Element, source: str) -> MeasuredMemory | None:
    """pinlab's measured memory attributes of a parsed hwloc document, if it holds them."""
    node_of_gp = {o.get("gp_index"): int(o.get("os_index", "-1")) for o in root_el.iter("object") if o.get("type") == "NUMANode"}
    cpus_of_gp = {o.get("gp_index"): o.get("cpuset") for o in root_el.iter("object") if o.get("cpuset")}
    values: dict[str, dict[tuple[frozenset[int], int], float]] = {READ_BANDWIDTH: {}, MEMORY_LATENCY: {}}
    for attr in root_el.findall("memattr"):
        name = attr.get("name")
        if name not in values:
            continue
        for el in attr.findall("memattr_value"):
            try:
                node = node_of_gp[el.get("target_obj_gp_index")]
                bitmap = el.get("initiator_cpuset") or cpus_of_gp[el.get("initiator_obj_gp_index")]
                initiator = parse_hwloc_bitmap(bitmap)
                value = int(el.get("value", ""))
            except (KeyError, ValueError, TypeError):
                raise UsageError(
                    f"{source}: malformed measured memory attribute {name!r}; measure it again with `pinlab calibrate -o FILE.xml`"
                ) from None
            values[name][(initiator, node)] = value / (PICOSECONDS_PER_NS if name == MEMORY_LATENCY else 1)
    keys = set(values[READ_BANDWIDTH]) | set(values[MEMORY_LATENCY])
    if not keys:
        return None
    nodes = sorted({node for _, node in keys})
    initiators = sorted({initiator for initiator, _ in keys}, key=lambda cpus: min(cpus, default=-1))
    return MeasuredMemory(
        nodes=nodes,
        initiators=initiators,
        bandwidth_mbps=[[values[READ_BANDWIDTH].get((i, n), 0.0) for n in nodes] for i in initiators],
        latency_ns=[[values[MEMORY_LATENCY].get((i, n), 0.0) for n in nodes] for i in initiators],
    )


def with_measurements(xml: str, elements: str) -> str:
    """``xml`` with pinlab's earlier measurements removed and ``elements`` added before ``</topology>``."""
    text = _PINLAB_ELEMENTS.sub("", xml)
    end = text.rfind("</topology>")
    if end < 0:
        raise UsageError("the topology's XML has no </topology> end tag; export it again with `lstopo-no-graphics --of xml FILE`")
    return text[:end] + elements + text[end:]


def read_cpu_latency(root_el: ET.Element, source: str) -> CpuLatency | None:
    """The ``PinlabCPULatency`` matrix of a parsed hwloc XML document, in ns, if it holds one."""
    for el in root_el.findall("distances2"):
        if el.get("type") != "PU" or el.get("name") != CPU_LATENCY:
            continue
        try:
            count = int(el.get("nbobjs", "0"))
            indexes = [int(v) for part in el.findall("indexes") for v in (part.text or "").split()]
            values = [int(v) for part in el.findall("u64values") for v in (part.text or "").split()]
        except ValueError:
            count, indexes, values = -1, [], []
        if count < 2 or len(indexes) != count or len(values) != count * count or len(set(indexes)) != count:
            raise UsageError(
                f"{source}: malformed measured CPU latency matrix ({count} PUs announced, {len(indexes)} indexes, "
                f"{len(values)} values); measure it again with `pinlab calibrate -o FILE.xml`"
            )
        matrix = [[values[i * count + j] / PICOSECONDS_PER_NS for j in range(count)] for i in range(count)]
        return CpuLatency(cpus=indexes, matrix=matrix)
    return None
