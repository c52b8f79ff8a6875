"""Placements: which CPU each thread gets. Strategies, CPU expressions, exports, pictures."""

from __future__ import annotations

from pinlab.errors import UsageError
from pinlab.placement.expressions import resolve
from pinlab.placement.kinds import restrict_to_kind
from pinlab.placement.plan import Placement
from pinlab.placement.registry import place
from pinlab.placement.strategies import GRAPH_STRATEGIES, STRATEGIES, canonical_strategy
from pinlab.placement.units import check_threads, take
from pinlab.topology.model import Topology

__all__ = ["Placement", "STRATEGIES", "make_placement", "place"]


def make_placement(
    topo: Topology,
    *,
    strategy: str | None = None,
    threads: int | None = None,
    cpus: str | None = None,
    smt: bool = False,
    oversubscribe: bool = False,
    seed: int | None = None,
    cpu_kind: str | None = None,
    graph=None,
    domains: int | None = None,
    level: str | None = None,
) -> Placement:
    """A placement from either a strategy and a thread count, or an explicit CPU list/expression.

    With ``cpus``, the threads take the listed CPUs in order; ``threads`` (optional) takes the
    first ones, or wraps round-robin past the end with ``oversubscribe``. With ``cpu_kind``
    (performance, efficiency, or a kind's name) only the CPUs of that kind of core are used.
    ``graph``, ``domains`` and ``level`` go to the graph strategies (see :func:`place`).
    """
    if cpu_kind is not None:
        topo = restrict_to_kind(topo, cpu_kind)
    if cpus is not None and strategy not in (None, "explicit"):
        raise UsageError("give either a strategy (-s) or CPUs (-c), not both")
    if cpus is None:
        if strategy is None:
            raise UsageError("no placement given: use -s STRATEGY -n THREADS or -c CPULIST")
        if graph is None and canonical_strategy(strategy) in GRAPH_STRATEGIES:
            raise UsageError(f"strategy {canonical_strategy(strategy)} needs --graph FILE (make one with pinlab trace)")
        if threads is None and graph is not None:
            threads = graph.threads  # the graph says how many threads it was measured with
        if threads is None:
            raise UsageError(f"strategy {canonical_strategy(strategy)} needs a thread count: add -n THREADS")
        return place(topo, strategy, threads, smt=smt, oversubscribe=oversubscribe, seed=seed, graph=graph, domains=domains, level=level)
    if domains is not None or level is not None:
        raise UsageError(
            "--domains and --level choose a graph strategy's placement: use -s lpgp (or gp, gplp, lp-compact, lp-scatter, treematch) instead of -c"
        )
    selected = resolve(topo, cpus, smt=smt)
    if not oversubscribe:
        seen: set[int] = set()
        for cpu in selected:
            if cpu in seen:
                raise UsageError(f"CPU {cpu} is selected twice in {cpus!r}; use --oversubscribe to let threads share it")
            seen.add(cpu)
    if threads is None:
        threads = len(selected)
    check_threads(threads)
    error = UsageError(f"{threads} threads but {cpus!r} selects only {len(selected)} CPUs; select more or use --oversubscribe")
    chosen = take(selected, threads, oversubscribe, error)
    return Placement(strategy="explicit", threads=threads, cpus=chosen, topology=topo, smt=smt, oversubscribe=oversubscribe, expression=cpus)
