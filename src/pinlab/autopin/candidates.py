"""The placements autopin probes: chosen from the topology, named by strategies, or written out.

``--candidates auto`` (:func:`auto_candidates`) builds a small set of structurally different
placements for the thread count: compact and scatter, one package or several, fewer or more
NUMA nodes, shared or separate caches, SMT siblings or not, P- or E-cores (see
:mod:`pinlab.autopin.explore` for how), keeping one placement per class under the machine's
symmetry (:func:`signature`, :mod:`pinlab.autopin.symmetry`), the most different first.
``-c "0,1;0,2"`` (:func:`parse_candidates`) takes them in the autopin study's style, and
``--strategies compact,scatter`` (:func:`strategy_candidates`) from pinlab's strategies.

A candidate gives one CPU per worker thread, worker 0 being the main thread. The structural
candidates put one worker on each CPU; one more, while there is room, puts two on each of half
as many (:data:`DOUBLED`): threads that share data or wait on each other can run faster so
(1.6 to 4 x for NPB CG on a 2-CPU machine in an independent check), and nothing else probes it.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass

from pinlab.autopin.explore import AVOID, Explorer
from pinlab.autopin.shape import shape
from pinlab.autopin.symmetry import away_from, signature
from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.placement import make_placement, strategies
from pinlab.placement.expressions import is_cpulist, resolve
from pinlab.placement.kinds import restrict_to_kind
from pinlab.topology.model import Topology

__all__ = ["DOUBLED", "Candidate", "auto_candidates", "parse_candidates", "signature", "strategy_candidates"]

#: The name of the candidate with two threads on each CPU.
DOUBLED = "2 threads per CPU"


@dataclass(frozen=True)
class Candidate:
    """One placement to probe: a short name and one CPU (OS number) per worker thread."""

    name: str
    cpus: tuple[int, ...]

    def describe(self, topo: Topology) -> str:
        """Where it sits: ``2 packages (2 threads each), 4 L2 caches (1 thread each), no SMT sharing``."""
        return shape(topo, self.cpus).describe()


# -- from the topology -----------------------------------------------------------------------------
def auto_candidates(
    topo: Topology,
    threads: int,
    *,
    max_candidates: int = 8,
    cpu_kind: str | None = None,
    smt: bool | None = None,
    doubled: bool | None = None,
) -> list[Candidate]:
    """Structurally different placements of ``threads`` threads on the allowed CPUs, most different first.

    The first are compact and scatter (as :mod:`pinlab.placement.strategies` places them, on
    CPUs away from CPU 0 where an equivalent placement allows), then, when the threads fit on
    separate cores and ``smt`` is None, one placement putting threads on SMT siblings (if the
    machine has SMT; ``smt=False`` leaves it out, ``smt=True`` explores SMT placements as fully
    as the others), then the rest, each the farthest from those already listed; last, for two
    threads or more, :data:`DOUBLED`: the first candidate's first CPUs, two threads on each
    (``doubled=None``: when there is room left; True: a place kept for it; False: never). At
    most ``max_candidates``. With one thread on a symmetric machine there is a single
    candidate; on a hybrid one, one per kind of core.
    """
    if threads < 1:
        raise UsageError(f"autopin needs at least 1 thread (got {threads})")
    if max_candidates < 1:
        raise UsageError(f"--max-candidates must be at least 1 (got {max_candidates})")
    if cpu_kind is not None:
        topo = restrict_to_kind(topo, cpu_kind)
    by_core, by_pu = Explorer(topo, smt=False), Explorer(topo, smt=True)
    _check_room(topo, threads, by_core.capacity, by_pu.capacity, smt)
    found, smt_extra = _explore(topo, threads, by_core, by_pu, smt)
    named = _named_strategies(topo, threads, found, smt_needed=threads > by_core.capacity)
    ordered = _most_different_first(topo, found, list(named) + smt_extra)
    room = max_candidates - 1 if doubled and threads > 1 and max_candidates > 1 else max_candidates
    made = _name(topo, threads, ordered[:room], found, named, single=len(found) == 1)
    if threads > 1 and doubled is not False and len(made) < max_candidates:
        half = made[0].cpus[: (threads + 1) // 2]
        made.append(Candidate(DOUBLED, tuple(half[i // 2] for i in range(threads))))
    return made


def _explore(topo: Topology, threads: int, by_core: Explorer, by_pu: Explorer, smt: bool | None) -> tuple[dict[Hashable, list[int]], list[Hashable]]:
    """One placement per class (signature -> CPUs, in the order found), and the SMT-siblings one added by default.

    Threads that fit on separate cores are placed one per core. SMT siblings still deserve one
    probe by default: threads sharing data, or held back by memory, may run as fast on the two
    hardware threads of a core and leave other cores free; one candidate tests that without
    doubling the probing. ``smt=True`` explores SMT placements as fully as the others, and past
    the cores' number SMT is the only way.
    """
    fits = threads <= by_core.capacity
    found: dict[Hashable, list[int]] = {}
    for cpus in (by_core if fits else by_pu).explore(threads):
        found.setdefault(signature(topo, cpus), cpus)
    extra: list[Hashable] = []
    if fits and smt is not False and by_pu.capacity > by_core.capacity:
        for cpus in by_pu.explore(threads):
            key = signature(topo, cpus)
            if key in found or not shape(topo, cpus).smt_shared:
                continue
            found[key] = cpus
            if smt is None:
                extra.append(key)
                break
    return found, extra


def _check_room(topo: Topology, threads: int, cores: int, pus: int, smt: bool | None) -> None:
    allowed = format_cpulist(topo.allowed_cpus) or "none"
    if threads > pus:
        raise UsageError(f"{threads} threads but only {pus} CPUs are allowed ({allowed}); autopin pins one thread per CPU: use -n {pus} or fewer")
    if smt is False and threads > cores:
        raise UsageError(
            f"{threads} threads but only {cores} cores are allowed ({allowed}) and SMT siblings are excluded; use -n {cores} or fewer, or allow SMT"
        )


def _named_strategies(topo: Topology, threads: int, found: dict[Hashable, list[int]], smt_needed: bool) -> dict[Hashable, str]:
    """Signatures of compact and scatter (added to ``found`` when the walk did not meet them) -> their names."""
    named: dict[Hashable, str] = {}
    for name, function in (("compact", strategies.compact), ("scatter", strategies.scatter)):
        cpus = away_from(topo, function(topo, threads, smt_needed), AVOID)
        key = signature(topo, cpus)
        found.setdefault(key, cpus)
        named[key] = f"{named[key]} = {name}" if key in named else name
    return named


def _most_different_first(topo: Topology, found: dict[Hashable, list[int]], first: list[Hashable]) -> list[Hashable]:
    """``first`` as given, then greedily the placement farthest from every one already listed."""
    features = {key: shape(topo, cpus).features() for key, cpus in found.items()}
    ordered = list(dict.fromkeys(first))
    rest = [key for key in found if key not in ordered]

    def distance(a: Hashable, b: Hashable) -> float:
        return sum(abs(x - y) for x, y in zip(features[a], features[b]))

    while rest:
        best = max(rest, key=lambda key: min((distance(key, done) for done in ordered), default=0.0))  # first of ties
        ordered.append(best)
        rest.remove(best)
    return ordered


def _name(
    topo: Topology, threads: int, keys: list[Hashable], found: dict[Hashable, list[int]], named: dict[Hashable, str], single: bool
) -> list[Candidate]:
    """Candidates named by strategy or by shape; candidates whose names clash get longer ones, as
    long as needed to tell them apart (threads per domain, then sizes of the domains, then CPUs)."""
    if single and threads == 1:
        return [Candidate("1 thread, every core alike (symmetric machine)", tuple(found[keys[0]]))]
    shapes = {key: shape(topo, found[key]) for key in keys}

    def short(key: Hashable) -> str:
        if threads == 1:  # compact and scatter coincide; the kind of core, or the domain, tells them apart
            return "1 thread" + (f", {shapes[key].kinds[0]}-core" if shapes[key].kinds else "")
        return named.get(key) or shapes[key].name()

    def sizes(key: Hashable) -> str:
        per_level = zip((level for level, _ in shapes[key].loads), shapes[key].sizes)
        return (
            short(key)
            + " in "
            + ", ".join(
                f"{level.noun} of {'+'.join(map(str, counts))} core{'s' if max(counts) > 1 else ''}"
                for level, counts in per_level
                if level.kind != "Core" and counts
            )
        )

    ways = [short, lambda key: shapes[key].describe(), sizes, lambda key: f"{sizes(key)}, CPUs {format_cpulist(found[key])}"]
    names = {key: short(key) for key in keys}
    for name in set(names.values()):
        group = [key for key in keys if names[key] == name]
        for way in ways[1:] if len(group) > 1 else ():
            labels = [way(key) for key in group]
            if len(set(labels)) == len(labels):
                break
        else:
            continue
        names.update(zip(group, labels))
    return [Candidate(names[key], tuple(found[key])) for key in keys]


# -- written out ----------------------------------------------------------------------------------
def parse_candidates(text: str, topo_or_allowed: Topology | Collection[int], threads: int | None) -> list[Candidate]:
    """Candidates in the autopin study's style, ``;`` between them: ``0,1;0,2;4-5``.

    With a topology each candidate may also be a domain expression (``S0:0-3``, ``M1``, see
    :mod:`pinlab.placement.expressions`); with only a set of allowed CPUs, CPU lists. With
    ``threads`` each candidate gives its first ``threads`` CPUs (it must have that many);
    without, all candidates must have the same size, which is the thread count. A CPU may be
    listed twice in a candidate: those threads share it.
    """
    if threads is not None and threads < 1:
        raise UsageError(f"autopin needs at least 1 thread (got {threads})")
    if not text.strip():
        raise UsageError("no candidates given: write CPU lists separated by ';', e.g. --candidates '0,1;0,2'")
    parts = [part.strip() for part in text.split(";")]
    lists = [_one_candidate(part, k, text, topo_or_allowed) for k, part in enumerate(parts, 1)]
    if threads is None:
        sizes = {len(cpus) for cpus in lists}
        if len(sizes) > 1:
            listed = ", ".join(f"{len(cpus)} in candidate {k}" for k, cpus in enumerate(lists, 1))
            raise UsageError(f"candidates have different numbers of CPUs ({listed}); give the thread count (-n) or make them the same size")
    for k, cpus in enumerate(lists, 1):
        if threads is not None and len(cpus) < threads:
            raise UsageError(f"more threads than candidate {k} has CPUs: {threads} threads, candidate {k} ({parts[k - 1]!r}) has {len(cpus)}")
    # A plain CPU list is named "CPUs 0,1" (a bare "0" would read as a number in the verdicts);
    # a domain expression keeps its own words.
    kept = [tuple(cpus[:threads] if threads else cpus) for cpus in lists]
    return [
        Candidate(f"CPUs {part if len(cpus) == len(full) else ','.join(map(str, cpus))}" if is_cpulist(part) else part, cpus)
        for part, full, cpus in zip(parts, lists, kept)
    ]


def _one_candidate(part: str, k: int, text: str, where: Topology | Collection[int]) -> list[int]:
    if not part:
        raise UsageError(f"malformed candidates {text!r}: candidate {k} is empty; write one CPU list per candidate separated by ';', e.g. 0,1;0,2")
    try:
        if isinstance(where, Topology):
            cpus = resolve(where, part)
        else:
            cpus = parse_cpulist(part, what=f"candidate {k}")
            allowed = frozenset(where)
            for cpu in cpus:
                if cpu not in allowed:
                    raise UsageError(f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(allowed)})")
    except UsageError as error:
        raise UsageError(f"candidate {k} ({part!r}): {error}") from None
    # A CPU listed twice is kept: threads sharing a CPU on purpose is a placement worth probing
    # (the autopin study's question "both threads on one core, or one each?").
    return cpus


# -- from strategies -------------------------------------------------------------------------------
def strategy_candidates(
    topo: Topology,
    names: Sequence[str] | Iterable[str],
    threads: int,
    *,
    smt: bool = False,
    cpu_kind: str | None = None,
    seed: int | None = None,
    graph=None,
) -> list[Candidate]:
    """One candidate per named strategy (``compact``, ``scatter``, ``inter-socket``, and with
    ``graph`` the graph strategies ``lpgp``, ``treematch``...), in the order given; strategies that
    place the threads identically are probed once, under both names."""
    wanted = [word.strip() for name in names for word in name.split(",") if word.strip()]
    if not wanted:
        raise UsageError("no strategies given: name some, e.g. --strategies compact,scatter")
    result: dict[tuple[int, ...], str] = {}
    for word in wanted:
        name = strategies.canonical_strategy(word, explicit_hint=False)
        if name in strategies.UNPINNED:
            raise UsageError(f"strategy {name} leaves the threads to the OS, it is no pinning autopin can probe; leave it out")
        mapped = graph if name in strategies.GRAPH_STRATEGIES else None
        placement = make_placement(topo, strategy=name, threads=threads, smt=smt, cpu_kind=cpu_kind, seed=seed, graph=mapped)
        cpus = tuple(placement.cpus or ())
        if cpus in result:
            if name not in result[cpus].split(" = "):
                result[cpus] = f"{result[cpus]} = {name}"
        else:
            result[cpus] = name
    return [Candidate(name, cpus) for cpus, name in result.items()]
