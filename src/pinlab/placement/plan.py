"""A placement: which CPU each thread of a program gets, in creation order (thread 0 = main)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinlab.cpuset import format_cpulist
from pinlab.topology.model import Topology

JSON_FORMAT_VERSION = 1


@dataclass
class Placement:
    """The plan for ``threads`` threads on ``topology``.

    ``cpus[i]`` is the OS index of the CPU (PU) thread ``i`` is pinned to; ``cpus`` is ``None``
    for the ``none`` strategy (the operating system places the threads on ``allowed_cpus``).
    """

    strategy: str
    threads: int
    cpus: list[int] | None
    topology: Topology = field(repr=False)
    smt: bool = False
    oversubscribe: bool = False
    seed: int | None = None
    expression: str | None = None

    @property
    def pinned(self) -> bool:
        return self.cpus is not None

    @property
    def allowed_cpus(self) -> frozenset[int]:
        return self.topology.allowed_cpus

    def where(self, cpu: int) -> dict[str, Any]:
        """Where a CPU sits: its core, package, NUMA nodes and data caches (logical indexes)."""
        pu = self.topology.pu(cpu)
        info: dict[str, Any] = {"cpu": cpu, "pu": pu.logical_index}
        obj = pu.parent
        while obj is not None and obj.parent is not None:
            if obj.type in ("Core", "Die", "Package") or obj.is_data_cache or obj.type == "Group":
                info.setdefault(obj.kind.lower(), obj.logical_index)
            obj = obj.parent
        info["numa_nodes"] = sorted(pu.nodes)
        return info

    def to_json(self) -> dict[str, Any]:
        """pinlab's placement JSON (format version 1, documented in the README)."""
        return {
            "pinlab_placement": JSON_FORMAT_VERSION,
            "strategy": self.strategy,
            "expression": self.expression,
            "threads": self.threads,
            "smt": self.smt,
            "oversubscribe": self.oversubscribe,
            "seed": self.seed,
            "topology": {"source": self.topology.source, "name": self.topology.name},
            "allowed_cpus": format_cpulist(self.allowed_cpus),
            "cpus": self.cpus,
            "threads_detail": None if self.cpus is None else [dict(thread=i, **self.where(c)) for i, c in enumerate(self.cpus)],
        }
