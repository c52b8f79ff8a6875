"""Placements on one kind of core of a hybrid processor (P-cores only, E-cores only).

Strategies see a hybrid machine as one tree: compact and scatter would mix fast and slow cores
in one team, and a team runs at its slowest member's pace. ``--cpu-kind`` narrows the CPUs a
placement may use to one kind, as hwloc records them (``<cpukind>``, hwloc 2.4+), before any
strategy or expression runs.
"""

from __future__ import annotations

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import CpuKind, Topology

# Words for the most and the least efficient kind (hwloc ranks kinds by efficiency, 0 = least).
PERFORMANCE = ("performance", "p", "p-cores", "big")
EFFICIENCY = ("efficiency", "e", "e-cores", "little")


def choose_kind(topo: Topology, word: str) -> CpuKind:
    """The kind ``word`` names: performance/P, efficiency/E, hwloc's kind name (IntelCore,
    IntelAtom...), or an efficiency rank; a word that names none is an error listing the kinds."""
    kinds = sorted(topo.cpu_kinds, key=lambda k: k.efficiency)
    described = ", ".join(f"{k.name} (efficiency {k.efficiency}: CPUs {format_cpulist(k.cpus)})" for k in kinds)
    if len(kinds) < 2:
        raise UsageError(
            f"--cpu-kind {word}: {topo.name} has a single kind of core (hwloc records kinds on hybrid processors, "
            "hwloc 2.4 or later); leave --cpu-kind out"
        )
    wanted = word.strip().lower()
    if wanted in PERFORMANCE:
        return kinds[-1]
    if wanted in EFFICIENCY:
        return kinds[0]
    for kind in kinds:
        if kind.name.lower() == wanted or (wanted.isdigit() and kind.efficiency == int(wanted)):
            return kind
    raise UsageError(
        f"unknown --cpu-kind {word!r}: use performance (P), efficiency (E), a kind's name or its efficiency rank; this machine's kinds: {described}"
    )


def restrict_to_kind(topo: Topology, word: str) -> Topology:
    """The same machine with only the CPUs of one kind allowed (loaded again, as a narrower cgroup would be)."""
    kind = choose_kind(topo, word)
    allowed = topo.allowed_cpus & kind.cpus
    if not allowed:
        raise UsageError(
            f"--cpu-kind {word}: none of the {kind.name} CPUs ({format_cpulist(kind.cpus)}) is allowed for this process "
            f"(allowed: {format_cpulist(topo.allowed_cpus)})"
        )
    return parse_xml(topo.xml, source=topo.source, narrow_cpus=allowed, narrow_nodes=topo.allowed_nodes)
