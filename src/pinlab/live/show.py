"""Showing a look at a running process: a terminal table, and a picture of where its threads are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinlab.cpuset import format_cpulist
from pinlab.live.watch import Look
from pinlab.placement import Placement
from pinlab.placement.picture import draw
from pinlab.topology.model import Topology
from pinlab.words import plural

if TYPE_CHECKING:
    from rich.table import Table


def table(look: Look) -> Table:
    """One row per thread; the ``#`` column is the thread's number in the picture."""
    from rich.table import Table

    origin = "roles from pinlab run" if look.roles_known else "not started by pinlab run: roles unknown"
    when = "since it started" if look.interval is None else f"in the last {look.interval:.1f} s"
    result = Table(
        title=f"process {look.pid} ({look.command}): {plural(len(look.threads), 'thread')}, {origin}",
        caption=f"migr. and CPU s: {when}; total in brackets",
    )
    for column, justify in (
        ("#", "right"),
        ("tid", "right"),
        ("name", "left"),
        ("role", "left"),
        ("CPU now", "right"),
        ("mask", "left"),
        ("migr.", "right"),
        ("CPU s", "right"),
        ("state", "left"),
    ):
        result.add_column(column, justify=justify, overflow="fold")
    for i, t in enumerate(look.threads):
        new = look.new_migrations.get(t.tid)
        migrations = "?" if new is None else f"{new} ({t.migrations})"
        cpu_time = f"{look.new_cpu_seconds.get(t.tid, 0.0):.2f} ({t.cpu_seconds:.2f})"
        result.add_row(str(i), str(t.tid), t.name, t.role, str(t.cpu), format_cpulist(t.mask), migrations, cpu_time, t.state)
    return result


def pages_line(look: Look) -> str:
    """``pages per NUMA node: 0: 1234, 1: 56``, or why there are none."""
    if not look.pages_per_node:
        return "pages per NUMA node: not shown (the kernel shows no NUMA maps, or they are not yours to read)"
    return "pages per NUMA node: " + ", ".join(f"{node}: {pages}" for node, pages in sorted(look.pages_per_node.items()))


def placement_now(look: Look, topo: Topology) -> Placement:
    """The threads as a Placement (thread i on the CPU it last ran on), for the placement picture."""
    return Placement(
        strategy=f"process {look.pid} ({look.command}) now", threads=len(look.threads), cpus=[t.cpu for t in look.threads], topology=topo
    )


def draw_look(look: Look, topo: Topology, path: str) -> None:
    """Draw where the threads of the look are now (the thread numbers are the table's ``#``)."""
    draw(placement_now(look, topo), path)
