"""``pinlab memmap`` tables: a numastat-like summary per kind of mapping, then the mappings themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinlab.memory.memmap import MemMap
from pinlab.words import plural

if TYPE_CHECKING:  # rich loads when a table is drawn: the command modules import with click alone
    from rich.table import Table

_MIB = 1024 * 1024


def mib(size: int) -> str:
    return f"{size / _MIB:.2f}"


def heading(look: MemMap) -> str:
    return f"process {look.pid}: {mib(look.resident)} MiB resident in {plural(len(look.mappings), 'mapping')}, per NUMA node (MiB):"


def summary(look: MemMap) -> Table:
    """Resident MiB per kind of mapping (rows) and NUMA node (columns), with totals, as numastat -p."""
    from rich.table import Table

    table = Table()
    table.add_column("kind")
    for node in look.nodes:
        table.add_column(f"node {node}", justify="right")
    table.add_column("total", justify="right")
    for kind, row in look.per_kind().items():
        table.add_row(kind, *[mib(row.get(node, 0)) for node in look.nodes], mib(sum(row.values())))
    per_node = look.per_node()
    table.add_row("total", *[mib(per_node.get(node, 0)) for node in look.nodes], mib(look.resident), style="bold")
    return table


def mappings(look: MemMap, show_all: bool = False, top: int = 15) -> Table:
    """The mappings, largest resident first: the ``top`` ones, or every one with ``show_all``."""
    from rich.table import Table

    rows = sorted(look.mappings, key=lambda m: (-m.resident, m.start))
    if not show_all:
        rows = [m for m in rows if m.resident > 0][:top]
    shown = "every mapping" if show_all else f"the {plural(len(rows), 'largest mapping')}"
    table = Table(title=f"{shown} of {len(look.mappings)}, by resident size (MiB; --all for every one)", title_justify="left")
    table.add_column("address")
    table.add_column("kind")
    table.add_column("policy")
    table.add_column("size", justify="right")
    for node in look.nodes:
        table.add_column(f"node {node}", justify="right")
    table.add_column("resident", justify="right")
    table.add_column("what", overflow="fold")
    for m in rows:
        size = "?" if m.size is None else mib(m.size)
        table.add_row(
            f"{m.start:x}", m.kind, m.policy, size, *[mib(m.bytes_per_node.get(node, 0)) for node in look.nodes], mib(m.resident), m.path or ""
        )
    return table


def kinds_line() -> str:
    return (
        "kinds: heap (brk), stack (main thread's), anon (other anonymous memory: malloc'd arenas, thread stacks, mmap), "
        "huge (hugetlbfs), shm (/dev/shm, memfd, SysV, shared anonymous), file (mapped files: the program and its libraries)"
    )
