"""Draw a placement: the machine as nested boxes, each thread's number in the CPU it is pinned to.

The picture answers "what does compact (or scatter) mean on *this* machine?" at a glance, so it
follows lstopo's graphical output (Machine > Package > Group/Die > caches > Core > PU, NUMA
nodes as bands in the object whose CPUs are local to them) and spends its space on what a
placement decides: PUs are never merged away and carry the thread numbers in bold on a coloured
fill; levels that add no choice (a chain of single children, instruction caches) are folded
into one box so that 256-PU machines stay readable.

Layout works in points (1/72 inch) with fixed font sizes, so text keeps the same size whatever
the machine; the figure is sized from the layout (and only scaled down past a maximum size).
matplotlib is imported inside :func:`draw`, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.outputs import check_picture
from pinlab.placement.plan import Placement
from pinlab.topology.model import TopoObject
from pinlab.topology.render import format_size
from pinlab.words import plural

# -- sizes, in points ------------------------------------------------------------------------
PAD = 3.5  # inside a box, around its content
GAP = 3.5  # between sibling boxes
MARGIN = 10.0  # around the whole picture
LINE = 1.3  # line height, as a multiple of the font size
#: Character widths of DejaVu Sans (matplotlib's default font), as multiples of the font size.
NARROW, MEDIUM, WIDE = frozenset(" ,.:;'|ilIjJ"), frozenset("frt()-"), frozenset("mwMW#=+")
BOLD = 1.1  # bold text is this much wider

FONT_TITLE = 12.0
FONT_NOTE = 8.0
FONT_BOX = 7.0  # labels of packages, caches, cores
FONT_NUMA = 7.0
FONT_PU = 6.5  # "P#12" in a PU
FONT_THREAD = 9.5  # the thread numbers, bold

PU_MIN_WIDTH = 28.0
NUMA_HEIGHT = FONT_NUMA * LINE + 2 * 2.0

#: Up to this many children are drawn in one row, unless the row would be too long and flat.
MAX_ROW = 8
MAX_ROW_ASPECT = 2.5
#: ... or if the row is at most this wide (a small machine may be long and flat).
ROW_WIDTH_OK = 720.0
#: Wider grids aim at this width:height ratio, and avoid empty space (a ragged last row).
TARGET_ASPECT = 2.5
EMPTY_WEIGHT = 4.0
#: Children of up to this many different sizes in a row are arranged size by size.
MAX_RUNS = 4
#: Most threads written out in one PU; more show as "0,8,+6".
MAX_THREADS_SHOWN = 3

#: A bigger layout is scaled down to fit (Agg cannot draw past 2^16 pixels; nobody can read it).
MAX_INCHES = 60.0
PNG_DPI = 150
PNG_MAX_PIXELS = 9000

# -- colours ---------------------------------------------------------------------------------
FILL = {
    "Machine": "#ffffff",
    "Package": "#e3e3e3",
    "Die": "#ececec",
    "Group": "#f2f2f2",
    "Cache": "#fafafa",
    "Core": "#cdd5dc",
    "PU": "#ffffff",
    "NUMANode": "#d7ead0",
}
USED_FILL = "#ffa94d"
SHARED_FILL = "#f25f4c"
DISALLOWED_FILL = "#c8c8c8"
DISALLOWED_HATCH = "///"
HATCH_COLOUR = "#8c8c8c"
EDGE = "#404040"


@dataclass(eq=False)
class Box:
    """One drawn box: a topology object, or a chain of single children folded into one.

    ``objects`` is the chain, outermost first; ``children`` the boxes drawn inside it, ``memory``
    the NUMA nodes drawn as bands at its top. Sizes and positions (top-left corner, y going down)
    are filled in by :func:`measure` and :func:`_place`.
    """

    objects: list[TopoObject]
    children: list[Box] = field(default_factory=list)
    memory: list[TopoObject] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    rows: list[list[int]] = field(default_factory=list)
    numa_in_row: bool = True
    shape: int = 0
    width: float = 0.0
    height: float = 0.0
    x: float = 0.0
    y: float = 0.0

    @property
    def obj(self) -> TopoObject:
        """The object whose look the box takes: the core of a folded cache+core chain, else the first."""
        for o in self.objects:
            if o.type == "Core":
                return o
        return self.objects[0]

    @property
    def is_pu(self) -> bool:
        return self.objects[0].type == "PU"

    def walk(self) -> Iterator[Box]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class Picture:
    """A laid-out picture: the machine's box plus the texts around it, all in points."""

    root: Box
    title: str
    note: str
    threads_on: dict[int, list[int]]
    legend: list[tuple[str, str, bool]]
    width: float = 0.0
    height: float = 0.0
    #: Pictures of a node split among ranks: each PU's text and fill, instead of thread numbers.
    pu_texts: dict[int, str] | None = None
    pu_fills: dict[int, str] | None = None


# -- public entry point ----------------------------------------------------------------------
def draw(placement: Placement, path: str | Path) -> None:
    """Draw ``placement`` to ``path``; the suffix (.svg or .png) chooses the format.

    Raises :class:`UsageError` for another suffix or a directory that does not exist, before
    any drawing, so the user gets a one-line message rather than a matplotlib traceback.
    """
    target = Path(path)
    fmt = check_picture(target)
    picture = layout(placement)
    _render(picture, target, fmt)


# -- what each PU shows ----------------------------------------------------------------------
def threads_by_cpu(placement: Placement) -> dict[int, list[int]]:
    """The threads pinned to each CPU (OS index), in thread order; empty for the ``none`` strategy."""
    found: dict[int, list[int]] = {}
    for thread, cpu in enumerate(placement.cpus or []):
        found.setdefault(cpu, []).append(thread)
    return found


def thread_text(threads: list[int]) -> str:
    """``"3"``, ``"0,8"``; past a few threads ``"0,8,+6"`` so the PU box stays small."""
    if len(threads) <= MAX_THREADS_SHOWN:
        return ",".join(map(str, threads))
    shown = threads[: MAX_THREADS_SHOWN - 1]
    return ",".join(map(str, shown)) + f",+{len(threads) - len(shown)}"


def title_of(placement: Placement) -> str:
    """``scatter, 4 threads on clovertown``; says that nobody pins for ``none``."""
    name = placement.topology.name
    if placement.cpus is None:
        return f"none: the OS places the threads ({plural(placement.threads, 'thread')} on {name}, no pinning)"
    strategy = placement.strategy
    if placement.expression:
        strategy += f" {placement.expression}"
    if placement.seed is not None and placement.strategy == "random":
        strategy += f" (seed {placement.seed})"
    extras = [word for flag, word in ((placement.smt, "smt"), (placement.oversubscribe, "oversubscribed")) if flag]
    count = f"{placement.threads} thread{'s' if placement.threads != 1 else ''}"
    return f"{strategy}, {count} on {name}" + (f" ({', '.join(extras)})" if extras else "")


# -- labels ----------------------------------------------------------------------------------
def short_label(obj: TopoObject) -> str:
    """The compact label a box shows: ``Package P#1``, ``L3 32MiB``, ``Core P#4``, ``P#12``.

    Shorter than :func:`pinlab.topology.render.describe` (no logical index where an OS index
    or a size identifies the object) because boxes of a dense machine are narrow.
    """
    if obj.type == "PU":
        return f"P#{obj.os_index}" if obj.os_index is not None else f"PU L#{obj.logical_index}"
    if obj.type == "Machine":
        return "Machine"
    if obj.type == "NUMANode":
        text = f"NUMANode P#{obj.os_index}" if obj.os_index is not None else f"NUMANode L#{obj.logical_index}"
        memory = obj.attributes.get("local_memory")
        return f"{text} {format_size(int(memory))}" if memory else text
    if obj.is_cache and obj.attributes.get("cache_size"):
        return f"{obj.kind} {format_size(int(obj.attributes['cache_size']))}"
    if obj.type in ("Package", "Die", "Core") and obj.os_index is not None:
        return f"{obj.kind} P#{obj.os_index}"
    return f"{obj.kind} L#{obj.logical_index}"


def _chain_labels(chain: list[TopoObject]) -> list[str]:
    """Labels for a folded chain: its package/die/group/core and its outermost data cache.

    Inner caches of the chain (the L1d under an L2 of the same core) are left out: they add a
    line to every core and nothing to a placement. The Machine is named only when alone.
    """
    labels: list[str] = []
    cache_named = False
    for obj in chain:
        if obj.type == "Machine":
            continue
        if obj.is_cache:
            if cache_named or not obj.is_data_cache:
                continue
            cache_named = True
        labels.append(short_label(obj))
    return labels or [short_label(chain[0])]


# -- building the box tree -------------------------------------------------------------------
def _shown_children(obj: TopoObject) -> list[TopoObject]:
    """Children to draw: instruction caches are skipped (their children take their place)."""
    shown: list[TopoObject] = []
    for child in obj.children:
        if child.is_cache and not child.is_data_cache:
            shown.extend(_shown_children(child))
        else:
            shown.append(child)
    return shown


def build(obj: TopoObject, shapes: dict[tuple, int] | None = None) -> Box:
    """The box tree below ``obj``, chains of single children folded into one box.

    Folding stops at an object that holds NUMA nodes (its band must be inside the right box)
    and never swallows a PU: PUs are where the thread numbers go. Boxes with the same
    structure (levels, NUMA bands, children) get the same ``shape`` number, so that they can be
    drawn the same size.
    """
    shapes = {} if shapes is None else shapes
    chain = [obj]
    while chain[-1].type != "PU" and not chain[-1].memory_children:
        kids = _shown_children(chain[-1])
        if len(kids) != 1 or kids[0].type == "PU":
            break
        chain.append(kids[0])
    last = chain[-1]
    box = Box(objects=chain, memory=list(last.memory_children), labels=_chain_labels(chain))
    box.children = [build(child, shapes) for child in _shown_children(last)] if last.type != "PU" else []
    key = (tuple(o.kind for o in chain), len(box.memory), tuple(c.shape for c in box.children))
    box.shape = shapes.setdefault(key, len(shapes))
    return box


# -- measuring -------------------------------------------------------------------------------
def text_width(text: str, size: float, bold: bool = False) -> float:
    """A text's width in points, from DejaVu Sans's character widths (within a few percent).

    An estimate rather than a measure: no renderer is needed to lay out, and an SVG viewer
    draws the text in its own sans-serif font anyway.
    """
    ems = 0.0
    for char in text:
        if char in NARROW:
            ems += 0.32
        elif char in MEDIUM:
            ems += 0.40
        elif char in WIDE:
            ems += 0.90
        elif char.isupper():
            ems += 0.72
        else:
            ems += 0.63
    return ems * size * (BOLD if bold else 1.0)


def _label_font(box: Box) -> tuple[float, bool]:
    """Packages get a bold label: they are what a user looks for first."""
    return FONT_BOX, box.obj.type == "Package"


Sizes = list[tuple[float, float]]


def flow(sizes: Sizes, limit: float) -> list[list[int]]:
    """Children (by index) packed left to right into rows no wider than ``limit``, in order.

    Filling rows by width rather than by count keeps mixed children tidy: on a hybrid CPU the
    eight big cores fill one row and the two clusters of small cores the next.
    """
    rows: list[list[int]] = []
    width = 0.0
    for i, (w, _) in enumerate(sizes):
        if rows and width + GAP + w <= limit + 0.01:
            rows[-1].append(i)
            width += GAP + w
        else:
            rows.append([i])
            width = w
    return rows


def grid_size(sizes: Sizes, rows: list[list[int]]) -> tuple[float, float]:
    """Width and height of children laid out in ``rows``."""
    width = max((sum(sizes[i][0] for i in row) + GAP * (len(row) - 1) for row in rows), default=0.0)
    height = sum(max(sizes[i][1] for i in row) for row in rows) + GAP * max(len(rows) - 1, 0)
    return width, height


def arrange(sizes: Sizes) -> list[list[int]]:
    """How the children of one box are arranged in rows.

    Children come in runs of equal size (the big cores then the small-core clusters of a hybrid
    CPU); with a few runs, each run is arranged on its own and starts a new row, so that a row
    never mixes kinds. Within a run, see :func:`_arrange_run`.
    """
    runs: list[list[int]] = []
    for i, size in enumerate(sizes):
        if runs and _same_size(sizes[runs[-1][-1]], size):
            runs[-1].append(i)
        else:
            runs.append([i])
    if not 1 < len(runs) <= MAX_RUNS:
        return _arrange_run(sizes)
    rows: list[list[int]] = []
    for run in runs:
        rows.extend([[run[i] for i in row] for row in _arrange_run([sizes[i] for i in run])])
    return rows


def _same_size(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return abs(a[0] - b[0]) < 0.5 and abs(a[1] - b[1]) < 0.5


def _arrange_run(sizes: Sizes) -> list[list[int]]:
    """Rows for children of (mostly) one size.

    A few children sit in one row, as in lstopo, if that row is short or not too flat. Many
    children (or a long, flat row) wrap into rows: every row width that a run of the first
    children gives is tried, and the grid kept is the one whose shape is closest to
    ``TARGET_ASPECT`` with the least empty space (a full last row: 8 x 8 rather than 7 x 9 + 1).
    Applied at every level, this keeps the whole picture landscape whatever the machine.
    """
    n = len(sizes)
    one_row = [list(range(n))]
    if n <= 1:
        return one_row
    width, height = grid_size(sizes, one_row)
    if n <= MAX_ROW and (width <= MAX_ROW_ASPECT * height or width <= ROW_WIDTH_OK):
        return one_row
    area = sum((w + GAP) * (h + GAP) for w, h in sizes)
    best: tuple[float, list[list[int]]] | None = None
    limit = -GAP
    for w, _ in sizes:
        limit += GAP + w
        rows = flow(sizes, limit)
        gw, gh = grid_size(sizes, rows)
        empty = 1 - area / ((gw + GAP) * (gh + GAP))
        cost = abs(math.log(gw / gh / TARGET_ASPECT)) + EMPTY_WEIGHT * empty
        if best is None or cost < best[0] - 1e-9:
            best = (cost, rows)
    assert best is not None
    return best[1]


def measure(root: Box, pu_size: tuple[float, float]) -> None:
    """Fill in the size of every box, boxes of one shape made the same size.

    Labels make otherwise identical boxes differ by a few points ("Core P#9" / "Core P#10"),
    which would make grids ragged; each pass grows every box to the largest natural size of
    its shape in the pass before, until nothing changes (two or three passes).
    """
    floor: dict[int, tuple[float, float]] = {}
    for _ in range(5):
        seen: dict[int, tuple[float, float]] = {}
        _measure(root, pu_size, floor, seen)
        if seen == floor:
            return
        floor = seen


def _measure(box: Box, pu_size: tuple[float, float], floor: dict[int, tuple[float, float]], seen: dict[int, tuple[float, float]]) -> None:
    """Fill in the size of ``box`` and everything in it, bottom-up; no smaller than ``floor``."""
    if box.is_pu:
        box.width, box.height = pu_size
        box.lines = [box.labels[0]]
        return
    for child in box.children:
        _measure(child, pu_size, floor, seen)
    sizes = [(c.width, c.height) for c in box.children]
    box.rows = arrange(sizes) if sizes else []
    grid_w, grid_h = grid_size(sizes, box.rows)

    font, bold = _label_font(box)
    one_line = "  ".join(box.labels)
    box.lines = [one_line] if text_width(one_line, font, bold) <= grid_w or len(box.labels) == 1 else list(box.labels)
    label_w = max(text_width(line, font, bold) for line in box.lines)
    content_w = max(grid_w, label_w)

    numa_h = 0.0
    if box.memory:
        band_w = max(text_width(short_label(n), FONT_NUMA) for n in box.memory) + 2 * PAD
        row_w = len(box.memory) * band_w + GAP * (len(box.memory) - 1)
        box.numa_in_row = row_w <= max(content_w, band_w) or len(box.memory) == 1
        content_w = max(content_w, row_w if box.numa_in_row else band_w)
        bands = 1 if box.numa_in_row else len(box.memory)
        numa_h = bands * NUMA_HEIGHT + (bands - 1) * GAP + GAP

    width = content_w + 2 * PAD
    height = PAD + len(box.lines) * font * LINE + numa_h + grid_h + PAD
    old_w, old_h = seen.get(box.shape, (0.0, 0.0))
    seen[box.shape] = (max(old_w, width), max(old_h, height))
    least_w, least_h = floor.get(box.shape, (0.0, 0.0))
    box.width, box.height = max(width, least_w), max(height, least_h)


def _place(box: Box, x: float, y: float) -> None:
    """Fill in the position of ``box`` and everything in it, top-down."""
    box.x, box.y = x, y
    if box.is_pu:
        return
    font, _ = _label_font(box)
    cursor = y + PAD + len(box.lines) * font * LINE
    if box.memory:
        cursor += (1 if box.numa_in_row else len(box.memory)) * (NUMA_HEIGHT + GAP)
    sizes = [(c.width, c.height) for c in box.children]
    for row in box.rows:
        left = x + PAD
        for i in row:
            _place(box.children[i], left, cursor)
            left += sizes[i][0] + GAP
        cursor += max(sizes[i][1] for i in row) + GAP


def numa_bands(box: Box) -> list[tuple[TopoObject, float, float, float]]:
    """Where the NUMA bands of ``box`` go: (node, x, y, width), side by side or stacked."""
    font, _ = _label_font(box)
    top = box.y + PAD + len(box.lines) * font * LINE
    inner = box.width - 2 * PAD
    count = len(box.memory)
    if box.numa_in_row:
        width = (inner - GAP * (count - 1)) / count if count else inner
        return [(node, box.x + PAD + i * (width + GAP), top, width) for i, node in enumerate(box.memory)]
    return [(node, box.x + PAD, top + i * (NUMA_HEIGHT + GAP), inner) for i, node in enumerate(box.memory)]


def _puformat_size(placement: Placement, threads_on: dict[int, list[int]], texts: dict[int, str] | None = None) -> tuple[float, float]:
    """One size for every PU, wide enough for the longest CPU label and thread list (or text)."""
    widest = PU_MIN_WIDTH
    for pu in placement.topology.pus:
        widest = max(widest, text_width(short_label(pu), FONT_PU) + 2 * PAD)
        if texts is not None and pu.os_index in texts:
            widest = max(widest, text_width(texts[pu.os_index], FONT_THREAD, bold=True) + 2 * PAD)
        elif pu.os_index in threads_on:
            widest = max(widest, text_width(thread_text(threads_on[pu.os_index]), FONT_THREAD, bold=True) + 2 * PAD)
    height = PAD + FONT_PU * LINE + FONT_THREAD * LINE + PAD / 2
    return widest, height


def layout(placement: Placement) -> Picture:
    """Build, measure and place the whole picture (no matplotlib involved)."""
    topo = placement.topology
    threads_on = threads_by_cpu(placement)
    pu_w, pu_h = _puformat_size(placement, threads_on)
    root = build(topo.root)
    measure(root, (pu_w, pu_h))

    legend = [("PU with one thread", USED_FILL, False)] if placement.cpus is not None else []
    if any(len(t) > 1 for t in threads_on.values()):
        legend.append(("PU shared by several threads", SHARED_FILL, False))
    legend.append(("free PU" if placement.cpus is not None else "PU", FILL["PU"], False))
    if any(not pu.allowed for pu in topo.pus) or any(not n.allowed for n in topo.numa_nodes):
        legend.append(("not allowed for this process", DISALLOWED_FILL, True))
    if placement.cpus is None:
        note = "no thread is pinned; the OS may run them on any allowed PU. P# = OS CPU number"
    else:
        note = "bold: thread numbers (0 = main thread) in the PU each is pinned to; P# = OS CPU number"
        if any(len(t) > MAX_THREADS_SHOWN for t in threads_on.values()):
            note += '; "+N": N more threads'
    return _placed(Picture(root, title_of(placement), note, threads_on, legend))


def _placed(picture: Picture) -> Picture:
    """``picture`` with its measured box tree placed under the title and note, and its size set
    around the boxes, the texts and the legend."""
    top = MARGIN + FONT_TITLE * LINE + FONT_NOTE * LINE + GAP
    _place(picture.root, MARGIN, top)
    legend_w = sum(12 + GAP + text_width(text, FONT_NOTE) + 3 * GAP for text, _, _ in picture.legend)
    content_w = max(picture.root.width, text_width(picture.title, FONT_TITLE, bold=True), text_width(picture.note, FONT_NOTE), legend_w)
    picture.width = content_w + 2 * MARGIN
    picture.height = top + picture.root.height + 2 * GAP + FONT_NOTE * LINE + MARGIN
    return picture


# -- drawing ---------------------------------------------------------------------------------
def _fill_of(obj: TopoObject) -> str:
    return FILL["Cache"] if obj.is_cache else FILL.get(obj.type, FILL["Group"])


def _render(picture: Picture, target: Path, fmt: str) -> None:
    """Draw the laid-out picture with matplotlib's non-interactive Agg/SVG canvases and save it.

    It uses a bare :class:`~matplotlib.figure.Figure` rather than pyplot, so it needs no
    display and changes no global backend of a program that calls it.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    scale = min(1.0, MAX_INCHES * 72 / max(picture.width, picture.height))
    # svg.fonttype none: texts stay texts in the SVG (searchable, selectable); a fixed hash salt
    # and no date make the same placement give the same file.
    settings = {"svg.fonttype": "none", "svg.hashsalt": "pinlab", "hatch.linewidth": 0.6 * scale}
    with matplotlib.rc_context(settings):
        fig = Figure(figsize=(picture.width * scale / 72, picture.height * scale / 72))
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, picture.width)
        ax.set_ylim(picture.height, 0)
        ax.set_axis_off()
        _Painter(ax, scale).picture(picture)
        try:
            if fmt == "png":
                inches = max(picture.width, picture.height) * scale / 72
                fig.savefig(target, format="png", dpi=min(PNG_DPI, PNG_MAX_PIXELS / inches), facecolor="white")
            else:
                fig.savefig(target, format="svg", metadata={"Date": None}, facecolor="white")
        except OSError as exc:
            raise UsageError(f"cannot write picture {str(target)!r}: {exc.strerror or exc}") from None


class _Painter:
    """Turns boxes into matplotlib rectangles and texts; fonts scaled with the figure."""

    def __init__(self, ax, scale: float) -> None:
        from matplotlib.patches import Rectangle

        self.ax = ax
        self.scale = scale
        self.rectangle = Rectangle

    def rect(self, x: float, y: float, w: float, h: float, fill: str, *, hatch: str | None = None, zorder: float = 0, lw: float = 0.7) -> None:
        """A box; a hatched one gets light hatching (its own patch: matplotlib draws the hatch
        in the edge colour) so that its label stays readable."""
        self.ax.add_patch(self.rectangle((x, y), w, h, facecolor=fill, edgecolor=EDGE, linewidth=lw * self.scale, zorder=zorder))
        if hatch:
            self.ax.add_patch(self.rectangle((x, y), w, h, fill=False, edgecolor=HATCH_COLOUR, linewidth=0, hatch=hatch, zorder=zorder))

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float,
        *,
        bold: bool = False,
        ha: str = "left",
        va: str = "top",
        zorder: float = 0,
        color: str = "black",
    ) -> None:
        self.ax.text(
            x,
            y,
            text,
            fontsize=size * self.scale,
            fontweight="bold" if bold else "normal",
            ha=ha,
            va=va,
            zorder=zorder,
            color=color,
            family="DejaVu Sans",
        )

    def picture(self, picture: Picture) -> None:
        self.text(MARGIN, MARGIN, picture.title, FONT_TITLE, bold=True)
        self.text(MARGIN, MARGIN + FONT_TITLE * LINE, picture.note, FONT_NOTE, color="#333333")
        for box in picture.root.walk():
            self.box(box, picture)
        self.legend(picture)

    def box(self, box: Box, picture: Picture) -> None:
        depth = box.objects[0].depth
        if box.is_pu:
            self.pu(box, picture.threads_on, picture)
            return
        disallowed = not box.obj.allowed
        self.rect(box.x, box.y, box.width, box.height, DISALLOWED_FILL if disallowed else _fill_of(box.obj), zorder=depth)
        font, bold = _label_font(box)
        for i, line in enumerate(box.lines):
            self.text(box.x + PAD, box.y + PAD + i * font * LINE, line, font, bold=bold, zorder=depth + 0.5)
        for node, x, y, width in numa_bands(box):
            fill = FILL["NUMANode"] if node.allowed else DISALLOWED_FILL
            self.rect(x, y, width, NUMA_HEIGHT, fill, hatch=None if node.allowed else DISALLOWED_HATCH, zorder=depth + 0.5)
            self.text(x + PAD, y + NUMA_HEIGHT / 2, short_label(node), FONT_NUMA, va="center_baseline", zorder=depth + 0.6)

    def pu(self, box: Box, threads_on: dict[int, list[int]], picture: Picture | None = None) -> None:
        pu = box.objects[0]
        threads = threads_on.get(pu.os_index, [])
        if not pu.allowed:
            fill, hatch = DISALLOWED_FILL, DISALLOWED_HATCH
        elif picture is not None and picture.pu_fills is not None:
            fill, hatch = picture.pu_fills.get(pu.os_index, FILL["PU"]), None
        else:
            fill, hatch = (SHARED_FILL if len(threads) > 1 else USED_FILL) if threads else FILL["PU"], None
        z = 100
        self.rect(box.x, box.y, box.width, box.height, fill, hatch=hatch, zorder=z, lw=0.9 if threads else 0.6)
        center = box.x + box.width / 2
        self.text(center, box.y + PAD / 2, box.lines[0], FONT_PU, ha="center", zorder=z + 1, color="#222222")
        text = (
            picture.pu_texts.get(pu.os_index) if picture is not None and picture.pu_texts is not None else (thread_text(threads) if threads else None)
        )
        if text:
            self.text(center, box.y + PAD / 2 + FONT_PU * LINE, text, FONT_THREAD, bold=True, ha="center", zorder=z + 1)

    def legend(self, picture: Picture) -> None:
        x = MARGIN
        y = picture.root.y + picture.root.height + 2 * GAP
        size = FONT_NOTE
        for text, fill, hatched in picture.legend:
            self.rect(x, y, 12, size * 1.1, fill, hatch=DISALLOWED_HATCH if hatched else None, zorder=100)
            self.text(x + 12 + GAP, y + size * 0.55, text, size, va="center_baseline", zorder=100)
            x += 12 + GAP + text_width(text, size) + 3 * GAP


# -- a node split among MPI ranks (pinlab place --ranks R --picture FILE) ----------------------
#: One colour per rank, in turn (ColorBrewer's Set3, light enough for black text).
RANK_FILLS = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")


def draw_ranks(split, path: str | Path, placements: list[Placement] | None = None) -> None:
    """Draw a node split among ranks (:class:`pinlab.ranks.split.NodeSplit`): each rank's PUs in
    its colour, marked ``r1`` (or ``r1:0,2`` with its threads' numbers when ``placements`` are
    given), and each GPU named in the box of the object it attaches to (its locality)."""
    target = Path(path)
    fmt = check_picture(target)
    topo = split.topology
    texts: dict[int, str] = {}
    fills: dict[int, str] = {}
    for i, domain in enumerate(split.domains):
        threads_of: dict[int, list[int]] = {}
        if placements is not None and placements[i].cpus is not None:
            for t, cpu in enumerate(placements[i].cpus):
                threads_of.setdefault(cpu, []).append(t)
        for cpu in domain.cpus:
            fills[cpu] = RANK_FILLS[i % len(RANK_FILLS)]
            texts[cpu] = f"r{domain.rank}" + (f":{thread_text(threads_of[cpu])}" if cpu in threads_of else "")
    base = Placement(strategy="ranks", threads=len(split.domains), cpus=None, topology=topo)
    pu_w, pu_h = _puformat_size(base, {}, texts)
    root = build(topo.root)
    _label_gpus(root, split)
    measure(root, (pu_w, pu_h))
    legend = [
        (
            f"rank {d.rank}: CPUs {_cpus_text(d.cpus)}" + (f", {','.join(g.name for g in d.gpus)}" if d.gpus else ""),
            RANK_FILLS[i % len(RANK_FILLS)],
            False,
        )
        for i, d in enumerate(split.domains)
    ]
    if split.unused:
        legend.append(("no rank", FILL["PU"], False))
    gpus = f", next to {plural(len(split.gpus), 'GPU')}" if split.gpus else ""
    title = f"{plural(len(split.domains), 'local rank')} on {topo.name}{gpus}"
    note = (
        "r<rank> in each PU of the rank's domain"
        + ("; after ':' the numbers of the rank's threads pinned there" if placements else "")
        + ("; GPUs are named in the box of the object they attach to" if split.gpus else "")
        + ". P# = OS CPU number"
    )
    _render(_placed(Picture(root, title, note, {}, legend, pu_texts=texts, pu_fills=fills)), target, fmt)


def _cpus_text(cpus) -> str:
    return format_cpulist(cpus)


def _label_gpus(root: Box, split) -> None:
    """Add ``GPU cuda0 (04:00.0)`` to the label of the outermost box whose object's allowed CPUs
    are the GPU's locality (the package, group or NUMA node's parent its PCI bus hangs from)."""
    allowed = split.topology.allowed_cpus
    for gpu in split.gpus:
        for box in root.walk():
            if any((o.cpus & allowed) == gpu.cpus for o in box.objects):
                box.labels.append(f"GPU {gpu.name} ({gpu.busid.removeprefix('0000:')})")
                break
