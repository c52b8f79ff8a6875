"""CPU selections written the way HPC users already write them.

- A CPU list of OS numbers, as taskset and numactl take it: ``0,2,4-7``.
- Domain expressions in likwid-pin's style: ``DOMAIN[:INDEXES]``, several joined with ``@``.
  A domain is ``N`` (the whole node), ``S<i>`` (package/socket), ``D<i>`` (die), ``M<i>``
  (NUMA node), ``C<i>`` (last-level cache), ``L<k>_<i>`` (level-k cache, e.g. ``L3_2``),
  ``G<i>`` (hwloc group). For ``M`` ``<i>`` is the node's OS number (numactl's, ``--mem``'s,
  /sys's and numa_maps' node i); for the others it is the domain's logical index (lstopo's
  ``L#``), as likwid numbers sockets and caches.
- ``DOMAIN:INDEXES`` and ``L:DOMAIN:INDEXES`` (likwid's logical numbering; ``L:INDEXES`` is
  domain N) select among the domain's allowed CPUs ordered physical cores first: the first PU
  of each core in order, then the second PUs, and so on; so ``S1:0-3`` is the first four cores
  of socket 1. Without INDEXES the whole domain is taken (one PU per core unless smt).
- ``E:DOMAIN:COUNT[:CHUNK:STRIDE]``: likwid's selection function, over the domain's hardware
  threads in hardware order (each core's PUs next to each other): COUNT of them, CHUNK
  consecutive ones every STRIDE positions. ``E:N:8:1:2`` on a machine with two PUs per core is
  the first eight physical cores; without CHUNK and STRIDE the first COUNT hardware threads.
- ``<letter>:scatter`` (``S:scatter``, ``M:scatter``, ``D:scatter``, ``C:scatter``): every
  allowed CPU once, dealt round-robin over all domains of that kind, each domain's CPUs physical
  cores first (likwid's scatter): sockets ``0,4,1,5`` and ``2,6,3,7`` give ``0,2,1,3,4,6,5,7``.
  NUMA nodes over the same CPUs (DDR and MCDRAM or HBM nodes of one quadrant) are one domain.
- Where the topology has no Die objects, ``D`` domains are the packages (one die per package,
  as likwid counts them).
"""

from __future__ import annotations

import re

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.topology.model import Topology, TopoObject

_DOMAIN = re.compile(r"^(N|S([0-9]+)|D([0-9]+)|M([0-9]+)|C([0-9]+)|G([0-9]+)|L([0-9])_([0-9]+))$", re.ASCII)


def domain_object(topo: Topology, name: str) -> TopoObject:
    """The topology object a domain name designates."""
    m = _DOMAIN.match(name)
    if not m:
        raise UsageError(
            f"unknown domain {name!r}: use N, S<i> (socket), D<i> (die), M<i> (NUMA node), C<i> (last-level cache), "
            "L<k>_<i> (cache level k), G<i> (group), e.g. S1:0-3"
        )
    if name == "N":
        return topo.root
    letter = name[0]
    if letter == "L":
        kinds = [k for k in topo.data_caches() if k.startswith(f"L{m.group(7)}")]
        if not kinds:
            raise UsageError(f"domain {name}: this topology has no level-{m.group(7)} cache (levels: {', '.join(topo.data_caches()) or 'none'})")
        objects, index = topo.objects(kinds[0]), int(m.group(8))
    elif letter == "C":
        caches = topo.data_caches()
        if not caches:
            raise UsageError(f"domain {name}: this topology describes no cache")
        objects, index = topo.objects(caches[0]), int(m.group(5))
    elif letter == "M":
        index = int(m.group(4))
        if not topo.numa_nodes:
            raise UsageError(f"domain {name}: this topology has no NUMANode objects")
        if index not in topo.node_by_os:
            raise UsageError(
                f"domain {name}: there is no NUMA node {index} (M<i> is the OS node number, as numactl and /sys "
                f"name it; this machine's nodes: {format_cpulist(topo.node_by_os)})"
            )
        return topo.node_by_os[index]
    elif letter == "D":
        kind, objects, index = "Die", _dies(topo), int(m.group(3))
    else:
        kind = {"S": "Package", "G": "Group"}[letter]
        objects = topo.objects(kind) if kind != "Group" else [o for o in topo.root.walk() if o.type == "Group"]
        index = int(next(g for g in m.groups()[1:] if g is not None))
    if not objects:
        raise UsageError(f"domain {name}: this topology has no {kind} objects")
    if index >= len(objects):
        raise UsageError(f"domain {name} does not exist: this topology has {len(objects)} ({letter}0-{letter}{len(objects) - 1})")
    return objects[index]


def _dies(topo: Topology) -> list[TopoObject]:
    """The dies of ``D`` domains: hwloc's Die objects, or, where the topology has none (hwloc
    reports dies only where the processor says how many it has), one die per package, as likwid
    counts them."""
    return topo.objects("Die") or topo.objects("Package")


def domain_cpus(topo: Topology, obj: TopoObject) -> list[int]:
    """The allowed CPUs of a domain in likwid's order: each core's first PU, then each core's second PU, ..."""
    pus = [pu for pu in topo.pus if pu.os_index in topo.allowed_cpus and pu.os_index in obj.cpus]
    rank: dict[int, int] = {}
    ordered = []
    for pu in pus:
        core = topo.core_of(pu)
        sibling = rank.get(id(core), 0)
        rank[id(core)] = sibling + 1
        ordered.append((sibling, pu.logical_index, pu.os_index))
    return [cpu for _, _, cpu in sorted(ordered)]


def hardware_order(topo: Topology, obj: TopoObject) -> list[int]:
    """The allowed CPUs of a domain in hardware order: the PUs in tree (logical) order, so each
    core's hardware threads are next to each other (what likwid's E: expressions count in)."""
    return [pu.os_index for pu in topo.pus if pu.os_index in topo.allowed_cpus and pu.os_index in obj.cpus]


_SCATTER_KINDS = {"S": "Package", "M": "NUMANode", "D": "Die", "C": None}


def _scatter(topo: Topology, letter: str, part: str) -> list[int]:
    """``S:scatter`` and friends: all domains' CPUs (physical cores first) dealt round-robin."""
    if letter not in _SCATTER_KINDS:
        raise UsageError(f"malformed expression {part!r}: scatter works over S, M, D or C domains, e.g. S:scatter or M:scatter")
    if letter == "C":
        caches = topo.data_caches()
        domains = topo.objects(caches[0]) if caches else []
    elif letter == "D":
        domains = _dies(topo)
    else:
        domains = topo.objects(_SCATTER_KINDS[letter])
    # Domains over the same CPUs (a DDR and a high-bandwidth NUMA node attached to the same cores)
    # are one place to deal to; a CPU in several overlapping domains is dealt once, at its first turn.
    lists = list({tuple(cpus): cpus for cpus in (domain_cpus(topo, d) for d in domains) if cpus}.values())
    if not lists:
        raise UsageError(f"{part}: this topology has no {letter} domain with a CPU this process may use")
    dealt: dict[int, None] = {}
    for position in range(max(len(cpus) for cpus in lists)):
        dealt.update((cpus[position], None) for cpus in lists if position < len(cpus) and cpus[position] not in dealt)
    return list(dealt)


def _allowed_domain_cpus(topo: Topology, name: str, *, hardware: bool = False) -> list[int]:
    """A domain's allowed CPUs (likwid's logical order, or hardware order); a domain with none is an error that says so."""
    obj = domain_object(topo, name)
    cpus = hardware_order(topo, obj) if hardware else domain_cpus(topo, obj)
    if not cpus:
        raise UsageError(f"domain {name} has no CPU this process may use (allowed CPUs: {format_cpulist(topo.allowed_cpus)}); choose another domain")
    return cpus


def _one_per_core(topo: Topology, cpus: list[int]) -> list[int]:
    seen: set[int] = set()
    result = []
    for cpu in cpus:
        core = id(topo.core_of(topo.pu(cpu)))
        if core not in seen:
            seen.add(core)
            result.append(cpu)
    return result


def _select(topo: Topology, part: str, smt: bool) -> list[int]:
    if part.startswith("E:"):
        fields = part.split(":")
        if len(fields) not in (3, 5) or not all(re.fullmatch(r"[0-9]+", f) for f in fields[2:]):
            raise UsageError(f"malformed expression {part!r}: use E:DOMAIN:COUNT or E:DOMAIN:COUNT:CHUNK:STRIDE, e.g. E:S0:4:1:2")
        cpus = _allowed_domain_cpus(topo, fields[1], hardware=True)
        count = int(fields[2])
        chunk, stride = (int(fields[3]), int(fields[4])) if len(fields) == 5 else (1, 1)
        if count == 0 or chunk == 0 or stride == 0:
            raise UsageError(f"malformed expression {part!r}: COUNT, CHUNK and STRIDE must be at least 1")
        positions: list[int] = []
        start = 0
        while len(positions) < count:
            block = [p for p in range(start, start + chunk) if p < len(cpus)]
            if not block:
                raise UsageError(f"expression {part!r} needs more CPUs than {fields[1]} has allowed ({len(cpus)})")
            positions.extend(block[: count - len(positions)])
            start += stride
        return [cpus[p] for p in positions]
    if part.endswith(":scatter") and part.count(":") == 1:
        return _scatter(topo, part.split(":")[0], part)
    if part.startswith("L:"):  # likwid's logical numbering, which plain DOMAIN:INDEXES also uses
        rest = part[2:]
        part = rest if ":" in rest or not rest[:1].isdigit() else f"N:{rest}"
        if ":" not in part:
            raise UsageError(f"malformed expression {'L:' + rest!r}: use L:INDEXES or L:DOMAIN:INDEXES, e.g. L:N:0-3 or L:S1:0-3")
    name, colon, indexes = part.partition(":")
    cpus = _allowed_domain_cpus(topo, name)
    if not colon:
        return cpus if smt else _one_per_core(topo, cpus)
    chosen = []
    for i in parse_cpulist(indexes, what=f"index list of {name}"):
        if i >= len(cpus):
            raise UsageError(f"{part}: index {i} is out of range, {name} has {len(cpus)} allowed CPUs (indexes 0-{len(cpus) - 1})")
        chosen.append(cpus[i])
    return chosen


def is_cpulist(text: str) -> bool:
    """Domain expressions start with a domain letter; anything starting with a digit is a CPU list."""
    return bool(text) and text[0] in "0123456789"


def resolve(topo: Topology, text: str, smt: bool = False) -> list[int]:
    """CPUs (OS indexes, one per thread in order) selected by a CPU list or domain expression."""
    text = text.strip()
    if not text:
        raise UsageError("empty CPU list: give CPUs such as 0,2,4-7 or a domain expression such as S0:0-3")
    if is_cpulist(text):
        cpus = parse_cpulist(text)
        for cpu in cpus:
            if cpu not in topo.pu_by_os:
                raise UsageError(f"CPU {cpu} does not exist on {topo.name} (its CPUs are {format_cpulist(topo.pu_by_os)})")
            if cpu not in topo.allowed_cpus:
                raise UsageError(
                    f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(topo.allowed_cpus)}); check taskset/cgroup limits"
                )
        return cpus
    cpus = []
    for part in text.split("@"):
        cpus.extend(_select(topo, part.strip(), smt))
    return cpus
