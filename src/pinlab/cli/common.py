"""What several commands share: option help texts, the graph option, output checks."""

from __future__ import annotations

import click

from pinlab.graph import load_graph
from pinlab.graph.model import check_strict
from pinlab.graph.progress import terminal_progress
from pinlab.launch import ProgramNotExecutable, ProgramNotFound
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


def started(start):
    """``start()``'s result; a program that is not found or cannot be executed is said in one line
    and becomes the exit status env(1) uses (127, 126)."""
    try:
        return start()
    except ProgramNotFound as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 127
    except ProgramNotExecutable as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 126
