"""The application-independent strategies and the names of all strategies.

Each strategy is a function (topology, threads, options) -> the CPU of each thread, thread i on
``cpus[i]``, over the units of :mod:`pinlab.placement.units`; :func:`pinlab.placement.registry.place`
turns a strategy's name into a Placement.
"""

from __future__ import annotations

import random as _random

from pinlab.errors import UsageError
from pinlab.placement.units import (
    capacities,
    check_threads,
    first_allowed_pu,
    no_room,
    share,
    take,
    units_under,
)
from pinlab.topology.model import Topology, TopoObject

STRATEGIES = ("compact", "scatter", "random", "none", "intra-socket", "inter-socket", "autonuma")
#: Strategies that leave the threads where the operating system puts them (no CPUs): ``autonuma``
#: also switches the kernel's automatic NUMA balancing on for the run (pinlab.memory.autonuma).
UNPINNED = ("none", "autonuma")
#: Strategies that place by an affinity graph (pinlab.placement.mapping); they need ``graph=``.
GRAPH_STRATEGIES = ("lp-compact", "lp-scatter", "gp", "lpgp", "gplp", "treematch")
ALIASES = {"close": "compact", "spread": "scatter", "os": "none", "intra": "intra-socket", "inter": "inter-socket"}


def canonical_strategy(name: str, explicit_hint: bool = True) -> str:
    name = name.strip().lower()
    name = ALIASES.get(name, name)
    if name not in STRATEGIES and name not in GRAPH_STRATEGIES:
        raise UsageError(
            f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)} "
            f"(aliases: {', '.join(f'{a}={b}' for a, b in ALIASES.items())})"
            + (f", with --graph FILE one of {', '.join(GRAPH_STRATEGIES)}, or give CPUs with -c" if explicit_hint else "")
        )
    return name


# -- the strategies ------------------------------------------------------------------------------
def compact(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """Thread i+1 as close as possible to thread i: fill a core's threads (with smt), then a cache
    domain, then a package, before moving to the next (the logical order of the tree)."""
    check_threads(n)
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    return take(units, n, oversubscribe, no_room(topo, n, len(units), smt))


def _spread(topo: Topology, obj: TopoObject, n: int, cap: dict[int, int], smt: bool) -> list[int]:
    """Divide ``n`` threads down the tree from ``obj`` (hwloc_distrib's recursive division)."""
    if n == 0:
        return []
    if n == cap[id(obj)]:  # every unit below is taken: they come in tree order
        return [u.os_index for u in units_under(topo, obj, smt)]
    if obj.type == "PU":
        return [obj.os_index]
    if obj.type == "Core" and not smt:
        pu = first_allowed_pu(topo, obj)
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
    cap = capacities(topo, smt)
    root = within or topo.root
    available = cap[id(root)]
    if n <= available:
        return _spread(topo, root, n, cap, smt)
    spread_all = _spread(topo, root, available, cap, smt)
    return take(spread_all, n, oversubscribe, no_room(topo, n, available, smt))


def random(topo: Topology, n: int, seed: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """A random fixed placement: a random choice of distinct units in random order, a function of the seed alone."""
    check_threads(n)
    units = [u.os_index for u in units_under(topo, topo.root, smt)]
    rng = _random.Random(seed)
    order = rng.sample(units, len(units))
    return take(order, n, oversubscribe, no_room(topo, n, len(units), smt))


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
    return take(largest, n, oversubscribe, no_room(topo, n, len(largest), smt, where=" in any one package"))


def inter_socket(topo: Topology, n: int, smt: bool = False, oversubscribe: bool = False) -> list[int]:
    """One thread per package in turn (round-robin); within a package, threads spread over its caches."""
    check_threads(n)
    cap = capacities(topo, smt)
    sockets = [s for s in _sockets(topo) if cap[id(s)] > 0]
    available = sum(cap[id(s)] for s in sockets)
    if n > available and not oversubscribe:
        raise no_room(topo, n, available, smt)
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
    return take(order, n, oversubscribe, no_room(topo, n, available, smt))
