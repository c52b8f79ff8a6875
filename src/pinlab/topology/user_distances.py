"""Distances measured by ``pinlab calibrate``, kept in the topology's hwloc XML as user distances.

hwloc 2 stores matrices between objects of one type as ``<distances2>`` elements; a matrix a user
adds carries the kind bit FROM_USER (2) and says what it means (MEANS_LATENCY 4, MEANS_BANDWIDTH 8).
hwloc's values are unsigned integers with no unit, so pinlab names its matrices after their unit:

- ``PinlabCPULatency``: between PUs (``type="PU"``, by OS index), the one-way core-to-core latency
  in picoseconds (nanoseconds would round away the differences that matter between close cores);
- ``PinlabNUMABandwidth``: between NUMA nodes, row = the node whose CPUs read, column = the node
  read, in MB/s;
- ``PinlabNUMALatency``: the same rows and columns, memory latency in picoseconds.

A file written so is still an ordinary hwloc file: ``lstopo -i FILE.xml`` reads it and keeps the
matrices when it exports it again, and every pinlab command given ``--topology FILE.xml`` finds them.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pinlab.errors import UsageError
from pinlab.topology.model import CpuLatency, NumaDistances

KIND_FROM_USER, KIND_MEANS_LATENCY, KIND_MEANS_BANDWIDTH = 2, 4, 8
CPU_LATENCY = "PinlabCPULatency"
NUMA_BANDWIDTH = "PinlabNUMABandwidth"
NUMA_LATENCY = "PinlabNUMALatency"
PICOSECONDS_PER_NS = 1000
#: hwloc writes at most this many numbers per <indexes>/<u64values> element; we do the same.
_PER_ELEMENT = 10

_PINLAB_MATRIX = re.compile(r'[ \t]*<distances2\b[^>]*\bname="Pinlab[A-Za-z]*"[^>]*>.*?</distances2>[ \t]*\n?', re.S)


def _element(obj_type: str, name: str, kind: int, indexes: list[int], values: list[int]) -> str:
    """One ``<distances2>`` element in hwloc's own layout (``length`` = characters of the text)."""
    lines = [f'  <distances2 type="{obj_type}" nbobjs="{len(indexes)}" kind="{kind}" name="{name}" indexing="os">']
    for tag, numbers in (("indexes", indexes), ("u64values", values)):
        for start in range(0, len(numbers), _PER_ELEMENT):
            text = "".join(f"{n} " for n in numbers[start:start + _PER_ELEMENT])
            lines.append(f'    <{tag} length="{len(text)}">{text}</{tag}>')
    lines.append("  </distances2>")
    return "\n".join(lines) + "\n"


def cpu_latency_element(latency: CpuLatency) -> str:
    values = [max(0, round(v * PICOSECONDS_PER_NS)) for row in latency.matrix for v in row]
    return _element("PU", CPU_LATENCY, KIND_FROM_USER | KIND_MEANS_LATENCY, list(latency.cpus), values)


def numa_elements(nodes: list[int], bandwidth_mbps: list[list[float]], latency_ns: list[list[float]]) -> str:
    """The node x node bandwidth (MB/s) and latency (ps) matrices; rows = reading node, columns = node read."""
    bandwidth = [max(0, round(v)) for row in bandwidth_mbps for v in row]
    latency = [max(0, round(v * PICOSECONDS_PER_NS)) for row in latency_ns for v in row]
    return (_element("NUMANode", NUMA_BANDWIDTH, KIND_FROM_USER | KIND_MEANS_BANDWIDTH, list(nodes), bandwidth)
            + _element("NUMANode", NUMA_LATENCY, KIND_FROM_USER | KIND_MEANS_LATENCY, list(nodes), latency))


def with_measurements(xml: str, elements: str) -> str:
    """``xml`` with pinlab's earlier matrices removed and ``elements`` added before ``</topology>``."""
    text = _PINLAB_MATRIX.sub("", xml)
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
            raise UsageError(f"{source}: malformed measured CPU latency matrix ({count} PUs announced, {len(indexes)} indexes, "
                             f"{len(values)} values); measure it again with `pinlab calibrate -o FILE.xml`")
        matrix = [[values[i * count + j] / PICOSECONDS_PER_NS for j in range(count)] for i in range(count)]
        return CpuLatency(cpus=indexes, matrix=matrix)
    return None


def measured_numa(distances: list[NumaDistances]) -> tuple[NumaDistances | None, NumaDistances | None]:
    """pinlab's measured (bandwidth MB/s, latency ps) node matrices among a topology's matrices."""
    bandwidth = next((d for d in distances if d.name == NUMA_BANDWIDTH), None)
    latency = next((d for d in distances if d.name == NUMA_LATENCY), None)
    return bandwidth, latency
