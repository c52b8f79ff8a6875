"""Units and capacities: what one thread may occupy, how many fit below an object, and the
division of threads over children by capacity, shared by every placement strategy.

A *unit* is a physical core (represented by its first allowed PU), so no two threads share a
core; with ``smt=True`` a unit is a PU (hardware thread). Only allowed CPUs are ever units.
"""

from __future__ import annotations

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.topology.model import Topology, TopoObject


def units_under(topo: Topology, obj: TopoObject, smt: bool) -> list[TopoObject]:
    """Allowed units below ``obj``, in logical (tree) order: cores' first PUs, or every PU with smt."""
    allowed = topo.allowed_cpus
    found: list[TopoObject] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if o.type == "PU":
            if o.os_index in allowed:
                found.append(o)
        elif o.type == "Core" and not smt:
            pu = first_allowed_pu(topo, o)
            if pu is not None:
                found.append(pu)
        else:
            stack.extend(reversed(o.children))
    return found


def first_allowed_pu(topo: Topology, core: TopoObject) -> TopoObject | None:
    """The core's first allowed PU in tree order, however deep: caches may sit between a core
    and its PUs (an L1 per hardware thread on CPUID leaf 0x1F parts, some AMD/Hygon, QEMU guests)."""
    stack = [core]
    while stack:
        obj = stack.pop()
        if obj.type == "PU":
            if obj.os_index in topo.allowed_cpus:
                return obj
        else:
            stack.extend(reversed(obj.children))
    return None


def capacities(topo: Topology, smt: bool) -> dict[int, int]:
    """Number of units below every object (keyed by id), computed in one bottom-up pass."""
    cap: dict[int, int] = {}
    allowed = topo.allowed_cpus

    def count(obj: TopoObject) -> int:
        if obj.type == "PU":
            total = 1 if obj.os_index in allowed else 0
        elif obj.type == "Core" and not smt:
            total = 1 if first_allowed_pu(topo, obj) is not None else 0
        else:
            total = sum(count(child) for child in obj.children)
        cap[id(obj)] = total
        return total

    count(topo.root)
    return cap


def smt_would_help(topo: Topology, smt: bool) -> bool:
    """Whether --smt would give more units: some allowed core has two or more allowed PUs.

    Only then is --smt worth suggesting; on a machine without SMT it changes nothing.
    """
    return not smt and len(topo.allowed_cpus) > len(units_under(topo, topo.root, False))


def no_room(topo: Topology, n: int, available: int, smt: bool, where: str = "", oversubscribe: bool = True, more: str = "") -> UsageError:
    """The error of every placement that has fewer units than threads, worded once for all strategies.

    ``where`` narrows the count (" on 2 sockets"); ``oversubscribe`` is False for the strategies
    that cannot share a CPU (the graph strategies), which then do not suggest it; ``more`` is one
    more way out of the strategy's own ("more --domains"). --smt is suggested only where it adds units.
    """
    unit = "hardware threads (PUs)" if smt else "cores"
    hints = ["fewer threads"] + ([more] if more else []) + (["--oversubscribe to share CPUs"] if oversubscribe else [])
    if smt_would_help(topo, smt):
        hints.append("--smt to also use hardware threads")
    hint = ", ".join(hints[:-1]) + ", or " + hints[-1] if len(hints) > 1 else hints[0]
    return UsageError(
        f"{n} threads but only {available} {unit} are available{where} (allowed CPUs: {format_cpulist(topo.allowed_cpus) or 'none'}); use {hint}"
    )


def take(candidates: list[int], n: int, oversubscribe: bool, error: UsageError) -> list[int]:
    """The first ``n`` candidates; past the end, wrap round-robin if oversubscription is allowed."""
    if n <= len(candidates):
        return candidates[:n]
    if not oversubscribe or not candidates:
        raise error
    return [candidates[i % len(candidates)] for i in range(n)]


def check_threads(n: int) -> None:
    if n <= 0:
        raise UsageError(f"THREADS must be at least 1 (got {n})")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def share(n: int, capacities: list[int]) -> list[int]:
    """Split ``n`` threads over children in proportion to their capacities (hwloc_distrib's rule).

    Child j gets ceil(C(j+1) n / C) - ceil(C(j) n / C) threads, where C(j) is the capacity of
    the children before it and C the total: its share of n by capacity, rounded so that the
    counts add up to n, the first children rounded up first. A child never gets more than its
    capacity (when n <= C), children of equal capacity differ by at most one, and a child twice
    as large gets about twice as many: on an irregular tree (a group of three packages beside a
    lone one) every package gets its part, where equal shares per child would crowd the lone
    package and starve the others. With equal capacities this is an even split, larger counts
    first and evenly spaced.
    """
    total = sum(capacities)
    if n > total:
        raise ValueError("more threads than capacity")
    if total == 0:
        return [0] * len(capacities)
    counts, before = [], 0
    for capacity in capacities:
        counts.append(ceil_div((before + capacity) * n, total) - ceil_div(before * n, total))
        before += capacity
    return counts
