"""``pinlab run`` and ``pinlab place`` in a rank context: the rank's domain, its placement, its
memory policy and the variables that show it its GPUs.

Each rank runs its own pinlab, reads its own node's topology and computes the same split of
the node as every other rank there (the split depends only on the node and the local rank
count), then keeps its own part: no rank needs to talk to another.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.placement import make_placement
from pinlab.ranks.context import RankContext, parse_rank
from pinlab.ranks.gpus import find_gpus, select_gpus, visible_devices
from pinlab.ranks.split import NodeSplit, RankDomain, split_node
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.model import Topology
from pinlab.topology.sources import load_node


@dataclass
class RankPlan:
    """What one rank runs with: its context, the node's split, its domain, the placement
    options narrowed to the domain, and the notices to print."""

    context: RankContext
    split: NodeSplit
    domain: RankDomain
    topology: Topology  # the node as this rank sees it: only its domain's CPUs allowed
    notices: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {**self.context.to_json(), "domain": self.domain.to_json()}

    def summary(self) -> str:
        """``local rank 1 of 4 (Open MPI (OMPI_COMM_WORLD_LOCAL_RANK)): CPUs 8-15 (L3 cache 1), NUMA node 0, GPUs cuda1``"""
        d = self.domain
        text = (
            f"local rank {d.rank} of {len(self.split.domains)} ({self.context.source}): CPUs {format_cpulist(d.cpus)} ({d.how}), "
            f"NUMA {'nodes' if len(d.nodes) > 1 else 'node'} {format_cpulist(d.nodes)}"
        )
        if d.gpus:
            text += f", GPUs {','.join(g.name for g in d.gpus)} ({' '.join(f'{k}={v}' for k, v in d.env.items())})"
        return text

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (the environment pinlab was given) with the rank's GPU variables."""
        return {**base, **(visible_devices(self.domain.gpus, base) if self.domain.gpus else {})}


def node_split(topo: Topology, ranks: int, gpus: str | None) -> tuple[NodeSplit, list[str]]:
    """The node split among ``ranks``, next to the GPUs ``gpus`` names (None: CPUs only), and
    notices (a node without GPUs when all were asked for)."""
    notices: list[str] = []
    chosen = None
    if gpus is not None:
        found = find_gpus(topo)
        every = gpus.strip().lower() == "all"
        if not found and every:
            notices.append(
                f"--gpus: hwloc shows no GPU on {topo.name} (no CUDA, NVML, ROCm SMI, Level Zero or OpenCL device): "
                "the node is split by its CPUs only"
            )
        elif every and not any(g.cpus for g in found):
            notices.append(
                f"--gpus: none of the {len(found)} GPUs of {topo.name} is local to the CPUs this process may use "
                f"({format_cpulist(topo.allowed_cpus)}): the ranks get no GPU and the CPUs are split alone"
            )
        else:
            chosen = select_gpus(found, gpus, topo.name)
    split = split_node(topo, ranks, chosen, chosen=chosen is not None and len(chosen) < len(found))
    notices.extend(split.notes)
    return split, notices


def domain_topology(topo: Topology, domain: RankDomain) -> Topology:
    """``topo`` with only ``domain``'s CPUs (and NUMA nodes) allowed, as a narrower cgroup would
    be: every strategy, CPU expression and memory word then works inside the domain."""
    nodes = (topo.allowed_nodes & domain.nodes) or topo.allowed_nodes
    return parse_xml(topo.xml, source=topo.source, narrow_cpus=domain.cpus, narrow_nodes=nodes)


def domain_placement(topology: Topology, domain: RankDomain, ranks: int, options: dict):
    """The placement ``options`` (make_placement's) ask for inside ``domain`` (``topology``: the
    node with only the domain allowed); a placement that does not fit says which rank it is."""
    try:
        return make_placement(topology, **options)
    except UsageError as exc:
        raise UsageError(f"rank {domain.rank} of {ranks} (CPUs {format_cpulist(domain.cpus)}, {domain.how}): {exc}") from None


def plan_rank(context: RankContext, topo: Topology, gpus: str | None) -> RankPlan:
    split, notices = node_split(topo, context.local_size, gpus)
    domain = split.domains[context.local_rank]
    return RankPlan(context, split, domain, domain_topology(topo, domain), notices)


def rank_memory(mem: str | None, domain: RankDomain) -> str | None:
    """``--mem`` in a rank context: ``domain`` binds to the domain's NUMA nodes, and ``all`` in
    an interleave means the domain's nodes, not the machine's."""
    if mem is None:
        return None
    nodes = format_cpulist(domain.nodes)
    word = mem.strip()
    if word == "domain":
        return f"bind:{nodes}"
    kind, _, arg = word.partition(":")
    if kind in ("interleave", "weighted-interleave") and arg.split("@")[0] == "all":
        return f"{kind}:{nodes}{arg[3:]}"
    return mem


def no_domain_memory(mem: str | None) -> None:
    if mem is not None and mem.strip() == "domain":
        raise UsageError(
            "--mem domain binds memory to the rank's domain: it needs a rank context (run under srun or mpirun, or give --rank LOCAL/COUNT)"
        )


def this_rank(rank: str, gpus: str | None, environ: Mapping[str, str] | None = None) -> RankPlan | None:
    """The rank plan of this process (``--rank`` as :func:`pinlab.ranks.context.parse_rank`
    reads it), on this machine; None outside a rank context (then ``--gpus`` is refused)."""
    context = parse_rank(rank, os.environ if environ is None else environ)
    if context is None:
        if gpus is not None:
            raise UsageError(
                "--gpus gives each MPI rank the GPUs next to it: it needs a rank context (run under srun or mpirun, or give --rank LOCAL/COUNT)"
            )
        return None
    return plan_rank(context, load_node(), gpus)
