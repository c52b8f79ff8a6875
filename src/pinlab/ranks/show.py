"""``pinlab place --ranks R [--gpus]``: the whole node's layout, one line per rank."""

from __future__ import annotations

from pinlab.cpuset import format_cpulist
from pinlab.ranks.split import NodeSplit
from pinlab.words import plural


def rank_table(split: NodeSplit, placements: list | None = None) -> str:
    """A table: rank, its CPUs (and how many cores), how the node was cut, its NUMA nodes, its
    GPUs and the variables that select them, and, with a strategy, its threads' CPUs."""
    topo = split.topology
    rows = [
        ("rank", "CPUs", "cores", "domain", "NUMA", *(("GPUs", "environment") if split.gpus else ()), *(("threads on CPUs",) if placements else ()))
    ]
    for i, d in enumerate(split.domains):
        cores = len({id(topo.core_of(topo.pu(c))) for c in d.cpus})
        row = [str(d.rank), format_cpulist(d.cpus), str(cores), d.how, format_cpulist(d.nodes) or "-"]
        if split.gpus:
            row += [",".join(g.name for g in d.gpus) or "-", " ".join(f"{k}={v}" for k, v in d.env.items()) or "-"]
        if placements:
            p = placements[i]
            row.append(",".join(map(str, p.cpus)) if p.cpus is not None else "not pinned")
        rows.append(tuple(row))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    head = f"{topo.name}: {plural(len(split.domains), 'local rank')}"
    if split.gpus:
        head += f", {plural(len(split.gpus), 'GPU')}: " + ", ".join(
            f"{g.name} ({g.busid}, near CPUs {format_cpulist(g.cpus) or 'none allowed'})" for g in split.gpus
        )
    return "\n".join([head, *lines])
