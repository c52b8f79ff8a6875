"""Launching programs pinned: ``pinlab run`` and its Python API :func:`run`.

Kept light: nothing here imports hwloc-backed topology code unless the plan needs it (a
strategy, a domain expression, nested cache domains), and nothing imports scipy, pandas or
matplotlib.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.graph import load_graph
from pinlab.launch import memory
from pinlab.launch.record import RunRecord, ThreadRecord
from pinlab.launch.runner import LaunchSpec, ProgramNotExecutable, ProgramNotFound, parse_skip
from pinlab.launch.runner import run as launch
from pinlab.measure import linux
from pinlab.measure.counters import parse_events, probe
from pinlab.measure.linux import check_cpus
from pinlab.memory.balance import INTERVAL as BALANCE_INTERVAL
from pinlab.memory.balance import BalanceController
from pinlab.placement import Placement, make_placement
from pinlab.placement.expressions import is_cpulist
from pinlab.placement.plan import explicit_placement_json, plan_cpus, read_placement_file
from pinlab.placement.strategies import ALIASES, GRAPH_STRATEGIES, STRATEGIES, canonical_strategy
from pinlab.placement.units import take
from pinlab.ranks.launch import RankPlan, domain_placement, no_domain_memory, rank_memory, this_rank
from pinlab.topology import load_topology

__all__ = ["LaunchSpec", "ProgramNotExecutable", "ProgramNotFound", "RunRecord", "ThreadRecord", "plan_spec", "run"]

NESTED_DOMAINS = ("numa", "cache")


def _nested_domains(kind: str | None) -> list[frozenset[int]] | None:
    """The domains nested teams stay in: NUMA nodes (from sysfs) or last-level cache domains (hwloc)."""
    if kind is None:
        return None
    allowed = frozenset(os.sched_getaffinity(0))
    if kind == "numa":
        # Only the CPUs this process may use: a nested thread must never land outside them.
        return [cpus & allowed for cpus in linux.numa_nodes().values() if cpus & allowed]
    if kind == "cache":
        topo = load_topology("this")
        caches = topo.data_caches()
        if not caches:
            raise UsageError("--nested inherit:cache: hwloc reports no cache on this machine; use inherit:numa")
        return [obj.cpus & allowed for obj in topo.objects(caches[0]) if obj.cpus & allowed]
    raise UsageError(f"unknown nested domain {kind!r}: use --nested inherit (NUMA node) or inherit:cache")


BALANCE_DATA = ("attached", "accessed")


def plan_spec(
    argv: Sequence[str],
    *,
    strategy: str | None = None,
    threads: int | None = None,
    cpus: str | Sequence[int] | None = None,
    plan_file: str | None = None,
    placement: Placement | None = None,
    smt: bool = False,
    oversubscribe: bool = False,
    seed: int | None = None,
    cpu_kind: str | None = None,
    mem: str | None = None,
    overflow: str = "wrap",
    children: str = "next",
    skip: str | Sequence[int] | None = None,
    nested: str | None = None,
    no_aslr: bool = False,
    clean_env: bool = False,
    thp: str | None = None,
    sample_ms: float | None = 100.0,
    env: dict[str, str] | None = None,
    counters: str | Sequence[str] | None = None,
    graph: Any = None,
    domains: int | None = None,
    level: str | None = None,
    balance: float | bool | None = None,
    balance_interval: float | None = None,
    balance_data: str | None = None,
    rank: str | None = None,
    gpus: str | None = None,
) -> LaunchSpec:
    """Turn the user's choices into a :class:`LaunchSpec`, checking everything before anything runs.

    ``graph`` (an AffinityGraph or a graph file's path), ``domains`` and ``level`` are for the
    graph strategies (lpgp, treematch...; see pinlab.placement.mapping). ``balance``: True (or the
    seconds between looks) for an idle node to steal threads and their data (pinlab.memory.balance);
    ``balance_data``: ``attached`` (the default: data attached through libpinlab-mem) or
    ``accessed`` (also the pages each stolen thread mostly accessed, from the page tracer).
    ``rank``: the MPI rank context as ``pinlab run --rank`` reads it (auto, off, LOCAL/COUNT; None
    is off): the plan is placed inside the rank's part of the node, next to its GPUs with ``gpus``.
    """
    _check_sample_ms(sample_ms)
    if balance_interval is not None:
        if not balance:
            raise UsageError("--balance-interval sets how often --balance looks: give --balance too")
        balance = balance_interval
    rank_plan = this_rank(rank or "off", gpus)
    if rank_plan is None:
        no_domain_memory(mem)
    else:
        if isinstance(graph, (str, os.PathLike)):
            graph = load_graph(os.fspath(graph))
        options = dict(strategy=strategy, threads=threads, cpus=cpus, smt=smt, oversubscribe=oversubscribe, seed=seed, cpu_kind=cpu_kind)
        placement, mem = _rank_placement(rank_plan, {**options, "graph": graph, "domains": domains, "level": level}, plan_file, mem)
        strategy = cpus = cpu_kind = graph = domains = level = None
        threads = placement.threads if placement is not None else threads
        env = rank_plan.env(os.environ if env is None else env)
    chosen = [x for x in (strategy, cpus, plan_file, placement) if x is not None]
    if len(chosen) > 1:
        raise UsageError("give one placement: -s STRATEGY -n THREADS, -c CPUS, or --plan FILE")
    if threads is not None and threads < 1:
        raise UsageError(f"THREADS must be at least 1 (got {threads})")
    if thp not in (None, "never", "always"):
        raise UsageError(f"unknown --thp {thp!r}: use never or always")
    notices: list[str] = []
    plan, planned, threads = _plan(
        strategy,
        threads,
        cpus,
        plan_file,
        placement,
        dict(smt=smt, oversubscribe=oversubscribe, seed=seed, cpu_kind=cpu_kind),
        dict(graph=graph, domains=domains, level=level),
        notices,
    )
    if planned is not None and rank_plan is None:
        # A rank's CPUs were placed inside its part of the node, which an MPI launcher's binding
        # of the rank (narrower than the job's CPUs) does not limit: pinlab replaces that binding.
        check_cpus(planned)
    if mem is None and plan is not None and plan.get("mem") is not None:
        mem = _plan_memory(plan["mem"], planned)
    policy = memory.parse_policy(mem)
    follow_nodes = _follow_nodes(policy, planned)
    balance_interval = _balance(balance, balance_data, planned)
    nested_kind = _nested_kind(nested, planned)
    wanted = None
    if counters is not None:
        wanted = probe(parse_events(counters if isinstance(counters, str) else ",".join(counters)))
    return LaunchSpec(
        rank_plan=rank_plan,
        rank=None if rank_plan is None else rank_plan.record(),
        domain_cpus=None if rank_plan is None else rank_plan.domain.cpus,
        numa_balancing=True if plan is not None and plan.get("strategy") == "autonuma" else None,
        balance=balance_interval,
        balance_data=balance_data or "attached",
        controller=None if balance_interval is None or planned is None else BalanceController(planned, balance_interval, balance_data or "attached"),
        counters=wanted,
        argv=list(argv),
        cpus=planned,
        threads=threads,
        plan=plan,
        mem=policy,
        overflow=overflow,
        children=children,
        skip=parse_skip(skip) if isinstance(skip, str) or skip is None else tuple(int(s) for s in skip),
        nested_domains=_nested_domains(nested_kind),
        follow_nodes=follow_nodes,
        no_aslr=no_aslr,
        clean_env=clean_env,
        thp=thp,
        sample_ms=sample_ms,
        env=env,
        notices=notices,
    )


def _check_sample_ms(sample_ms: float | None) -> None:
    """How often the threads' CPUs are sampled: more than never, at most hourly."""
    if sample_ms is not None and not (isinstance(sample_ms, (int, float)) and 0 < sample_ms <= 3_600_000):
        shown = f"{sample_ms:g}" if isinstance(sample_ms, (int, float)) else repr(sample_ms)
        raise UsageError(f"--sample-ms must be a positive number of milliseconds, at most one hour (got {shown})")


def _plan(
    strategy, threads, cpus, plan_file, placement, choices: dict, graph_options: dict, notices: list[str]
) -> tuple[dict[str, Any] | None, list[int] | None, int | None]:
    """The plan (its JSON), its CPUs and its thread count, from the one placement given (None:
    unpinned); a plan file made on another machine is resolved here, said in ``notices``."""
    cpu_kind, oversubscribe = choices["cpu_kind"], choices["oversubscribe"]
    graph, domains, level = graph_options["graph"], graph_options["domains"], graph_options["level"]
    plan: dict[str, Any] | None
    if cpu_kind is not None and (plan_file is not None or placement is not None or (cpus is not None and not isinstance(cpus, str))):
        raise UsageError("--cpu-kind narrows a strategy or a CPU expression: it does not apply to a given plan")
    if graph is not None or domains is not None or level is not None:
        if strategy is None or canonical_strategy(strategy) not in GRAPH_STRATEGIES:
            raise UsageError(f"--graph, --domains and --level go with a graph strategy: use -s {' or '.join(GRAPH_STRATEGIES)}")
    if plan_file is not None:
        plan = read_placement_file(plan_file)
        planned, threads = plan["cpus"], threads or plan["threads"]
        if plan.get("portable") is not None and planned is not None:
            planned, moved = plan_cpus(plan, load_topology("this"), f"plan file {plan_file}")
            if moved is not None:
                plan = {**plan, "cpus": planned}
                notices.append(moved)
    elif isinstance(cpus, str) and is_cpulist(cpus.strip()) and cpu_kind is None:
        planned, threads = _listed(cpus, threads, oversubscribe)
        plan = explicit_placement_json(threads, planned, cpus)
    elif cpus is not None and not isinstance(cpus, str):
        planned = [int(c) for c in cpus]
        if not planned:
            raise UsageError("an explicit placement needs at least one CPU")
        threads = threads or len(planned)
        plan = explicit_placement_json(threads, planned)
    elif strategy is not None or cpus is not None or placement is not None:
        if placement is None:
            if isinstance(graph, (str, os.PathLike)):
                graph = load_graph(os.fspath(graph))
            placement = make_placement(
                load_topology("this"), strategy=strategy, threads=threads, cpus=cpus, **choices, **{**graph_options, "graph": graph}
            )
        plan, planned, threads = placement.to_json(), placement.cpus, placement.threads
    else:
        plan, planned = None, None
    return plan, planned, threads


def _plan_memory(kind: str, planned: list[int] | None) -> str:
    """A plan file's memory policy (``interleave`` or ``bind``) over the NUMA nodes of its CPUs
    here (every allowed node with CPUs this process may use, for an unpinned plan), as --mem says it."""
    node_of = linux.node_of_cpus()
    cpus = planned if planned is not None else sorted(os.sched_getaffinity(0))
    nodes = sorted({node_of[c] for c in cpus if c in node_of} & set(linux.mems_allowed())) or sorted(linux.mems_allowed())
    return f"{kind}:{','.join(map(str, nodes))}"


def _listed(cpus: str, threads: int | None, oversubscribe: bool) -> tuple[list[int], int]:
    """A plain CPU list needs no topology: checked against the kernel's CPUs and our mask."""
    listed = parse_cpulist(cpus)
    if not oversubscribe and len(set(listed)) != len(listed):
        repeated = next(c for c in listed if listed.count(c) > 1)
        raise UsageError(f"CPU {repeated} is listed twice in {cpus!r}; use --oversubscribe to let threads share it")
    threads = threads or len(listed)
    more = UsageError(f"{threads} threads but {cpus!r} lists only {len(listed)} CPUs; list more or use --oversubscribe")
    return take(listed, threads, oversubscribe, more), threads


def _follow_nodes(policy: memory.MemPolicy, planned: list[int] | None) -> list[int] | None:
    """--mem follow: each planned CPU's nearest memory node, in plan order."""
    if policy.kind != "follow":
        return None
    if planned is None:
        raise UsageError("--mem follow binds each pinned thread's memory to its CPU's node: it needs a placement (-s, -c or --plan)")
    node_of = linux.node_of_cpus()
    memory_of = {node: memory.nearest_memory_node(node) for node in set(node_of.values())}
    return [memory_of[node_of[cpu]] if cpu in node_of else 0 for cpu in planned]


def _balance(balance: float | bool | None, balance_data: str | None, planned: list[int] | None) -> float | None:
    """--balance's seconds between looks (None: off), checked with what it moves."""
    balance_interval = None
    if balance is not None and balance is not False:
        balance_interval = BALANCE_INTERVAL if balance is True else float(balance)
        if not 0.01 <= balance_interval <= 3600:
            raise UsageError(f"--balance-interval must be between 0.01 and 3600 seconds (got {balance})")
        if planned is None:
            raise UsageError(
                "--balance moves pinned threads between NUMA nodes: it needs a pinned placement (-s STRATEGY other than none or autonuma, -c or --plan)"
            )
    if balance_data is not None:
        if balance_interval is None:
            raise UsageError("--balance-data says what moves with the threads --balance steals: give --balance too")
        if balance_data not in BALANCE_DATA:
            raise UsageError(f"unknown --balance-data {balance_data!r}: use attached or accessed")
    return balance_interval


def _nested_kind(nested: str | None, planned: list[int] | None) -> str | None:
    """--nested inherit[:numa|cache]: the kind of domain nested threads stay in (None: off)."""
    nested_kind = None
    if nested not in (None, "off"):
        head, _, domain = nested.partition(":")
        if head != "inherit":
            raise UsageError(f"unknown --nested {nested!r}: use inherit, inherit:numa or inherit:cache")
        nested_kind = domain or "numa"
        if planned is None:
            raise UsageError("--nested inherit needs a placement (-s, -c or --plan)")
    return nested_kind


def _rank_placement(rank_plan: RankPlan, options: dict, plan_file: str | None, mem: str | None) -> tuple[Placement | None, str | None]:
    """In a rank context: the placement of -s/-c inside the rank's domain (None: the program
    stays on the domain's CPUs, unpinned within), and --mem for that domain."""
    if plan_file is not None:
        raise UsageError(
            "--plan gives fixed CPUs for the whole node: in a rank context give -s STRATEGY or -c CPUS, "
            "placed inside the rank's part of the node (or --rank off)"
        )
    placement = None
    if options["strategy"] is not None or options["cpus"] is not None:
        placement = domain_placement(rank_plan.topology, rank_plan.domain, len(rank_plan.split.domains), options)
    elif options["cpu_kind"] is not None:
        raise UsageError("--cpu-kind narrows a strategy: add -s STRATEGY (e.g. -s compact)")
    return placement, rank_memory(mem, rank_plan.domain)


def run(
    argv: Sequence[str],
    placement: Placement | Sequence[int] | str | None = None,
    *,
    threads: int | None = None,
    mem: str | None = None,
    **options: Any,
) -> RunRecord:
    """Run a program pinned and return its :class:`RunRecord` (its output passes through).

    ``placement`` is a :class:`~pinlab.placement.Placement`, a list of CPUs, a CPU list or domain
    expression (``"0,2"``, ``"S0:0-3"``), a strategy name (with ``threads``), or None for no
    pinning. Other options are those of ``pinlab run`` (``overflow``, ``skip``, ``nested``,
    ``no_aslr``, ``clean_env``, ``thp``, ``sample_ms``, ``env``, ``counters``). Raises
    :class:`~pinlab.errors.UsageError` on bad input and :class:`ProgramNotFound` /
    :class:`ProgramNotExecutable` when the program cannot be started.
    """
    kwargs: dict[str, Any] = {}
    if placement is None:
        pass
    elif isinstance(placement, str):
        key = "strategy" if placement in STRATEGIES or placement in ALIASES else "cpus"
        kwargs[key] = placement
    elif isinstance(placement, Sequence):
        kwargs["cpus"] = list(placement)
    else:
        kwargs["placement"] = placement
    known = set(inspect.signature(plan_spec).parameters) - {"argv", "threads", "mem", "placement"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(
            f"pinlab.run: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"the options are those of plan_spec: {', '.join(sorted(known))}"
        )
    return launch(plan_spec(argv, threads=threads, mem=mem, **kwargs, **options))
