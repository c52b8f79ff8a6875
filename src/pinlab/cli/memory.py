"""pinlab memmap and pinlab migrate: where a process's memory is, and moving it."""

from __future__ import annotations

import json
import sys

import click

from pinlab import terminal
from pinlab.memory import show
from pinlab.memory.memmap import memmap as look_at
from pinlab.memory.memmap import watch as watching
from pinlab.memory.migrate import move_process
from pinlab.words import plural


@click.command()
@click.argument("pid", type=int)
@click.option("--watch", type=float, metavar="S", help="Look again every S seconds until Ctrl-C or until the process ends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per look, one per line (every mapping).")
@click.option("--all", "show_all", is_flag=True, help="List every mapping, not only the largest resident ones.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="How many mappings to list without --all.")
def memmap(pid, watch, as_json, show_all, top) -> int:
    """Where a running process's memory lives: resident MiB per NUMA node, per kind of mapping and per mapping.

    Like numastat -p, from /proc/PID/numa_maps, with each mapping (heap, stack, anonymous memory,
    files) and its memory policy. Exits 0 (also when a watched process ends), 2 for a PID that
    does not exist or is not yours.
    """
    looks = watching(pid, watch) if watch is not None else iter([look_at(pid)])
    console = terminal.console()
    try:
        for look in looks:
            if as_json:
                click.echo(json.dumps(look.to_json()), nl=True)
                sys.stdout.flush()
                continue
            console.print(show.heading(look), highlight=False)
            console.print(show.summary(look))
            console.print(show.mappings(look, show_all=show_all, top=top))
            console.print(show.kinds_line(), highlight=False)
    except KeyboardInterrupt:
        return 0
    if watch is not None:
        click.echo(f"pinlab: process {pid} has ended", err=True)
    return 0


@click.command()
@click.argument("pid", type=int)
@click.option("--to", "to_nodes", required=True, metavar="NODES", help="The nodes to move the pages to (a node list, or all).")
@click.option("--from", "from_nodes", metavar="NODES", help="Move only the pages on these nodes [default: every node not in --to].")
def migrate(pid, to_nodes, from_nodes) -> None:
    """Move a running process's pages to other NUMA nodes now (as migratepages does), and say where they are.

    Node i of --from goes to node i of --to when both list as many nodes (a cycle, such as
    --from 0,1 --to 1,0, is refused); the kernel folds them otherwise. Exits 2 for a PID that is
    gone or not yours and for nodes without memory.
    """
    before, after, left = move_process(pid, to_nodes, from_nodes)

    def line(pages):
        return ", ".join(f"{node}: {count}" for node, count in sorted(pages.items())) or "none"

    click.echo(f"process {pid}: pages per node before {line(before)}; after {line(after)}")
    if left:
        click.echo(f"pinlab: warning: the kernel left {plural(left, 'page')} where they were (shared with other processes, or busy)", err=True)
