"""One domain of CPUs (and GPUs) for each MPI rank on a node.

Without GPUs, the node's allowed CPUs are split by the biggest objects whose number fits the
rank count: NUMA nodes first, then packages, then shared caches (L3, L2). When R ranks meet D
such objects and R divides D, each rank gets D/R whole objects, in order; when D divides R,
each object is shared by R/D ranks and split again inside, by the same rule. Otherwise the
CPUs are cut into contiguous blocks of whole cores (the first ranks get one core more when the
count does not divide), or of hardware threads when there are more ranks than cores. More ranks
than allowed CPUs is refused.

With GPUs, ranks go next to GPUs (LLNL's mpibind does the same): the GPU domains are the CPU
sets the GPUs are local to, and the ranks are shared among them in proportion to their GPUs.
A GPU domain holding several ranks is split among them by the rule above, and its GPUs too
(whole GPUs when there are at least as many GPUs as ranks, else each GPU shared by consecutive
ranks). With fewer ranks than GPU domains, each rank takes consecutive whole domains with all
their GPUs. CPUs local to no GPU are left unused, and said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.ranks.gpus import Gpu, visible_devices
from pinlab.topology.model import Topology
from pinlab.words import plural

SPLIT_LEVELS = ("NUMANode", "Package", "L3", "L2")
_LEVEL_WORDS = {"NUMANode": "NUMA node", "Package": "package", "L3": "L3 cache", "L2": "L2 cache"}


@dataclass
class RankDomain:
    """The part of the node local rank ``rank`` owns: its CPUs, their NUMA nodes, its GPUs, and
    how it was cut (``how``: e.g. ``NUMA node 1``, ``2 L3 caches``, ``cores``)."""

    rank: int
    cpus: frozenset[int]
    nodes: frozenset[int]
    how: str
    gpus: list[Gpu] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The variables that show the rank its GPUs."""
        return visible_devices(self.gpus) if self.gpus else {}

    def to_json(self) -> dict:
        return {
            "rank": self.rank,
            "cpus": format_cpulist(self.cpus),
            "nodes": sorted(self.nodes),
            "how": self.how,
            "gpus": [g.name for g in self.gpus],
            "env": self.env,
        }


@dataclass
class NodeSplit:
    """A node split among ``ranks`` local ranks; ``unused``: allowed CPUs no rank got."""

    topology: Topology
    domains: list[RankDomain]
    gpus: list[Gpu]
    unused: frozenset[int] = frozenset()
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "ranks": len(self.domains),
            "topology": self.topology.name,
            "domains": [d.to_json() for d in self.domains],
            "gpus": [g.to_json() for g in self.gpus],
            "unused_cpus": format_cpulist(self.unused),
            "notes": self.notes,
        }


def split_node(topo: Topology, ranks: int, gpus: list[Gpu] | None = None, *, chosen: bool = False) -> NodeSplit:
    """Split ``topo``'s allowed CPUs among ``ranks`` local ranks; with ``gpus`` (a non-empty
    list), next to the GPUs (see the module's docstring). ``chosen``: ``gpus`` are some of the
    node's GPUs, picked by the user, which the notice of unused CPUs names."""
    if ranks < 1:
        raise UsageError(f"the number of ranks must be at least 1 (got {ranks})")
    allowed = topo.allowed_cpus
    if ranks > len(allowed):
        raise UsageError(
            f"{ranks} local ranks but only {plural(len(allowed), 'allowed CPU')} on {topo.name} ({format_cpulist(allowed)}): run fewer ranks per node"
        )
    if gpus:
        return _split_with_gpus(topo, ranks, gpus, chosen)
    parts = split_cpus(topo, allowed, ranks)
    domains = [RankDomain(r, cpus, _nodes_of(topo, cpus), how) for r, (cpus, how) in enumerate(parts)]
    return NodeSplit(topo, domains, [])


def split_cpus(topo: Topology, cpus: frozenset[int], ranks: int) -> list[tuple[frozenset[int], str]]:
    """``cpus`` cut into ``ranks`` parts, each with how it was cut, by the module's rule."""
    if ranks > len(cpus):
        raise UsageError(f"{ranks} ranks cannot share {plural(len(cpus), 'CPU')} ({format_cpulist(cpus)}) one CPU each at least")
    if ranks == 1:
        return [(cpus, _describe(topo, cpus))]
    for level in _shared_levels(topo):
        objects = _partition(topo, level, cpus)
        if objects is None or len(objects) < 2:
            continue
        count = len(objects)
        if count % ranks == 0:
            each = count // ranks
            groups = [frozenset().union(*objects[r * each : (r + 1) * each]) for r in range(ranks)]
            return [(g, _describe(topo, g)) for g in groups]
        if ranks % count == 0 and all(len(_units(topo, o, ranks // count)) >= ranks // count for o in objects):
            return [part for o in objects for part in split_cpus(topo, o, ranks // count)]
    return _blocks(topo, cpus, ranks)


def _partition(topo: Topology, level: str, cpus: frozenset[int]) -> list[frozenset[int]] | None:
    """The parts of ``cpus`` in the objects of ``level``, in order, when they cut it into pieces
    of equal size (in cores): None otherwise. NUMA nodes that share their CPUs (a DDR node and
    an HBM node of the same cores) count once; parts of unequal size (a restricted allowed set
    that leaves 4 cores of one node and 1 of the other) would give ranks unequal shares, and
    contiguous blocks of cores do better."""
    parts: list[frozenset[int]] = []
    for obj in topo.objects(level):
        part = obj.cpus & cpus
        if part and part not in parts:
            parts.append(part)
    if sum(len(p) for p in parts) != len(cpus):
        return None  # overlapping objects: not a partition
    sizes = {len(_units(topo, p, 1)) for p in parts}
    return parts if len(sizes) == 1 else None


def _shared_levels(topo: Topology) -> list[str]:
    """The levels of SPLIT_LEVELS this machine has whose objects hold more than one core (an L2
    of one core splits nothing that cores do not)."""
    levels = []
    for level in SPLIT_LEVELS:
        objects = topo.objects(level)
        if objects and len(objects) < len(topo.cores):
            levels.append(level)
    return levels


_DESCRIBE_ORDER = ("Package", "NUMANode", "L3", "L2")


def _units(topo: Topology, cpus: frozenset[int], ranks: int) -> list[frozenset[int]]:
    """The units ``cpus`` is cut into for ``ranks`` ranks: whole cores while there are enough,
    else hardware threads; in logical order."""
    cores: dict[int, set[int]] = {}
    for pu in topo.pus:
        if pu.os_index in cpus:
            cores.setdefault(id(topo.core_of(pu)), set()).add(pu.os_index)
    if len(cores) >= ranks:
        return [frozenset(c) for c in cores.values()]
    return [frozenset((pu.os_index,)) for pu in topo.pus if pu.os_index in cpus]


def _blocks(topo: Topology, cpus: frozenset[int], ranks: int) -> list[tuple[frozenset[int], str]]:
    units = _units(topo, cpus, ranks)
    size, extra = divmod(len(units), ranks)
    parts, start = [], 0
    for r in range(ranks):
        end = start + size + (1 if r < extra else 0)
        block = frozenset().union(*units[start:end])
        parts.append((block, _describe(topo, block, block=True)))
        start = end
    return parts


def _describe(topo: Topology, cpus: frozenset[int], block: bool = False) -> str:
    """What ``cpus`` is, in hwloc's words: the fewest whole objects that make it (``NUMA node 1``,
    ``packages 0-1``, ``L3 cache 2``), else ``4 cores of NUMA node 0`` (its smallest container)."""
    levels = [level for level in _DESCRIBE_ORDER if level in _shared_levels(topo)]
    allowed = topo.allowed_cpus
    best = None
    for level in levels:
        whole = [o for o in topo.objects(level) if o.cpus & allowed and (o.cpus & allowed) <= cpus]
        if whole and frozenset().union(*(o.cpus & allowed for o in whole)) == cpus and (best is None or len(whole) < len(best[1])):
            best = (level, whole)
    if best is not None and not block:
        level, whole = best
        ids = [_number(level, o) for o in whole]
        return f"{_LEVEL_WORDS[level]}{'s' if len(ids) > 1 else ''} {format_cpulist(ids)}"
    container = next(
        (f" of {_LEVEL_WORDS[level]} {_number(level, o)}" for level in reversed(levels) for o in topo.objects(level) if cpus <= o.cpus), ""
    )
    cores = {id(topo.core_of(topo.pu(c))): topo.core_of(topo.pu(c)) for c in cpus}
    if all((core.cpus & allowed) <= cpus for core in cores.values()):
        return f"{plural(len(cores), 'core')}{container}"
    return f"{plural(len(cpus), 'hardware thread')}{container}"


def _number(level: str, obj) -> int:
    """How users name an object: NUMA nodes and packages by OS index, caches by logical index."""
    return obj.os_index if level in ("NUMANode", "Package") and obj.os_index is not None else obj.logical_index


def _nodes_of(topo: Topology, cpus: frozenset[int]) -> frozenset[int]:
    return frozenset(n for c in cpus for n in topo.pu(c).nodes)


def _split_with_gpus(topo: Topology, ranks: int, gpus: list[Gpu], chosen: bool) -> NodeSplit:
    # GPU domains: the distinct (allowed) localities, in order, each with its GPUs
    domains: list[tuple[frozenset[int], list[Gpu]]] = []
    for gpu in gpus:
        if not gpu.cpus:
            continue  # local to no CPU this process may use
        for cpus, held in domains:
            if cpus == gpu.cpus:
                held.append(gpu)
                break
        else:
            domains.append((gpu.cpus, [gpu]))
    if not domains:
        raise UsageError(
            f"none of the {plural(len(gpus), 'GPU')} of {topo.name} is local to a CPU this process may use "
            f"({format_cpulist(topo.allowed_cpus)}); leave --gpus out or allow their CPUs"
        )
    # overlapping localities (a GPU local to the whole machine beside GPUs local to one socket):
    # the narrower ones keep their CPUs, the wider domain keeps what is left
    domains.sort(key=lambda d: (len(d[0]), min(d[0])))
    taken: frozenset[int] = frozenset()
    disjoint = []
    for cpus, held in domains:
        rest = cpus - taken
        if rest:
            disjoint.append((rest, held))
            taken |= rest
        else:
            disjoint[-1][1].extend(held)
    disjoint.sort(key=lambda d: min(d[0]))
    result: list[RankDomain] = []
    notes: list[str] = []
    count = len(disjoint)
    if ranks < count:
        for r in range(ranks):
            chunk = disjoint[r * count // ranks : (r + 1) * count // ranks]
            cpus = frozenset().union(*(c for c, _ in chunk))
            result.append(RankDomain(r, cpus, _nodes_of(topo, cpus), _describe(topo, cpus), [g for _, held in chunk for g in held]))
    else:
        per_domain = _shares(ranks, [len(held) for _, held in disjoint], [len(_units(topo, c, 1 << 30)) for c, _ in disjoint])
        r = 0
        for (cpus, held), k in zip(disjoint, per_domain):
            parts = split_cpus(topo, cpus, k)
            for j, (part, how) in enumerate(parts):
                if k <= len(held):
                    mine = held[j * len(held) // k : (j + 1) * len(held) // k]
                else:
                    mine = [held[j * len(held) // k]]
                result.append(RankDomain(r, part, _nodes_of(topo, part), how, mine))
                r += 1
    unused = topo.allowed_cpus - frozenset().union(*(d.cpus for d in result))
    if unused:
        which = f"none of the chosen GPUs ({','.join(g.name for g in gpus)})" if chosen else "no GPU"
        notes.append(f"CPUs {format_cpulist(unused)} are local to {which}: no rank runs there")
    return NodeSplit(topo, result, gpus, unused, notes)


def _shares(ranks: int, weights: list[int], room: list[int]) -> list[int]:
    """``ranks`` shared among domains in proportion to ``weights`` (their GPUs): each at least
    one, none more than its ``room`` (CPUs); each next rank goes to the domain furthest below its
    proportional share that has room, the earlier on ties. ``ranks`` is at least the number of
    domains."""
    if ranks > sum(room):
        raise UsageError(f"{ranks} ranks do not fit next to the GPUs: their CPUs hold {sum(room)}")
    total = sum(weights)
    counts = [1] * len(weights)
    for _ in range(ranks - len(counts)):
        open_ = [i for i in range(len(counts)) if counts[i] < room[i]]
        i = max(open_, key=lambda i: (ranks * weights[i] / total - counts[i], -i))
        counts[i] += 1
    return counts
