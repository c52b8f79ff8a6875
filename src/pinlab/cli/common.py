"""What several commands share: option help texts, the graph option, output checks."""

from __future__ import annotations

import click

from pinlab.cli.completion import complete_strategies
from pinlab.graph import load_graph
from pinlab.graph.model import check_strict
from pinlab.graph.progress import terminal_progress
from pinlab.placement.tree import graph_fits
from pinlab.topology import load_topology

#: The graph strategies in -s's help (pinlab.placement.strategies.GRAPH_STRATEGIES; a test keeps them equal).
GRAPH_STRATEGY_HELP = "; with --graph FILE: lp-compact, lp-scatter, gp, lpgp, gplp, treematch"

TOPOLOGY_HELP = "this (default), a path to an hwloc XML file, synthetic:<hwloc synthetic string>, or a preset name"


def this_topology():
    return load_topology("this")


def graph_option(path, strict: bool, fits: dict | None = None):
    """--graph FILE loaded and checked (notices on stderr), or None.

    ``fits`` (topology, strategy, threads, smt, domains; topology a callable) refuses a graph of
    the wrong size from its thread count, before its weights are read."""
    check_strict(path, strict)
    if path is None:
        return None

    def expect(n: int) -> None:
        if fits is not None:
            strategy = (fits["strategy"] or "").strip().lower()
            topo = fits["topology"]() if strategy or fits["threads"] is not None else None
            graph_fits(topo, strategy, n, threads=fits["threads"], smt=fits["smt"], domains=fits["domains"], source=path)

    return load_graph(
        path, strict=strict, notice=lambda text: click.echo(f"pinlab: notice: {text}", err=True), expect=expect, progress=terminal_progress()
    )


class RenamingCommand(click.Command):
    """A command whose renamed options still answer to their old spelling for one release.

    Every short flag means one thing across pinlab's commands (``-c`` CPUs, ``-t`` topology, ``-n``
    threads, ``-s`` strategy, ``-w`` workload, ``-m`` metric); options that once used one of them
    for something else answer to it still, with a one-line notice naming the new spelling. Only
    pinlab's own options are rewritten: never what follows ``--`` or the program's name."""

    #: old spelling -> new spelling, set by :func:`renamed`.
    renamed: dict[str, str] = {}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _respell(self, ctx, args))


def renamed(spellings: dict[str, str]):
    """Decorate a :class:`RenamingCommand` with its old option spellings (old -> new)."""

    def apply(command: RenamingCommand) -> RenamingCommand:
        command.renamed = dict(spellings)
        return command

    return apply


def _respell(command: RenamingCommand, ctx: click.Context, args: list[str]) -> list[str]:
    takes_value = {
        name for p in command.params if isinstance(p, click.Option) and not p.is_flag and not p.count for name in (*p.opts, *p.secondary_opts)
    }
    out: list[str] = []
    told: set[str] = set()
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--" or (not token.startswith("-") or token == "-") and not ctx.allow_interspersed_args:
            out.extend(args[i:])
            break
        name, equals, value = token.partition("=")
        if not token.startswith("--") and len(token) > 2 and token[:2] in command.renamed and command.renamed[token[:2]] in takes_value:
            name, equals, value = token[:2], "=", token[2:]  # -cVALUE
        if name in command.renamed:
            new = command.renamed[name]
            if name not in told:
                told.add(name)
                shown = "/".join(next((sorted(p.opts, key=len) for p in command.params if new in p.opts), [new]))
                click.echo(f"pinlab: notice: pinlab {command.name} {name} is now {shown}; the old spelling goes in the next release", err=True)
            name = new
            token = f"{new}={value}" if equals else new
        out.append(token)
        i += 1
        if name in takes_value and not equals and i < len(args):
            out.append(args[i])
            i += 1
    return out


def options(*decorators):
    """Several click options as one decorator, listed in the order they are written."""

    def apply(function):
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


def placement_options(threads_help: str = "Number of threads (thread 0 is the main thread)."):
    """The options that choose a placement, with the same spelling and meaning in every command that takes one."""
    return options(
        click.option(
            "--strategy",
            "-s",
            shell_complete=complete_strategies,
            help="compact|close, scatter|spread, random, none|os, intra-socket, inter-socket, autonuma" + GRAPH_STRATEGY_HELP,
        ),
        click.option("--threads", "-n", type=int, help=threads_help),
        click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S1:0-3, M0:0-1@M1:0-1, E:N:4:1:2)."),
        click.option("--smt", is_flag=True, help="Allow hardware-thread siblings (default: one thread per physical core)."),
        click.option("--oversubscribe", is_flag=True, help="Allow more threads than CPUs in the plan: they wrap round-robin."),
        click.option("--seed", type=int, help="Seed for the random strategy (default: a fresh one, kept in the plan's JSON)."),
        click.option("--cpu-kind", help="Hybrid processors: only this kind of core: performance (P), efficiency (E), or hwloc's kind name."),
    )


def graph_strategy_options(
    graph_help: str = "Affinity graph (pinlab trace) for the graph strategies: lp-compact, lp-scatter, gp, lpgp, gplp, treematch.",
):
    """The options of the graph strategies (pinlab.placement.mapping)."""
    return options(
        click.option("--graph", "graph_file", type=click.Path(dir_okay=False), help=graph_help),
        click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes)."),
        click.option("--level", help="gp: partition into the objects of this level (package, numa, l3, l2...)."),
        click.option("--strict", is_flag=True, help="Refuse an asymmetric graph instead of symmetrising it."),
    )
