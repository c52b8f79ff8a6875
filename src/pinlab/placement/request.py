"""What ``pinlab place`` is asked for, checked as a whole before anything is computed.

A placement request combines options that make sense only together (a format for the split
among ranks, a picture path, a graph with a strategy that pins): :class:`PlaceRequest` refuses
a combination that does not, in one line, when it is made. The command line builds one from its
options, so that Python callers and the command get the same refusals in the same words, before
a topology is loaded or a graph is read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pinlab.errors import UsageError
from pinlab.graph.model import check_strict
from pinlab.outputs import check_picture
from pinlab.placement import make_placement
from pinlab.placement.exports import FORMATS
from pinlab.placement.plan import Placement, check_on, plan_cpus, read_placement_file
from pinlab.placement.strategies import ALIASES, UNPINNED
from pinlab.topology.model import Topology

#: The formats of the split among ranks (``ranks``): its table, or JSON.
RANK_FORMATS = ("list", "json")


@dataclass(frozen=True)
class PlaceRequest:
    """A placement to compute, print and draw: a strategy and a thread count, or CPUs; an
    affinity graph (a path) for the graph strategies and the costs; or the split of this node
    among ``ranks`` MPI ranks (next to the GPUs with ``gpus``).

    ``rank`` (auto, off, or LOCAL/COUNT) places one rank inside its part of the node; it cannot
    be given with ``ranks``, which previews all of them.
    """

    strategy: str | None = None
    threads: int | None = None
    cpus: str | None = None
    topology: str = "this"
    seed: int | None = None
    smt: bool = False
    oversubscribe: bool = False
    cpu_kind: str | None = None
    format: str = "list"
    picture: str | None = None
    graph: str | None = None
    domains: int | None = None
    level: str | None = None
    strict: bool = False
    ranks: int | None = None
    gpus: str | None = None
    rank: str = "auto"
    plan: str | None = None

    def __post_init__(self) -> None:
        if self.plan is not None:
            given = [
                option
                for option, value in (("-s", self.strategy), ("-c", self.cpus), ("--graph", self.graph), ("--ranks", self.ranks))
                if value is not None
            ]
            if given:
                raise UsageError(f"--plan FILE is the placement: leave {', '.join(given)} out")
            if self.threads is not None or self.cpu_kind is not None:
                raise UsageError("--plan FILE gives its own threads and CPUs: leave -n and --cpu-kind out")
        if self.ranks is not None and self.rank.strip().lower() not in ("auto", "off"):
            raise UsageError(f"--ranks {self.ranks} previews the split among all the ranks and --rank {self.rank} places one rank: give one of them")
        if self.gpus is not None and self.ranks is None:
            raise UsageError("--gpus shares the node's GPUs among ranks: give the number of ranks with --ranks R")
        if self.ranks is not None and self.format not in RANK_FORMATS:
            raise UsageError(f"--ranks prints a table (-f list) or JSON (-f json), not {self.format!r}")
        if self.format not in FORMATS:
            raise UsageError(f"unknown format {self.format!r}: choose one of {', '.join(FORMATS)}")
        if self.picture:
            check_picture(self.picture)
        check_strict(self.graph, self.strict)
        if self.graph is not None and self.ranks is None and self.cpus is None and self.unpinned:
            raise UsageError("strategy none leaves placement to the OS: it has no cost; choose a strategy or -c CPUS")

    @property
    def unpinned(self) -> bool:
        """Whether the strategy leaves the threads to the operating system (none, autonuma)."""
        if self.strategy is None:
            return False
        name = self.strategy.strip().lower()
        return ALIASES.get(name, name) in UNPINNED

    @property
    def on_this_machine(self) -> bool:
        """Whether the topology is this machine's (where a rank context can apply)."""
        return self.topology.strip() in ("this", "")

    def options(self, graph: Any = None) -> dict[str, Any]:
        """make_placement's options (``graph``: the loaded affinity graph, or None)."""
        return dict(
            strategy=self.strategy,
            threads=self.threads,
            cpus=self.cpus,
            smt=self.smt,
            oversubscribe=self.oversubscribe,
            seed=self.seed,
            cpu_kind=self.cpu_kind,
            graph=graph,
            domains=self.domains,
            level=self.level,
        )

    def place(self, topo: Topology, graph: Any = None, notices: list[str] | None = None) -> Placement:
        """The placement on ``topo`` (``graph``: the loaded affinity graph, or None); a plan file
        made on another machine is resolved on ``topo``, said in ``notices``."""
        if self.plan is None:
            return make_placement(topo, **self.options(graph))
        plan = read_placement_file(self.plan)
        cpus, moved = plan_cpus(plan, topo, f"plan file {self.plan}")
        if moved is not None and notices is not None:
            notices.append(moved)
        if cpus is not None:
            check_on(topo, cpus, f"plan file {self.plan}")
        return replace(Placement.from_json(plan, topo, f"plan file {self.plan}"), cpus=cpus)
