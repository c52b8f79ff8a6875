"""Application-independent placement strategies: pure functions (topology, threads, options) -> Placement.

Vocabulary: a *unit* is what one thread may occupy. By default a unit is a physical core
(represented by its first allowed PU), so no two threads share a core; with ``smt=True`` a unit
is a PU (hardware thread). Only allowed CPUs are ever units.
"""
from __future__ import annotations

import random as _random

from pinlab.errors import UsageError
from pinlab.placement.plan import Placement
from pinlab.topology.cpuset import format_cpulist
from pinlab.topology.model import Topology, TopoObject

STRATEGIES = ("compact", "scatter", "random", "none", "intra-socket", "inter-socket", "autonuma")
#: Strategies that leave the threads where the operating system puts them (no CPUs): ``autonuma``
#: also switches the kernel's automatic NUMA balancing on for the run (pinlab.memory.autonuma).
UNPINNED = ("none", "autonuma")
#: Strategies that place by an affinity graph (pinlab.graph.mapping); they need ``graph=``.
GRAPH_STRATEGIES = ("lp-compact", "lp-scatter", "gp", "lpgp", "gplp", "treematch")
ALIASES = {"close": "compact", "spread": "scatter", "os": "none", "intra": "intra-socket", "inter": "inter-socket"}


def canonical_strategy(name: str, explicit_hint: bool = True) -> str:
    name = name.strip().lower()
    name = ALIASES.get(name, name)
    if name not in STRATEGIES and name not in GRAPH_STRATEGIES:
        raise UsageError(
            f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)} "
            f"(aliases: {', '.join(f'{a}={b}' for a, b in ALIASES.items())})" + (f", with --graph FILE one of {', '.join(GRAPH_STRATEGIES)}, or give CPUs with -c" if explicit_hint else "")
        )
    return name


# -- units ---------------------------------------------------------------------------------------
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
            pu = _first_allowed_pu(topo, o)
            if pu is not None:
                found.append(pu)
        else:
            stack.extend(reversed(o.children))
    return found


def _first_allowed_pu(topo: Topology, core: TopoObject) -> TopoObject | None:
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


def _capacities(topo: Topology, smt: bool) -> dict[int, int]:
    """Number of units below every object (keyed by id), computed in one bottom-up pass."""
    cap: dict[int, int] = {}
    allowed = topo.allowed_cpus

    def count(obj: TopoObject) -> int:
        if obj.type == "PU":
            total = 1 if obj.os_index in allowed else 0
        elif obj.type == "Core" and not smt:
            total = 1 if _first_allowed_pu(topo, obj) is not None else 0
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


def _no_room(topo: Topology, n: int, available: int, smt: bool, where: str = "") -> UsageError:
    unit = "hardware threads (PUs)" if smt else "cores"
    hint = "fewer threads, --oversubscribe to share CPUs" + (", or --smt to also use hardware threads" if smt_would_help(topo, smt) else "")
    return UsageError(
        f"{n} threads but only {available} {unit} are available{where} "
        f"(allowed CPUs: {format_cpulist(topo.allowed_cpus) or 'none'}); use {hint}"
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


# -- the strategies ------------------------------------------------------------------------------
def compact(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """Thread i+1 as close as possible to thread i: fill a core's threads (with smt), then a cache
    domain, then a package, before moving to the next (the logical order of the tree)."""
    check_threads(n)
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    return take(units, n, oversubscribe, _no_room(topo, n, len(units), smt))


def _ceil_div(a: int, b: int) -> int:
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
        counts.append(_ceil_div((before + capacity) * n, total) - _ceil_div(before * n, total))
        before += capacity
    return counts


def _spread(topo: Topology, obj: TopoObject, n: int, cap: dict[int, int], smt: bool) -> list[int]:
    """Divide ``n`` threads down the tree from ``obj`` (hwloc_distrib's recursive division)."""
    if n == 0:
        return []
    if n == cap[id(obj)]:  # every unit below is taken: they come in tree order
        return [u.os_index for u in units_under(topo, obj, smt)]
    if obj.type == "PU":
        return [obj.os_index]
    if obj.type == "Core" and not smt:
        pu = _first_allowed_pu(topo, obj)
        return [pu.os_index] if pu is not None else []
    children = [c for c in obj.children if cap[id(c)] > 0]
    result: list[int] = []
    for child, count in zip(children, share(n, [cap[id(c)] for c in children])):
        result.extend(_spread(topo, child, count, cap, smt))
    return result


def scatter(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False, within: TopoObject | None = None) -> list[int]:
    """Spread threads as evenly as possible over packages, then NUMA nodes, then caches, then
    cores (then hardware threads with smt). Consecutive threads stay close: threads 0..k-1 share
    the first package, and so on, as hwloc_distrib and OMP_PROC_BIND=spread do."""
    check_threads(n)
    cap = _capacities(topo, smt)
    root = within or topo.root
    available = cap[id(root)]
    if n <= available:
        return _spread(topo, root, n, cap, smt)
    spread_all = _spread(topo, root, available, cap, smt)
    return take(spread_all, n, oversubscribe, _no_room(topo, n, available, smt))


def random(topo: Topology, n: int, seed: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """A random fixed placement: a random choice of distinct units in random order, a function of the seed alone."""
    check_threads(n)
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    rng = _random.Random(seed)
    order = rng.sample(units, len(units))
    return take(order, n, oversubscribe, _no_room(topo, n, len(units), smt))


def _sockets(topo: Topology) -> list[TopoObject]:
    return topo.packages or [topo.root]


def intra_socket(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """All threads on sibling cores of one package (the first that has room), compactly."""
    check_threads(n)
    per_socket = [[u.os_index for u in units_under(topo, s, smt)] for s in _sockets(topo)]
    for units in per_socket:
        if len(units) >= n:
            return units[:n]
    largest = max(per_socket, key=len)
    return take(largest, n, oversubscribe, _no_room(topo, n, len(largest), smt, where=" in any one package"))


def inter_socket(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """One thread per package in turn (round-robin); within a package, threads spread over its caches."""
    check_threads(n)
    cap = _capacities(topo, smt)
    sockets = [s for s in _sockets(topo) if cap[id(s)] > 0]
    available = sum(cap[id(s)] for s in sockets)
    if n > available and not oversubscribe:
        raise _no_room(topo, n, available, smt)
    counts = [0] * len(sockets)
    sequence: list[int] = []  # which socket each thread goes to
    i = 0
    while len(sequence) < min(n, available):
        s = i % len(sockets)
        if counts[s] < cap[id(sockets[s])]:
            counts[s] += 1
            sequence.append(s)
        i += 1
    per_socket = [iter(_spread(topo, s, c, cap, smt)) for s, c in zip(sockets, counts)]
    order = [next(per_socket[s]) for s in sequence]
    return take(order, n, oversubscribe, _no_room(topo, n, available, smt))


def place(
    topo: Topology,
    strategy: str,
    threads: int,
    *,
    smt: bool = False,
    oversubscribe: bool = False,
    seed: int | None = None,
    graph=None,
    domains: int | None = None,
    level: str | None = None,
) -> Placement:
    """Compute a placement with a named strategy.

    The graph strategies (GRAPH_STRATEGIES) need ``graph`` (an AffinityGraph or a matrix) and take
    ``domains`` (use only that many sockets) and, for gp, ``level``; see pinlab.graph.mapping.
    """
    name = canonical_strategy(strategy)
    check_threads(threads)
    if not topo.allowed_cpus:
        raise UsageError("no CPU of this topology is allowed for this process; check taskset/cgroup limits")
    if name not in GRAPH_STRATEGIES and (domains is not None or level is not None):
        raise UsageError(f"--domains and --level go with a graph strategy ({', '.join(GRAPH_STRATEGIES)}), not {name}")
    cpus: list[int] | None
    if name in GRAPH_STRATEGIES:
        if graph is None:
            raise UsageError(f"strategy {name} needs --graph FILE (make one with pinlab trace)")
        if oversubscribe:
            raise UsageError(f"strategy {name} gives every thread its own {'PU' if smt else 'core'}: leave --oversubscribe out")
        from pinlab.graph.mapping import map_threads

        cpus = map_threads(topo, name, graph, threads, smt=smt, domains=domains, level=level, seed=seed or 0)
    elif name in UNPINNED:
        cpus = None
    elif name == "random":
        if seed is None:
            seed = _random.SystemRandom().randrange(2**32)
        cpus = random(topo, threads, seed, smt, oversubscribe)
    else:
        function = {"compact": compact, "scatter": scatter, "intra-socket": intra_socket, "inter-socket": inter_socket}[name]
        cpus = function(topo, threads, smt, oversubscribe)
    return Placement(strategy=name, threads=threads, cpus=cpus, topology=topo, smt=smt, oversubscribe=oversubscribe, seed=seed if name == "random" else None)
