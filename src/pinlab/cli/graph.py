"""pinlab graph: show and convert affinity graph files."""

from __future__ import annotations

import click

from pinlab import terminal
from pinlab.graph.model import convert_graph, load_graph
from pinlab.graph.picture import draw
from pinlab.graph.progress import terminal_progress
from pinlab.graph.show import render
from pinlab.outputs import check_picture


def _graph_notice(text: str) -> None:
    click.echo(f"pinlab: notice: {text}", err=True)


@click.group()
def graph() -> None:
    """Affinity graphs: show them, convert them between JSON and a matrix CSV."""


@graph.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--picture", type=click.Path(dir_okay=False), help="Also draw the heat map to FILE.png or FILE.svg.")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric matrix or a non-zero diagonal instead of fixing it.")
@click.option("--threads", "-n", type=int, help="Refuse the graph unless it has this many threads (as a placement of -n threads would).")
def graph_show(file, picture, strict, threads) -> None:
    """Print the affinity graph FILE as a heat map with the heaviest pairs."""
    if picture:
        check_picture(picture)
    loaded = load_graph(file, strict=strict, notice=_graph_notice, progress=terminal_progress())
    if threads is not None:
        loaded.check_threads(threads)
    # No markup or emoji: a program's arguments in the summary are printed as they are.
    console = terminal.console(piped_width=None, highlight=False, markup=False, emoji=False)
    for part in render(loaded, console.width):
        if isinstance(part, str):
            console.print(part, soft_wrap=True)
        else:
            console.print(part, end="")
    if picture:
        draw(loaded, picture)


@graph.command("convert")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Refuse an asymmetric matrix or a non-zero diagonal instead of fixing it.")
def graph_convert(source, target, strict) -> None:
    """Convert the affinity graph SOURCE to TARGET: JSON (.json) or a matrix (.csv, .txt, .mat), by the suffixes."""
    convert_graph(source, target, strict=strict, notice=_graph_notice, progress=terminal_progress())
