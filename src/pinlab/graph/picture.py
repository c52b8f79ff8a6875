"""Draw the affinity graph as a heat map picture (PNG or SVG) with a colour bar.

The picture is what goes into a report or a paper: every pair's weight on a continuous colour
scale (white for no sharing, through yellow to dark red as in the terminal map), threads on
both axes. Graphs larger than :data:`MAX_CELLS` threads are drawn by blocks of threads (the
sum of their weights), said in the title: a 4096 x 4096 image is no more readable and costs
memory. matplotlib is imported inside :func:`draw`, so importing this module stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from pinlab.errors import UsageError
from pinlab.graph.model import AffinityGraph
from pinlab.graph.show import aggregate
from pinlab.outputs import check_picture
from pinlab.words import plural

#: Most rows and columns drawn; past this threads are grouped into blocks.
MAX_CELLS = 512
#: Every thread number is written on the axes up to this many rows; past it, matplotlib chooses.
MAX_TICKS = 32
PNG_DPI = 120


def title(graph: AffinityGraph, block: int) -> str:
    method = graph.measured.get("method")
    parts = [f"Affinity graph: {plural(graph.threads, 'thread')}"]
    if method:
        parts.append(f"measured by {method}")
    if graph.granularity != "unknown":
        unit = {"line": "cache line"}.get(graph.granularity, graph.granularity)
        parts.append(f"per {unit}" + (f" of {graph.unit_bytes} bytes" if graph.unit_bytes else ""))
    text = ", ".join(parts)
    if block > 1:
        text += f"\n(blocks of {block} threads: a cell sums their weights)"
    return text


def draw(graph: AffinityGraph, path: str | Path) -> None:
    """Draw ``graph`` to ``path``; the suffix (.svg or .png) chooses the format."""
    target = Path(path)
    fmt = check_picture(target)
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    blocks = aggregate(graph, MAX_CELLS)
    cells = len(blocks.starts)
    # White for zero, then the terminal map's yellow-to-red scale.
    colours = LinearSegmentedColormap.from_list("pinlab_affinity", ["#ffffff", "#ffeda0", "#feb24c", "#fc4e2a", "#bd0026", "#800026"])
    # svg.fonttype none: texts stay texts in the SVG (searchable); fixed salt, no date: same graph, same file.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "pinlab"}):
        fig = Figure(figsize=(7.5, 6.2))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        top = blocks.top
        image = ax.imshow(
            blocks.matrix,
            cmap=colours,
            vmin=0,
            vmax=top if top > 0 else 1,
            interpolation="nearest",
            origin="upper",
            extent=(-0.5, cells - 0.5, cells - 0.5, -0.5),
        )
        bar = fig.colorbar(image, ax=ax)
        bar.set_label("weight (sum over the block)" if blocks.grouped else "weight")
        label = "thread" if not blocks.grouped else f"thread (first of a block of {blocks.size})"
        ax.set_xlabel(label)
        ax.set_ylabel(label)
        if cells <= MAX_TICKS:
            ax.set_xticks(range(cells), [str(s) for s in blocks.starts])
            ax.set_yticks(range(cells), [str(s) for s in blocks.starts])
        else:
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_locator(MaxNLocator(nbins=12, integer=True))
            ticks = [t for t in ax.get_xticks() if 0 <= t < cells]
            ax.set_xticks(ticks, [str(blocks.starts[int(t)]) for t in ticks])
            ax.set_yticks(ticks, [str(blocks.starts[int(t)]) for t in ticks])
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
        ax.set_title(title(graph, blocks.size), fontsize=11, pad=12)
        fig.tight_layout()
        try:
            if fmt == "png":
                fig.savefig(target, format="png", dpi=PNG_DPI, facecolor="white")
            else:
                fig.savefig(target, format="svg", metadata={"Date": None}, facecolor="white")
        except OSError as exc:
            raise UsageError(f"cannot write picture {str(target)!r}: {exc.strerror or exc}") from None
