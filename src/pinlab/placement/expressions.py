"""CPU selections written the way HPC users already write them.

- A CPU list of OS numbers, as taskset and numactl take it: ``0,2,4-7``.
- Domain expressions in likwid-pin's style: ``DOMAIN[:INDEXES]``, several joined with ``@``.
  A domain is ``N`` (the whole node), ``S<i>`` (package/socket), ``D<i>`` (die), ``M<i>``
  (NUMA node), ``C<i>`` (last-level cache), ``L<k>_<i>`` (level-k cache, e.g. ``L3_2``),
  ``G<i>`` (hwloc group). ``<i>`` is the domain's logical index (lstopo's ``L#``).
  INDEXES select among the domain's allowed CPUs ordered as likwid does: first PU of each core
  in order, then the second PUs, and so on; so ``S1:0-3`` is the first four cores of socket 1.
  Without INDEXES the whole domain is taken (one PU per core unless smt).
- ``E:DOMAIN:COUNT[:CHUNK:STRIDE]``: COUNT CPUs from the domain, CHUNK consecutive ones every
  STRIDE positions (likwid's expression syntax): ``E:N:4:1:2`` is positions 0,2,4,6.
"""
from __future__ import annotations

import re

from pinlab.errors import UsageError
from pinlab.topology.cpuset import format_cpulist, parse_cpulist
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
    else:
        kind = {"S": "Package", "D": "Die", "M": "NUMANode", "G": "Group"}[letter]
        objects = topo.objects(kind) if kind != "Group" else [o for o in topo.root.walk() if o.type == "Group"]
        index = int(next(g for g in m.groups()[1:] if g is not None))
        if not objects:
            raise UsageError(f"domain {name}: this topology has no {kind} objects")
    if index >= len(objects):
        raise UsageError(f"domain {name} does not exist: this topology has {len(objects)} ({letter}0-{letter}{len(objects) - 1})")
    return objects[index]


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


def _allowed_domain_cpus(topo: Topology, name: str) -> list[int]:
    """A domain's allowed CPUs (likwid order); a domain with none is an error that says so."""
    cpus = domain_cpus(topo, domain_object(topo, name))
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
        cpus = _allowed_domain_cpus(topo, fields[1])
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
                raise UsageError(f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(topo.allowed_cpus)}); check taskset/cgroup limits")
        return cpus
    cpus = []
    for part in text.split("@"):
        cpus.extend(_select(topo, part.strip(), smt))
    return cpus
