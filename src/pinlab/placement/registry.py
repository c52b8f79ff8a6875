"""The strategy registry: a strategy's name -> a Placement, whichever module computes it.

:mod:`pinlab.placement.strategies` holds the application-independent strategies and
:mod:`pinlab.placement.mapping` the graph strategies; this module is the one place that knows
both, so neither imports the other.
"""

from __future__ import annotations

import random as _random
from typing import Callable

from pinlab.errors import UsageError
from pinlab.placement import strategies
from pinlab.placement.mapping import map_threads
from pinlab.placement.plan import Placement
from pinlab.placement.strategies import GRAPH_STRATEGIES, UNPINNED, canonical_strategy
from pinlab.placement.units import check_threads
from pinlab.topology.model import Topology

#: The strategies that need only (topology, threads, smt, oversubscribe).
FIXED: dict[str, Callable[..., list[int]]] = {
    "compact": strategies.compact,
    "scatter": strategies.scatter,
    "intra-socket": strategies.intra_socket,
    "inter-socket": strategies.inter_socket,
}


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
    ``domains`` (use only that many sockets) and, for gp, ``level``; see pinlab.placement.mapping.
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
        cpus = map_threads(topo, name, graph, threads, smt=smt, domains=domains, level=level, seed=seed or 0)
    elif name in UNPINNED:
        cpus = None
    elif name == "random":
        if seed is None:
            seed = _random.SystemRandom().randrange(2**32)
        cpus = strategies.random(topo, threads, seed, smt, oversubscribe)
    else:
        cpus = FIXED[name](topo, threads, smt, oversubscribe)
    return Placement(
        strategy=name, threads=threads, cpus=cpus, topology=topo, smt=smt, oversubscribe=oversubscribe, seed=seed if name == "random" else None
    )
