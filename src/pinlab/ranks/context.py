"""Which local rank this process is, and how many ranks share its node, from the launcher.

Every MPI launcher tells each process its rank among those on the same node, but each in its
own words. The MPI library's own variables come first (they describe the job the program will
see), Slurm's last: under ``srun`` with Open MPI or MPICH both are set, and agree. Slurm gives
the number of tasks on this node through the step's layout (``SLURM_STEP_TASKS_PER_NODE``,
e.g. ``4(x2),3``, indexed by ``SLURM_NODEID``), which only srun's tasks have: a batch script
has SLURM_LOCALID too, but it is not a rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pinlab.errors import UsageError

# (launcher, local rank variable, local size variable, global rank variable, global size variable)
LAUNCHERS = (
    ("Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("MPICH (Hydra)", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_SIZE"),
    ("MVAPICH", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
    ("PMI", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE"),
    ("PMIx", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE", "PMIX_RANK", "PMIX_SIZE"),
)


@dataclass(frozen=True)
class RankContext:
    """This process is local rank ``local_rank`` of ``local_size`` on its node (global rank
    ``rank`` of ``size`` when known); ``source`` says where that was read."""

    local_rank: int
    local_size: int
    source: str
    rank: int | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if self.local_size < 1:
            raise UsageError(f"rank context from {self.source}: {self.local_size} local ranks; there must be at least one")
        if not 0 <= self.local_rank < self.local_size:
            fix = "give LOCAL from 0 to COUNT-1" if self.source == "--rank" else "the launcher's environment is inconsistent"
            where = "is negative" if self.local_rank < 0 else f"is not below the local rank count {self.local_size}"
            raise UsageError(f"rank context from {self.source}: local rank {self.local_rank} {where}; {fix}")

    def to_json(self) -> dict:
        return {"local_rank": self.local_rank, "local_size": self.local_size, "rank": self.rank, "size": self.size, "source": self.source}


def _int(env: Mapping[str, str], name: str, source: str) -> int | None:
    text = env.get(name)
    if text is None or text.strip() == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"rank context from {source}: {name}={text!r} is not a number") from None


def slurm_tasks_on_node(layout: str, node_id: int) -> int:
    """The tasks on node ``node_id`` of a Slurm layout such as ``4(x2),3`` (nodes 0-1: 4, node 2: 3)."""
    counts: list[int] = []
    for part in layout.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise UsageError(f"rank context from Slurm: cannot read the tasks per node {layout!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    if not 0 <= node_id < len(counts):
        raise UsageError(f"rank context from Slurm: node {node_id} is not in the layout {layout!r}")
    return counts[node_id]


def _slurm(env: Mapping[str, str]) -> RankContext | None:
    """The context of a task srun started. A batch script also has SLURM_LOCALID (0) and the
    job's tasks per node, but it is one process, not a rank: only srun's steps carry the step's
    layout (``SLURM_STEP_TASKS_PER_NODE``), so without it there is no rank context."""
    local = _int(env, "SLURM_LOCALID", "Slurm")
    layout = env.get("SLURM_STEP_TASKS_PER_NODE")
    if local is None or not layout:
        return None
    node_id = _int(env, "SLURM_NODEID", "Slurm") or 0
    return RankContext(
        local,
        slurm_tasks_on_node(layout, node_id),
        "Slurm (SLURM_LOCALID)",
        _int(env, "SLURM_PROCID", "Slurm"),
        _int(env, "SLURM_STEP_NUM_TASKS", "Slurm") or _int(env, "SLURM_NTASKS", "Slurm"),
    )


def detect(env: Mapping[str, str]) -> RankContext | None:
    """The rank context the launcher's environment ``env`` gives, or None outside any launcher."""
    for name, local_var, size_var, rank_var, world_var in LAUNCHERS:
        local = _int(env, local_var, name)
        if local is None:
            continue
        size = _int(env, size_var, name)
        if size is None:
            raise UsageError(f"rank context from {name}: {local_var} is set but not {size_var}; give the local rank count with --rank {local}/COUNT")
        return RankContext(local, size, f"{name} ({local_var})", _int(env, rank_var, name), _int(env, world_var, name))
    return _slurm(env)


def parse_rank(text: str, env: Mapping[str, str]) -> RankContext | None:
    """``--rank``: ``auto`` (the launcher's environment, if any), ``off`` (none), or ``I/R``
    (local rank I of R, as given)."""
    word = text.strip().lower()
    if word == "off":
        return None
    if word == "auto":
        return detect(env)
    match = re.fullmatch(r"(\d+)/(\d+)", word)
    if not match:
        raise UsageError(f"--rank {text!r}: use auto, off, or LOCAL/COUNT (e.g. 1/4: local rank 1 of 4 on this node)")
    return RankContext(int(match.group(1)), int(match.group(2)), "--rank")
