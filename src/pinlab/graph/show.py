"""The affinity graph in a terminal: a heat map, one cell per pair of threads, and a summary.

A heat map because what a user looks for in a graph (pairs, groups, one thread everybody shares
with) shows as blocks and stripes at a glance, where a table of numbers hides it. Each cell's
glyph encodes its level by height as well as by colour, so the map stays readable where colours
are lost (output piped to a file or a log).

Past :data:`MAX_CELLS` threads, or what fits the width, consecutive threads are grouped into
blocks of equal size and a cell shows the sum of the weights between two blocks (the diagonal
then holds the weight inside a block); the map says so. The summary (counts, the heaviest pairs)
is always computed on the full graph.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from pinlab.graph.model import AffinityGraph
from pinlab.words import plural

#: Most cells per row: past this a terminal map stops being readable; threads are grouped.
MAX_CELLS = 64
#: One glyph per level, lowest to highest; zero weight is :data:`ZERO`.
GLYPHS = "▁▂▃▄▅▆▇█"
LEVELS = len(GLYPHS)
ZERO = "·"
#: Colours of the levels, light yellow to dark red (ColorBrewer's YlOrRd, as in the picture).
COLOURS = ("#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026", "#800026")
#: How many pairs the summary lists.
TOP_PAIRS = 5


@dataclass
class Blocks:
    """The weight matrix as drawn: ``matrix[a][b]`` sums the weights between blocks a and b."""

    size: int  # threads per block (1: every thread its own row)
    starts: list[int]  # the first thread of each block
    matrix: list[list[float]]
    threads: int

    @property
    def grouped(self) -> bool:
        return self.size > 1

    @property
    def top(self) -> float:
        """The largest cell, which the scale maps to the highest level."""
        return max((max(row) for row in self.matrix), default=0.0)


@dataclass
class Pair:
    first: int
    second: int
    weight: float
    share: float  # of the graph's total weight, 0..1


def aggregate(graph: AffinityGraph, cells: int) -> Blocks:
    """Group consecutive threads into at most ``cells`` blocks of equal size (the last may be smaller).

    Each pair of threads counts once (the matrix's upper triangle), so a block's diagonal cell is
    the weight of the pairs inside it. numpy does the sums: a 4096-thread graph is 8 million pairs.
    """
    import numpy as np

    n = graph.threads
    size = max(1, math.ceil(n / max(1, cells)))
    starts = list(range(0, n, size))
    upper = np.triu(graph.as_array(), 1)
    if size > 1:
        upper = np.add.reduceat(np.add.reduceat(upper, starts, axis=0), starts, axis=1)
    matrix = upper + upper.T - np.diag(np.diag(upper))
    return Blocks(size, starts, matrix.tolist(), n)


def level(value: float, top: float) -> int:
    """0 for no weight; otherwise 1..LEVELS by the value's fraction of ``top`` (any weight shows)."""
    if value <= 0 or top <= 0:
        return 0
    return min(LEVELS, max(1, math.ceil(value / top * LEVELS)))


def heaviest_pairs(graph: AffinityGraph, count: int = TOP_PAIRS) -> list[Pair]:
    """The ``count`` pairs with the largest weights (ties by thread order), with their share of the total."""
    import numpy as np

    rows, cols = np.triu_indices(graph.threads, 1)
    values = graph.as_array()[rows, cols]
    total = float(values.sum())
    positive = np.flatnonzero(values > 0)
    if count < len(positive):  # only the candidates at or above the count-th largest are sorted
        cut = np.partition(values[positive], len(positive) - count)[len(positive) - count]
        positive = positive[values[positive] >= cut]
    order = positive[np.argsort(-values[positive], kind="stable")][:count]
    return [Pair(int(rows[k]), int(cols[k]), float(values[k]), float(values[k]) / total if total else 0.0) for k in order]


def layout(graph: AffinityGraph, width: int) -> tuple[Blocks, int]:
    """The blocks to draw and the width of a cell (2 characters when they fit, for square cells)."""
    label = len(str(max(0, graph.threads - 1)))
    available = max(8, width - label - 1)
    blocks = aggregate(graph, min(MAX_CELLS, available))
    cell = 2 if 2 * len(blocks.starts) <= available else 1
    return blocks, cell


def heatmap(graph: AffinityGraph, width: int = 80):
    """The heat map as a rich Text: a header of thread numbers, then one line per thread (or block)."""
    return _map_text(*layout(graph, width))


def _map_text(blocks: Blocks, cell: int):
    from rich.text import Text

    label = len(str(blocks.starts[-1]))
    top = blocks.top
    text = Text(no_wrap=True, overflow="crop")
    text.append(_header(blocks.starts, label, cell) + "\n", style="dim")
    for a, row in enumerate(blocks.matrix):
        text.append(f"{blocks.starts[a]:>{label}} ", style="dim")
        for value in row:
            lvl = level(value, top)
            if lvl == 0:
                text.append(ZERO * cell, style="dim")
            else:
                text.append(GLYPHS[lvl - 1] * cell, style=COLOURS[lvl - 1])
        text.append("\n")
    return text


def _header(starts: list[int], label: int, cell: int) -> str:
    """Thread numbers over the columns, every ``step`` columns so that they never touch."""
    widest = len(str(starts[-1])) + 1
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10**9) if s * cell >= widest)
    line = [" "] * (label + 1 + len(starts) * cell)
    for c in range(0, len(starts), step):
        number = str(starts[c])
        at = label + 1 + c * cell
        if at + len(number) <= len(line):  # never wider than the rows
            line[at : at + len(number)] = number
    return "".join(line).rstrip()


def legend(graph: AffinityGraph, width: int = 80):
    """The scale: the glyphs in order and the weight of one step; and the grouping, if any."""
    return _legend_text(*layout(graph, width))


def _legend_text(blocks: Blocks, cell: int):
    from rich.text import Text

    top = blocks.top
    text = Text()
    if blocks.grouped:
        last = blocks.threads - blocks.starts[-1]
        uneven = f" (the last {last})" if last != blocks.size else ""
        text.append(
            f"{blocks.threads} threads do not fit: grouped in {len(blocks.starts)} blocks of {blocks.size}{uneven}; "
            "a cell sums the weights between two blocks, the diagonal the weight inside a block\n"
        )
    if top <= 0:  # nothing to scale; the summary says that no pair shares anything
        return text
    text.append("scale: ")
    text.append(ZERO * cell, style="dim")
    text.append(" 0   ")
    for lvl in range(1, LEVELS + 1):
        text.append(GLYPHS[lvl - 1] * cell, style=COLOURS[lvl - 1])
        text.append(" " if cell > 1 and lvl < LEVELS else "")
    text.append(f"  {LEVELS} steps of {number(top / LEVELS)} up to {number(top)}, the largest {'cell' if blocks.grouped else 'weight'}\n")
    return text


def summary(graph: AffinityGraph) -> list[str]:
    """A few lines: size, granularity, how it was measured, total weight, the heaviest pairs."""
    n = graph.threads
    unit = {"line": "cache line", "page": "page", "message": "message"}.get(graph.granularity, graph.granularity)
    if graph.unit_bytes:
        unit += f" ({number(graph.unit_bytes)} bytes)"
    lines = [f"{plural(n, 'thread')}, granularity: {unit}", f"measured: {measured_text(graph.measured)}"]
    import numpy as np

    upper = graph.as_array()[np.triu_indices(n, 1)]
    pairs = n * (n - 1) // 2
    volume = graph.volume or []
    lines.append(
        f"total weight {number(float(upper.sum()))} over {number(int((upper > 0).sum()))} of {number(pairs)} "
        f"{'pair' if pairs == 1 else 'pairs'}" + (f"; volume per thread {number(min(volume))} to {number(max(volume))}" if volume else "")
    )
    top = heaviest_pairs(graph)
    if not top:
        lines.append("no pair of threads shares anything: every weight is 0")
        return lines
    lines.append(f"heaviest {plural(len(top), 'pair')}:")
    widest = max(len(number(p.weight)) for p in top)
    label = len(str(n - 1))
    for p in top:
        lines.append(f"  threads {p.first:>{label}} - {p.second:<{label}}  {number(p.weight):>{widest}}  {p.share:6.1%} of the total")
    return lines


def measured_text(measured: dict[str, Any]) -> str:
    """``method exact, program ./pairs -n 4, slowdown 3.1x``; unknown keys follow as key=value."""
    if not measured:
        return "not recorded"
    parts = []
    for key in ("method", "program", "file", "slowdown"):
        if key not in measured:
            continue
        value = measured[key]
        if key == "program" and isinstance(value, list):
            value = shlex.join(map(str, value))
        elif key == "slowdown" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = f"{value:.3g}x"
        parts.append(f"{key} {value}")
    extra = [f"{k}={v}" for k, v in measured.items() if k not in ("method", "program", "file", "slowdown") and isinstance(v, (str, int, float, bool))]
    return ", ".join(parts + extra) or "not recorded"


def number(value: float) -> str:
    """Whole numbers with thousands separators, others with 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.4g}"


def render(graph: AffinityGraph, width: int = 80) -> list:
    """Everything ``pinlab graph show`` prints, in order (rich renderables and plain lines)."""
    blocks, cell = layout(graph, width)
    return [_map_text(blocks, cell), _legend_text(blocks, cell), *summary(graph)]
