"""A placement: which CPU each thread of a program gets, in creation order (thread 0 = main)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.outputs import read_json_file
from pinlab.placement.portable import describe, resolve
from pinlab.topology.model import Topology

#: The version of pinlab's placement JSON (key ``pinlab_placement``); fields are only added within
#: a version, so a reader refuses only another version, never a field it does not know.
PLACEMENT_FORMAT_VERSION = 1

#: The memory policies a plan can carry: over the NUMA nodes of its threads' CPUs (every allowed
#: node for threads left unpinned), so that they mean the same on another machine.
PLAN_MEMORY = ("interleave", "bind")

#: What every refusal of a placement file tells the user to do instead.
_PLACEMENT_HINT = "write one with `pinlab place ... -f json`"


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
    mem: str | None = None  # one of PLAN_MEMORY, over the threads' nodes; None: the run's own --mem (first touch)

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
        """pinlab's placement JSON (docs/reference/file-formats.md, schema placement.schema.json)."""
        return {
            "pinlab_placement": PLACEMENT_FORMAT_VERSION,
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
            "portable": None if self.cpus is None else describe(self.topology, self.cpus),
            "mem": self.mem,
        }

    @classmethod
    def from_json(cls, data: Any, topology: Topology, source: str = "placement") -> Placement:
        """The placement a placement JSON describes, on ``topology`` (the JSON names its machine but
        does not hold it); checked as :func:`check_placement_json` does."""
        plan = check_placement_json(data, source)
        return cls(
            strategy=plan.get("strategy") or "explicit",
            threads=plan["threads"],
            cpus=None if plan.get("cpus") is None else list(plan["cpus"]),
            topology=topology,
            smt=bool(plan.get("smt", False)),
            oversubscribe=bool(plan.get("oversubscribe", False)),
            seed=plan.get("seed"),
            expression=plan.get("expression"),
            mem=plan.get("mem"),
        )


def explicit_placement_json(threads: int, cpus: list[int], expression: str | None = None) -> dict[str, Any]:
    """The placement JSON of a plan given as CPUs (``-c``), which needs no topology: ``pinlab run``
    records it as the run's plan without loading hwloc's model of the machine."""
    return {"pinlab_placement": PLACEMENT_FORMAT_VERSION, "strategy": "explicit", "expression": expression, "threads": threads, "cpus": cpus}


def check_placement_json(data: Any, source: str = "placement") -> dict[str, Any]:
    """``data`` if it is a placement JSON this pinlab reads, else a one-line UsageError saying
    what is wrong. Only what a run needs is checked (version, ``threads``, ``cpus``): the other
    fields describe the plan and a later version may add more."""
    if not isinstance(data, dict) or "pinlab_placement" not in data:
        raise UsageError(f"{source} is not a pinlab placement (no 'pinlab_placement' field); {_PLACEMENT_HINT}")
    version = data["pinlab_placement"]
    if version != PLACEMENT_FORMAT_VERSION:
        raise UsageError(
            f"{source} is a pinlab placement of format {version!r}; this pinlab reads format {PLACEMENT_FORMAT_VERSION}: "
            f"{_PLACEMENT_HINT} with this pinlab"
        )
    cpus = data.get("cpus")
    if cpus is not None and (
        not isinstance(cpus, list) or not cpus or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)
    ):
        raise UsageError(f"{source}: 'cpus' must be a non-empty list of CPU numbers (or null for no pinning)")
    threads = data.get("threads")
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise UsageError(f"{source}: 'threads' must be a positive integer")
    if data.get("mem") not in (None, *PLAN_MEMORY):
        raise UsageError(f"{source}: 'mem' must be {' or '.join(PLAN_MEMORY)} (over the threads' nodes) or null, not {data['mem']!r}")
    return data


def plan_cpus(plan: dict[str, Any], topology: Topology, source: str = "the plan") -> tuple[list[int] | None, str | None]:
    """The CPUs a placement JSON gives its threads on ``topology``, and a sentence when they are
    not the plan's own: a plan with a portable description is resolved on this machine (its
    slots give back the plan's CPUs on the machine it was made on, and the placement of the
    same shape on another); one without is taken as its CPUs. Refuses in one line a plan that
    cannot hold here."""
    cpus = plan.get("cpus")
    if cpus is None or plan.get("portable") is None:
        return cpus, None
    here = resolve(topology, plan["portable"], source)
    if here == list(cpus):
        return here, None
    made = (plan.get("topology") or {}).get("name") or "another machine"
    if plan.get("allowed_cpus"):
        made += f" (allowed CPUs {plan['allowed_cpus']})"
    return here, (
        f"{source} was made on {made} with CPUs {_in_order(cpus)}; its placement ({plan['portable'].get('words') or 'as described'}) "
        f"is CPUs {_in_order(here)} on this machine ({topology.name}, allowed CPUs {format_cpulist(topology.allowed_cpus)})"
    )


def check_on(topology: Topology, cpus: list[int], source: str = "the plan") -> None:
    """Every CPU of a plan is one this process may use on ``topology``, else a one-line UsageError."""
    missing = [c for c in cpus if c not in topology.allowed_cpus]
    if missing:
        where = "does not have" if missing[0] not in topology.pu_by_os else "may not use"
        raise UsageError(
            f"{source} pins to CPU {missing[0]}, which this machine ({topology.name}) {where} "
            f"(allowed CPUs: {format_cpulist(topology.allowed_cpus)}); place it again here"
        )


def _in_order(cpus: list[int]) -> str:
    """CPUs in thread order, or as a set when there are too many to read."""
    return ",".join(map(str, cpus)) if len(cpus) <= 16 else f"{format_cpulist(cpus)} (as a set)"


def read_placement_file(path: str) -> dict[str, Any]:
    """The placement JSON in the file ``path`` (``pinlab run --plan``), checked."""
    return check_placement_json(read_json_file(path, "plan file", _PLACEMENT_HINT), f"plan file {path!r}")
