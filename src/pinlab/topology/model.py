"""The machine as one tree of objects, in hwloc's model.

Every object has a type (``Package``, ``L3Cache``, ``Core``, ``PU``...), a depth in the tree, a
logical index (its rank among objects of the same kind, in tree order, as lstopo's ``L#``) and,
where the OS numbers it, an OS index (lstopo's ``P#``), the set of PUs below it (``cpus``, OS
indexes, the numbers Linux, taskset and numactl use) and whether this process may use it.

NUMA nodes are *memory children*: they hang off the CPU object whose PUs are local to them
(hwloc 2's model), so the CPU tree stays a strict hierarchy while a NUMA node may sit above,
at, or below the package level.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

#: Types whose objects carry an OS index that means something to the user.
OS_NUMBERED = frozenset({"Machine", "Package", "Die", "NUMANode", "Core", "PU"})


@dataclass(eq=False)
class TopoObject:
    """One node of the topology tree (a machine, package, die, group, cache, core, PU or NUMA node)."""

    type: str
    os_index: int | None = None
    attributes: dict[str, int | str] = field(default_factory=dict)
    infos: dict[str, str] = field(default_factory=dict)
    parent: TopoObject | None = field(default=None, repr=False)
    children: list[TopoObject] = field(default_factory=list, repr=False)
    memory_children: list[TopoObject] = field(default_factory=list, repr=False)
    cpus: frozenset[int] = frozenset()
    nodes: frozenset[int] = frozenset()
    depth: int = 0
    logical_index: int = 0
    allowed: bool = True

    @property
    def kind(self) -> str:
        """Short, lstopo-style name of the object's level: ``Package``, ``L3``, ``L1d``, ``Core``, ``PU``.

        Objects of the same kind are numbered together by ``logical_index``; this is also the
        name used in domain expressions (``L3_2``) and in the JSON format.
        """
        if self.type.endswith("Cache"):
            level = self.type[1]
            if self.type.endswith("iCache"):
                return f"L{level}i"
            if self.attributes.get("cache_type") == 1:
                return f"L{level}d"
            return f"L{level}"
        if self.type == "Group":
            return f"Group{self.attributes.get('group_depth', 0)}"
        return self.type

    @property
    def is_cache(self) -> bool:
        return self.type.endswith("Cache")

    @property
    def is_data_cache(self) -> bool:
        """A cache that holds data (unified or data-only): the ones that matter for placement."""
        return self.is_cache and "iCache" not in self.type and self.attributes.get("cache_type") != 2

    @property
    def cache_level(self) -> int | None:
        return int(self.type[1]) if self.is_cache else None

    @property
    def label(self) -> str:
        """``Package L#1`` / ``PU L#3 (P#6)``: the name lstopo gives this object."""
        text = f"{self.kind} L#{self.logical_index}"
        if self.os_index is not None and self.type in OS_NUMBERED and self.type != "Machine":
            text += f" (P#{self.os_index})"
        return text

    def walk(self) -> Iterator[TopoObject]:
        """This object and every CPU-side object below it, in tree (logical) order."""
        stack = [self]
        while stack:
            obj = stack.pop()
            yield obj
            stack.extend(reversed(obj.children))

    def ancestor(self, kind: str) -> TopoObject | None:
        """The closest object above (or this object itself) of the given kind or type."""
        obj: TopoObject | None = self
        while obj is not None:
            if obj.kind == kind or obj.type == kind:
                return obj
            obj = obj.parent
        return None

    def __repr__(self) -> str:  # dataclass repr would recurse through the tree
        return f"<{self.label} cpus={sorted(self.cpus)[:8]}{'...' if len(self.cpus) > 8 else ''}>"


@dataclass
class NumaDistances:
    """Relative NUMA distances (``numactl --hardware`` / ACPI SLIT), rows and columns by node OS index."""

    nodes: list[int]
    matrix: list[list[int]]
    name: str = "NUMALatency"
    kind: int = 0  # hwloc's bits: 1 from the OS, 2 from the user, 4 latency, 8 bandwidth

    @property
    def meaning(self) -> str:
        """``latency``, ``bandwidth`` or ``unknown``: what a larger value means (further, or faster)."""
        return "bandwidth" if self.kind & 8 else "latency" if self.kind & 4 or self.name == "NUMALatency" else "unknown"

    def between(self, a: int, b: int) -> int:
        return self.matrix[self.nodes.index(a)][self.nodes.index(b)]


@dataclass
class CpuLatency:
    """Core-to-core latency measured on the machine (``pinlab calibrate``), in nanoseconds.

    Rows and columns by PU OS index (``cpus``); symmetric, zero on the diagonal. Kept apart from
    :class:`NumaDistances` because it is between PUs, not nodes, and in real time units: the
    measured grouping (:mod:`pinlab.topology.measured`) and the cost model read it.
    """

    cpus: list[int]
    matrix: list[list[float]]
    name: str = "PinlabCPULatency"

    def between(self, a: int, b: int) -> float | None:
        """One-way latency between PUs ``a`` and ``b`` in ns, None when either was not measured."""
        index = self._index()
        if a not in index or b not in index:
            return None
        return self.matrix[index[a]][index[b]]

    def _index(self) -> dict[int, int]:
        cached = getattr(self, "_cached_index", None)
        if cached is None:
            cached = {cpu: i for i, cpu in enumerate(self.cpus)}
            object.__setattr__(self, "_cached_index", cached)
        return cached


@dataclass
class MeasuredMemory:
    """Memory performance measured on the machine (``pinlab calibrate``): read bandwidth (MB/s) and
    latency (ns) of each NUMA node's memory (columns, by node OS index) from each initiator (rows:
    a package, given by its set of PUs, read from one of its CPUs). 0 where nothing was measured."""

    nodes: list[int]
    initiators: list[frozenset[int]]
    bandwidth_mbps: list[list[float]]
    latency_ns: list[list[float]]


@dataclass
class CpuKind:
    """A set of PUs of one kind of core (hybrid machines: performance vs efficiency cores).

    ``efficiency`` ranks kinds as hwloc does: 0 is the least powerful, higher is more powerful.
    """

    cpus: frozenset[int]
    efficiency: int
    infos: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.infos.get("CoreType") or self.infos.get("FrequencyBaseMHz") or f"kind{self.efficiency}"


class Topology:
    """A whole machine: the object tree plus what applies to it as a whole.

    Build it with :func:`pinlab.topology.load_topology`; it is not changed afterwards (a smaller
    allowed set means loading again with that set).
    """

    def __init__(
        self,
        root: TopoObject,
        *,
        source: str,
        xml: str,
        allowed_cpus: frozenset[int] | None = None,
        allowed_nodes: frozenset[int] | None = None,
        distances: NumaDistances | list[NumaDistances] | None = None,
        cpu_kinds: list[CpuKind] | None = None,
        cpu_latency: CpuLatency | None = None,
        measured_notes: list[str] | None = None,
        measured_memory: MeasuredMemory | None = None,
    ) -> None:
        self.root = root
        self.source = source
        self.xml = xml
        # Every matrix between NUMA nodes (latency, bandwidth...); ``distances`` is the latency one.
        self.all_distances = [distances] if isinstance(distances, NumaDistances) else list(distances or [])
        self.distances = next((d for d in self.all_distances if d.meaning == "latency"), None)
        self.cpu_kinds = cpu_kinds or []
        # Measured on the machine (pinlab calibrate): the PU latency matrix, and what the measured
        # grouping (pinlab.topology.measured) did to the tree when it was loaded.
        self.cpu_latency = cpu_latency
        self.measured_notes = list(measured_notes or [])
        self.measured_memory = measured_memory
        self._index()
        self.allowed_cpus = self.root.cpus if allowed_cpus is None else frozenset(allowed_cpus) & self.root.cpus
        # A node is allowed when its OS index is in the allowed nodeset (Linux's Mems_allowed),
        # whatever its CPUs: memory-only nodes (MCDRAM, CXL, HBM) and nodes whose CPUs are all
        # outside the cgroup still take memory.
        present = frozenset(self.node_by_os)
        self.allowed_nodes = present if allowed_nodes is None else frozenset(allowed_nodes) & present
        self._mark_allowed()

    # -- building ---------------------------------------------------------------------------
    def _index(self) -> None:
        """Number every object by kind in tree order and build the lookup tables."""
        self.by_kind: dict[str, list[TopoObject]] = {}
        self.numa_nodes: list[TopoObject] = []
        for obj in self.root.walk():
            for node in obj.memory_children:
                node.logical_index = len(self.numa_nodes)
                self.numa_nodes.append(node)
            bucket = self.by_kind.setdefault(obj.kind, [])
            obj.logical_index = len(bucket)
            bucket.append(obj)
        self.by_kind["NUMANode"] = self.numa_nodes
        self.pus: list[TopoObject] = self.by_kind.get("PU", [])
        self.pu_by_os: dict[int, TopoObject] = {pu.os_index: pu for pu in self.pus if pu.os_index is not None}
        self.node_by_os: dict[int, TopoObject] = {n.os_index: n for n in self.numa_nodes if n.os_index is not None}

    def _mark_allowed(self) -> None:
        for obj in self.root.walk():
            obj.allowed = bool(obj.cpus & self.allowed_cpus)
        for node in self.numa_nodes:
            node.allowed = node.os_index in self.allowed_nodes

    # -- queries ------------------------------------------------------------------------------
    def objects(self, kind: str) -> list[TopoObject]:
        """All objects of a kind (``Package``, ``L3``, ``Core``, ``PU``, ``NUMANode``...), logical order."""
        if kind in self.by_kind:
            return self.by_kind[kind]
        return [o for k, objs in self.by_kind.items() for o in objs if o.type == kind]

    @property
    def packages(self) -> list[TopoObject]:
        return self.objects("Package")

    @property
    def cores(self) -> list[TopoObject]:
        return self.objects("Core")

    def kinds(self) -> list[str]:
        """The kinds present, from the top of the tree down (Machine first, PU last)."""
        seen: dict[str, int] = {}
        for obj in self.root.walk():
            seen.setdefault(obj.kind, obj.depth)
        return sorted(seen, key=lambda k: seen[k])

    def data_caches(self) -> list[str]:
        """Kinds of data caches present, outermost (highest level) first: ``['L3', 'L2', 'L1d']``."""
        kinds = {o.kind: o.cache_level for objs in self.by_kind.values() for o in objs[:1] if o.is_data_cache}
        return sorted(kinds, key=lambda k: -kinds[k])

    def core_of(self, pu: TopoObject) -> TopoObject:
        """The core a PU belongs to (the PU itself where the topology has no Core level)."""
        return pu.ancestor("Core") or pu

    def pu(self, os_index: int) -> TopoObject:
        return self.pu_by_os[os_index]

    @property
    def name(self) -> str:
        return self.root.infos.get("PinlabPreset") or self.root.infos.get("HostName") or self.source

    def summary(self) -> dict[str, int]:
        """Counts of the objects that matter for placement, and how many PUs are allowed."""
        return {
            "packages": len(self.objects("Package")),
            "dies": len(self.objects("Die")),
            "numa_nodes": len(self.numa_nodes),
            "cores": len(self.cores) or len(self.pus),
            "pus": len(self.pus),
            "allowed_pus": len(self.allowed_cpus),
            "allowed_numa_nodes": len(self.allowed_nodes),
        }
