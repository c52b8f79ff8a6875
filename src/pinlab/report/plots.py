"""Pictures of a study: run times per configuration, speedups, counters, and where threads ran over time.

Every function returns a :class:`matplotlib.figure.Figure` drawn with the Agg canvas; no pyplot
global state is touched, so figures can be made from threads and never open a window.

Every figure keeps what it writes inside its image, whatever the names of the study: titles are
wrapped to the width they have, x tick labels are wrapped to their slot and, when they would
still run into each other, replaced by numbers with a key under the figure, and the figure is
laid out by matplotlib's constrained layout (see :func:`_finish`).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

from pinlab.report.data import direction_of

__all__ = ["violin", "speedups", "counters", "timeline", "timeline_run", "save", "DPI", "metric_label"]

DPI = 110
_MAX_COLS = 3
_PAGE_INCHES = 12.0  # the HTML page shows figures up to about 1340 px wide unscaled, at 110 dpi
_MARKS = {"faster": "*", "slower": "x"}
_DEFAULTS = {"mem": ("", "none", "None", "first-touch"), "corun": ("", "none", "None")}
_TICK_SIZE = 8
_MAX_LABEL_LINES = 4  # a wrapped x tick label taller than this is replaced by a number and a key
_PAD = 6  # pixels kept free around texts at the figure's edges


def _figure(width: float, height: float):
    """An empty figure of ``width`` x ``height`` inches, laid out by matplotlib's constrained layout."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig, path) -> Path:
    """Write ``fig`` as a PNG at 110 dpi and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI)
    return path


# -- keeping texts inside the figure ------------------------------------------------------------
#: A piece of a line after which it may be broken: words, and names cut after + , / = ; |
_TOKEN = re.compile(r"[^\s+,/=;|]*(?:[+,/=;|]+\s*|\s+|$)")


def _text_width(text: str, size: float) -> float:
    """The width in pixels of the widest line of ``text`` at ``size`` points (at :data:`DPI`)."""
    return max((_line_width(line, float(size)) if line else 0.0 for line in str(text).split("\n")), default=0.0)


_MEASURE = None  # a renderer at DPI, only to measure texts


@functools.lru_cache(maxsize=4096)
def _line_width(line: str, size: float) -> float:
    """The width in pixels of one line of text in the default font (Agg measures it, as it draws it)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    global _MEASURE
    if _MEASURE is None:
        _MEASURE = RendererAgg(1, 1, DPI)
    return _MEASURE.get_text_width_height_descent(line, FontProperties(size=size), ismath=False)[0]


def _wrap(text: str, size: float, width: float, split_words: bool = True) -> str:
    """``text`` broken into lines at most ``width`` pixels wide: between words, after + , / = ; |
    in long names, and (``split_words``) inside a word only when the word alone is wider than a line."""
    width = max(width, 1.0)
    lines: list[str] = []
    for line in str(text).split("\n"):
        current = ""
        for token in _TOKEN.findall(line):
            if not token:
                continue
            if current and _text_width((current + token).rstrip(), size) > width:
                lines.append(current.rstrip())
                current = token.lstrip()
            else:
                current += token
            while split_words and len(current.rstrip()) > 1 and _text_width(current.rstrip(), size) > width:
                lo, hi = 1, len(current.rstrip()) - 1  # the longest head that fits (at least a character)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    lo, hi = (mid, hi) if _text_width(current[:mid], size) <= width else (lo, mid - 1)
                lines.append(current[:lo])
                current = current[lo:]
        lines.append(current.rstrip())
    return "\n".join(lines)


def _raw(text) -> str:
    """The text an artist was given, before :func:`_finish` wrapped it."""
    raw = getattr(text, "_pinlab_raw", None)
    if raw is None:
        raw = text.get_text()
        text._pinlab_raw = raw
    return raw


def _wrap_titles(fig, footer) -> bool:
    """Wrap the figure's texts to its width and each Axes title to its Axes' width; True if one changed."""
    changed = False
    room = fig.bbox.width - 2 * _PAD
    texts = [(t, room) for t in fig.texts if t.get_visible() and t not in footer]
    for ax in fig.axes:
        if ax.get_visible():
            texts += [(t, min(room, ax.bbox.width)) for t in (ax.title, ax._left_title, ax._right_title)]
    for text, width in texts:
        raw = _raw(text)
        if not raw:
            continue
        wrapped = _wrap(raw, text.get_fontsize(), width)
        if wrapped != text.get_text():
            text.set_text(wrapped)
            changed = True
    return changed


def _crowded(fig, renderer, axes) -> bool:
    """Whether x tick labels of ``axes`` run into each other or out of the figure."""
    box = fig.bbox
    for ax in axes:
        extents = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()), key=lambda e: e.x0)
        if any(e.x0 < box.x0 or e.x1 > box.x1 or e.y0 < box.y0 for e in extents):
            return True
        if any(a.x1 > b.x0 - 2 for a, b in zip(extents, extents[1:])):
            return True
    return False


def _legend(fig, renderer, handles, labels, *, fontsize: float = 8, keys: bool = False):
    """A figure legend as wide as fits: as many columns as the figure's width takes, entries wider
    than the figure wrapped. ``keys``: the handles are blank, the entries are a key of numbers."""
    room = fig.bbox.width - 2 * _PAD
    style = {"fontsize": fontsize, "frameon": False, "loc": "upper center", "columnspacing": 1.6, "borderaxespad": 0}
    if keys:
        style.update(handlelength=0, handletextpad=0)
    per_em = fontsize * DPI / 72
    handle = 0 if keys else (2.0 + 0.8) * per_em
    labels = [_wrap(label, fontsize, room - handle - 2 * per_em) for label in labels]
    widest = max((_text_width(label, fontsize) for label in labels), default=0.0) + handle
    ncol = max(1, min(len(labels), int((room - per_em) // (widest + 1.6 * per_em)) or 1))
    while True:
        legend = fig.legend(handles=handles, labels=labels, ncol=ncol, **style)
        legend.set_in_layout(False)
        if ncol == 1 or legend.get_window_extent(renderer).width <= room:
            return legend
        legend.remove()
        ncol -= 1


def _place_footer(fig, renderer, footer) -> None:
    """Stack ``footer`` (legends and texts, top to bottom) under the figure's Axes: the figure
    grows by their height and the constrained layout keeps to the space above them."""
    base = getattr(fig, "_pinlab_height", None)
    if base is None:
        base = fig._pinlab_height = fig.get_figheight()
    heights = [item.get_window_extent(renderer).height for item in footer]
    band = sum(heights) + _PAD * (len(footer) + 1) if footer else 0.0
    fig.set_figheight(base + band / DPI)
    total = fig.bbox.height
    fig.get_layout_engine().set(rect=(0, band / total, 1, 1 - band / total))
    y = band - _PAD
    for item, height in zip(footer, heights):
        if hasattr(item, "set_bbox_to_anchor"):  # a legend, anchored at its upper centre
            item.set_bbox_to_anchor((0.5, y / total), transform=fig.transFigure)
        else:
            item.set_position((0.5, y / total))
            item.set_verticalalignment("top")
            item.set_horizontalalignment("center")
        y -= height + _PAD


def _number(fig, renderer, ticks, key, footer) -> None:
    """Replace x tick labels by numbers and add a key of what each number is under the figure."""
    from matplotlib.patches import Patch

    number = {k: i + 1 for i, k in enumerate(key)}
    for ax, _, keys in ticks:
        ax.set_xticklabels([str(number[k]) for k in keys], fontsize=_TICK_SIZE, rotation=0)
        if _slot(ax) < _text_width(str(len(number)), _TICK_SIZE) + 4:
            ax.tick_params(axis="x", labelrotation=90)
    colored = any(color is not None for _, color in key.values())
    handles = [Patch(facecolor=color or "none", edgecolor="black" if color else "none", linewidth=0.4) for _, color in key.values()]
    labels = [f"{number[k]}: {text}" for k, (text, _) in key.items()]
    footer.append(_legend(fig, renderer, handles, labels, keys=not colored))


def _slot(ax) -> float:
    """The width in pixels between two ticks one unit apart on the x axis of ``ax``."""
    low, high = ax.get_xlim()
    return ax.bbox.width / max(1e-9, abs(high - low))


def _wrap_ticks(ticks) -> tuple[bool, bool]:
    """Wrap each x tick label to the room between its ticks, never inside a word.

    (whether a label needs more than :data:`_MAX_LABEL_LINES` lines, whether a label changed)."""
    tall = changed = False
    for ax, labels, _ in ticks:
        wrapped = [_wrap(label, _TICK_SIZE, _slot(ax) - 6, split_words=False) for label in labels]
        tall = tall or any(w.count("\n") >= _MAX_LABEL_LINES for w in wrapped)
        if wrapped != [t.get_text() for t in ax.get_xticklabels()]:
            ax.set_xticklabels(wrapped, fontsize=_TICK_SIZE, rotation=0)
            changed = True
    return tall, changed


def _finish(fig, ticks=(), key=None, footer=()):
    """Make every text of ``fig`` fit in it, then return it.

    ``ticks``: (Axes, labels, keys) whose x tick labels are ``labels`` (one per tick already set),
    wrapped to the room between ticks; if one is then too tall, or labels run into each other
    once laid out, every label becomes the number of its key in ``key`` (key -> (text, colour or
    None), in the order to number them) and the key is written under the figure. ``footer``:
    legends and texts stacked under the Axes. Titles are wrapped to their Axes' width. The
    figure is laid out again after each change, until its texts stay as they are.
    """
    renderer = fig.canvas.get_renderer()
    footer = list(footer)
    ticks = list(ticks) if key else []
    numbered = False

    def number():
        nonlocal numbered
        numbered = True
        _number(fig, renderer, ticks, key, footer)
        _place_footer(fig, renderer, footer)

    def rewrap() -> bool:
        changed = _wrap_titles(fig, footer)
        if ticks and not numbered:
            tall, moved = _wrap_ticks(ticks)
            if tall:
                number()
            changed = changed or tall or moved
        return changed

    _place_footer(fig, renderer, footer)
    rewrap()  # to the sizes before the layout, then again to those it gives, until they hold
    fig.draw_without_rendering()
    for _ in range(5):
        changed = rewrap()
        if not changed and ticks and not numbered and _crowded(fig, renderer, [t[0] for t in ticks]):
            number()
            changed = True
        if not changed:
            break
        fig.draw_without_rendering()
    return fig


def metric_label(report) -> str:
    metric = getattr(report, "metric", "time") or "time"
    return "wall time (s)" if metric == "time" else str(metric)


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(isinstance(value, float) and math.isnan(value))
    except TypeError:
        return False


def _variant(row) -> str:
    """The memory policy and co-runner of a configuration, as a short suffix ('' when none)."""
    parts = []
    for key in ("mem", "corun"):
        value = row.get(key) if hasattr(row, "get") else None
        if not _is_empty(value) and str(value) not in _DEFAULTS[key]:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _placements(report, frame) -> list[str]:
    """Placements in order: the baseline first, then as they first appear."""
    seen = []
    for p in frame["placement"].tolist() if "placement" in frame else []:
        if p not in seen:
            seen.append(p)
    base = getattr(report, "baseline", None)
    if base in seen:
        seen.remove(base)
        seen.insert(0, base)
    return seen


def _colors(names: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {name: cmap(i % 10) for i, name in enumerate(names)}


def _grid(n: int) -> tuple[int, int]:
    cols = max(1, min(_MAX_COLS, n))
    return int(math.ceil(n / cols)), cols


def _message(fig, text: str):
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#555555")
    return _finish(fig)


def _ok_mask(runs):
    import numpy as np

    metric = runs["metric"].astype(float)
    return (runs["status"] == "ok") & np.isfinite(metric)


def _threads_label(threads) -> str:
    if _is_empty(threads):
        return "default threads"
    try:
        n = int(threads)
    except (TypeError, ValueError):
        return f"{threads} threads"
    return "1 thread" if n == 1 else f"{n} threads"


def _compared(report, cmp, base):
    """What a chart against the baseline shows: the placements compared (in study order), their
    colours (the baseline keeps its own), and the (program, threads, variant) groups of bars."""
    placements = [p for p in _placements(report, cmp) if p != base]
    colors = _colors([base] + placements if base else placements)
    groups = list(dict.fromkeys((r["program"], r["threads"], _variant(r)) for _, r in cmp.iterrows()))
    return placements, colors, groups


def violin(report):
    """Metric of every run, one panel per program x threads, one violin per placement.

    Each run is a dot; the median is a black bar. Failed, timed-out and NaN runs are left out
    and counted in the panel title. A configuration with one run (or runs all equal) has dots
    and its median but no violin.
    """
    import numpy as np

    runs = report.runs
    if runs is None or len(runs) == 0:
        return _message(_figure(6, 3), "no runs measured")
    ok = _ok_mask(runs)
    keys = list(dict.fromkeys(zip(runs["program"], runs["threads"])))
    rows, cols = _grid(len(keys))
    placements = _placements(report, runs)
    colors = _colors(placements)
    fig = _figure(4.3 * cols, 3.4 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False)
    rng = np.random.default_rng(0)
    ylabel = metric_label(report)
    ticks, key = [], {}
    for i, (program, threads) in enumerate(keys):
        ax = axes[i // cols][i % cols]
        sel = (runs["program"] == program) & (runs["threads"].astype(str) == str(threads))
        panel = runs[sel]
        groups = []  # (label, placement, values, (placement, variant))
        seen = []
        for _, row in panel.iterrows():
            k = (row["placement"], _variant(row))
            if k not in seen:
                seen.append(k)
        seen.sort(key=lambda k: (placements.index(k[0]) if k[0] in placements else 99, k[1]))
        for placement, variant in seen:
            mask = (panel["placement"] == placement) & (panel.apply(_variant, axis=1) == variant)
            values = panel[mask & ok[sel]]["metric"].astype(float).to_numpy()
            label = placement if not variant else f"{placement}\n{variant}"
            groups.append((label, placement, values, (placement, variant)))
        excluded = int((~ok[sel]).sum())
        for x, (label, placement, values, _) in enumerate(groups, start=1):
            color = colors.get(placement, "grey")
            if len(values) >= 2 and np.ptp(values) > 0:
                parts = ax.violinplot([values], positions=[x], widths=0.8, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(color)
                    body.set_edgecolor(color)
                    body.set_alpha(0.35)
            if len(values):
                jitter = rng.uniform(-0.12, 0.12, len(values))
                ax.scatter(x + jitter, values, s=12, color=color, edgecolors="black", linewidths=0.4, zorder=3)
                ax.hlines(np.median(values), x - 0.3, x + 0.3, color="black", linewidth=2, zorder=4)
            else:
                ax.text(x, 0.5, "no ok run", ha="center", va="center", rotation=90, transform=ax.get_xaxis_transform(), color="#aa0000", fontsize=8)
        ax.set_xticks(range(1, len(groups) + 1))
        ax.set_xlim(0.4, len(groups) + 0.6)
        ticks.append((ax, [g[0] for g in groups], [g[3] for g in groups]))
        for _, placement, _, k in groups:
            key[k] = (", ".join(part for part in k if part), colors.get(placement, "grey"))
        title = f"{program}, {_threads_label(threads)}"
        if excluded:
            title += f"\n({excluded} run{'s' if excluded != 1 else ''} failed/excluded)"
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for j in range(len(keys), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle(f"{ylabel} of every run (dots), median (bar)", fontsize=11)
    order = sorted(key, key=lambda k: (placements.index(k[0]) if k[0] in placements else 99, k[1]))
    return _finish(fig, ticks, {k: key[k] for k in order})


def speedups(report):
    """Median speedup of each placement over the baseline, per program x threads, with verdicts.

    A bar above 1 means the placement did better than the baseline. ``*`` marks a significant
    "faster" verdict, ``x`` a significant "slower"; no mark means no significant difference or
    more runs needed.
    """
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    stats = report.stats
    base = getattr(report, "baseline", None)
    if stats is None or len(stats) == 0 or "median_speedup" not in stats:
        return _message(_figure(6, 3), "no comparison with the baseline")
    cmp = stats[stats["placement"] != base]
    if len(cmp) == 0:
        return _message(_figure(6, 3), f"no placement other than the baseline ({base})")
    placements, colors, groups = _compared(report, cmp, base)
    width = 0.8 / max(1, len(placements))
    bars = len(groups) * max(1, len(placements))
    fig = _figure(_bars_width(1.0 + 0.35 * bars + 0.5 * len(groups), bars), 4.6)
    ax = fig.subplots()
    top = 1.0
    for gi, (program, threads, variant) in enumerate(groups):
        for pi, placement in enumerate(placements):
            hit = cmp[(cmp["program"] == program) & (cmp["threads"].astype(str) == str(threads)) & (cmp["placement"] == placement)]
            hit = hit[hit.apply(_variant, axis=1) == variant]
            if len(hit) == 0:
                continue
            row = hit.iloc[0]
            value = float(row["median_speedup"]) if not _is_empty(row["median_speedup"]) else float("nan")
            x = gi - 0.4 + width * (pi + 0.5)
            if not np.isfinite(value):
                ax.text(x, 1.0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            ax.bar(x, value, width * 0.92, color=colors[placement], edgecolor="black", linewidth=0.4)
            top = max(top, value)
            mark = _MARKS.get(str(row.get("verdict", "")))
            if mark:
                ax.text(x, value, mark, ha="center", va="bottom", fontsize=12, fontweight="bold")
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_ylim(0, top * 1.18)
    ax.set_xticks(range(len(groups)))
    ax.set_xlim(-0.6, len(groups) - 0.4)

    direction = direction_of(report)  # said beside the speedups: which way the metric is better
    ax.set_ylabel(f"median speedup over {base}\n({direction.better} is better: {direction.ratio(base)})", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    handles = [Patch(facecolor=colors[p], edgecolor="black", label=p) for p in placements]
    handles += [
        Line2D([], [], linestyle="none", marker="$*$", color="black", markersize=9, label="significantly faster"),
        Line2D([], [], linestyle="none", marker="x", color="black", markersize=7, label="significantly slower"),
        Line2D([], [], color="black", linestyle="--", label="1 = same as baseline"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(f"Median speedup over the baseline ({base}); above 1 is better", fontsize=11)
    return _finish(fig, [(ax, [_group_label(*g, True) for g in groups], groups)], _group_key(groups, True))


def _bars_width(natural: float, bars: int) -> float:
    """The width in inches of a bar chart: what its bars and labels ask for, within the page's
    width (numbered x labels need little room) unless the bars would be thinner than a line."""
    return max(6.0, min(natural, max(_PAGE_INCHES, 2.5 + 0.12 * bars), 22.0))


def _group_label(program, threads, variant, several_threads: bool, sep: str = "\n") -> str:
    """An x tick: the program, its thread count when the study has several, its variant."""
    parts = [str(program)] + ([_threads_label(threads)] if several_threads else []) + ([variant] if variant else [])
    return sep.join(parts)


def _group_key(groups, several_threads: bool) -> dict:
    """The key of numbered bar groups: (program, threads, variant) -> (its text, no colour)."""
    return {g: (_group_label(*g, several_threads, sep=", "), None) for g in groups}


def counters(report):
    """Each event's mean count per run, divided by the baseline's, one panel per event.

    As Figures 3-5 of [ribeiro2012]: a bar is a placement's count normalised
    to the OS placement of the same program, threads, memory policy and co-runner, so above 1
    means the placement caused more events, below 1 fewer. A ratio that cannot be computed (the
    baseline counted no event, or the event was not counted) is written "n/a" where its bar
    would be, rather than left out, so that a missing bar is never read as a ratio of 0.
    """
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    events = list(getattr(report, "counters", None) or [])
    stats = report.stats
    base = getattr(report, "baseline", None)
    if not events:
        return _message(_figure(6, 3), "no performance counter was counted")
    if stats is None or len(stats) == 0:
        return _message(_figure(6, 3), "no configuration has statistics")
    cmp = stats[stats["placement"] != base]
    if len(cmp) == 0:
        return _message(_figure(6, 3), f"no placement other than the baseline ({base})")
    placements, colors, groups = _compared(report, cmp, base)
    several_threads = len({str(t) for _, t, _ in groups}) > 1
    width = 0.8 / max(1, len(placements))
    bars = len(groups) * len(placements)
    # Panels side by side only while the figure fits the page (about 12 inches) unscaled:
    # shrunk to fit, its bar labels would be unreadable.
    panel_w = _bars_width(0.8 + 0.25 * bars + 0.25 * len(groups), bars) if bars > 12 else 4.3
    panel_w = max(4.3, min(panel_w, 0.8 + 0.25 * bars + 0.25 * len(groups)))
    cols = max(1, min(_MAX_COLS, len(events), int(_PAGE_INCHES // panel_w)))
    rows = int(math.ceil(len(events) / cols))
    fig = _figure(panel_w * cols, 3.4 * rows + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False)
    missing = False
    ticks = []
    for i, event in enumerate(events):
        ax = axes[i // cols][i % cols]
        top = 1.0
        for gi, (program, threads, variant) in enumerate(groups):
            hit = cmp[(cmp["program"] == program) & (cmp["threads"].astype(str) == str(threads))]
            hit = hit[hit.apply(_variant, axis=1) == variant]
            for pi, placement in enumerate(placements):
                row = hit[hit["placement"] == placement]
                if len(row) == 0:
                    continue
                value = row.iloc[0].get(f"counter:{event}:ratio")
                value = float("nan") if _is_empty(value) else float(value)
                x = gi - 0.4 + width * (pi + 0.5)
                if not np.isfinite(value):
                    ax.text(x, 0.05, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color="#aa0000")
                    missing = True
                    continue
                ax.bar(x, value, width * 0.92, color=colors[placement], edgecolor="black", linewidth=0.4)
                if bars <= 24:
                    ax.text(x, value, f"{value:.2f}", ha="center", va="bottom", fontsize=6.5)
                top = max(top, value)
        ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
        ax.set_ylim(0, top * 1.18)
        ax.set_xticks(range(len(groups)))
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ticks.append((ax, [_group_label(p, t, v, several_threads) for p, t, v in groups], groups))
        ax.set_title(event, fontsize=10)
        ax.set_ylabel(f"count / count with {base}", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for j in range(len(events), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    handles = [Patch(facecolor=colors[p], edgecolor="black", label=p) for p in placements]
    handles.append(Line2D([], [], color="black", linestyle="--", label=f"1 = as many events as {base}"))
    renderer = fig.canvas.get_renderer()
    footer = [_legend(fig, renderer, handles, [h.get_label() for h in handles])]
    fig.suptitle(f"Performance counters, each placement's mean count over {base}'s; above 1 = more events", fontsize=11)
    if missing:
        note = "n/a: no ratio (the baseline counted no such event, or it was not counted)"
        footer.append(fig.text(0.5, 0, _wrap(note, 8, fig.bbox.width - 2 * _PAD), ha="center", va="top", fontsize=8, color="#aa0000"))
    return _finish(fig, ticks, _group_key(groups, several_threads), footer)


def _samples(thread: dict) -> int:
    """How many (time, CPU) samples a thread of a run record has."""
    return min(len(thread.get("sample_times") or []), len(thread.get("sample_cpus") or []))


def _workers(record: dict, threads) -> list[dict]:
    """The threads of a run record that do the program's work: all of them when the configuration
    has one thread, the threads other than the main one otherwise (the main thread of an OpenMP
    program mostly waits for its workers). The main thread is the one with role "main", creation
    index 0, or the process's id as its thread id (a run not pinned reports no role)."""
    every = [t for t in record.get("threads") or [] if isinstance(t, dict)]
    pid = record.get("pid")
    others = [t for t in every if not (t.get("role") == "main" or t.get("index") == 0 or (pid is not None and t.get("tid") == pid))]
    n = None if _is_empty(threads) else threads
    try:
        n = None if n is None else int(n)
    except (TypeError, ValueError):
        n = None
    if n == 1 or (n is None and not others):
        return every
    return others


def _sampling(rows) -> str:
    """How often the threads of ``rows`` were sampled, in words."""
    periods = set()
    for row in rows:
        record = row.get("record")
        period = record.get("sample_ms") or (record.get("options") or {}).get("sample_ms")
        if period:
            periods.add(float(period))
    if not periods:
        return "threads were not sampled"
    low, high = min(periods), max(periods)
    return f"threads are sampled every {low:g} ms" if low == high else f"threads are sampled every {low:g} to {high:g} ms"


def timeline_run(report, placement, program=None):
    """(the run whose timeline to draw, None), or (None, why there is none, as a sentence without its full stop).

    The run is the first ok run (lowest run index) of the first configuration with this
    placement (and program, when given) that has a worker thread (see :func:`_workers`) sampled
    at least twice: one sample is a dot, not a line. A run shorter than the sampling period may
    end before its threads are sampled at all; when no run has a line to draw, the sentence says
    whether a worker was sampled once or never, how long the longest run took and how often
    threads were sampled.
    """
    runs = report.runs
    what = f"placement {placement}" + (f", program {program}" if program else "")
    if runs is None or len(runs) == 0:
        return None, f"no ok run with a run record for {what}"
    sel = runs[(runs["placement"] == placement) & (runs["status"] == "ok")]
    if program is not None:
        sel = sel[sel["program"] == program]
    considered, most = [], 0
    for config in dict.fromkeys(sel["config"].tolist()):
        cand = sel[sel["config"] == config]
        if "run_index" in cand:
            cand = cand.sort_values("run_index", kind="stable")
        for _, row in cand.iterrows():
            record = row.get("record")
            if not isinstance(record, dict):
                continue
            considered.append(row)
            sampled = max((_samples(t) for t in _workers(record, row.get("threads"))), default=0)
            if sampled >= 2:
                return row, None
            most = max(most, sampled)
    if not considered:
        return None, f"no ok run with a run record for {what}"
    n = len(considered)
    walls = [float(r.get("wall_seconds")) for r in considered if not _is_empty(r.get("wall_seconds"))]
    longest = f"the longest run took {max(walls):.3g} s; " if walls else ""
    runs_text = (
        f"in the only successful run with {what}"
        if n == 1
        else f"in any of the {n} successful runs with {what}"
        if most == 0
        else f"in the {n} successful runs with {what}"
    )
    if most == 0:
        why = f"no worker thread was sampled {runs_text}"
    else:
        why = f"no worker thread was sampled more than once {runs_text}: too few samples to draw a line"
    return None, f"{why} ({longest}{_sampling(considered)})"


def timeline(report, placement, program=None):
    """The CPU each thread of one run was on over time (one step line per thread).

    The run is the one :func:`timeline_run` picks; when there is none, the figure says why in words.
    """
    import numpy as np

    row, why = timeline_run(report, placement, program)
    if row is None:
        return _message(_figure(7, 2.2), why)
    threads = row["record"]["threads"]
    fig = _figure(9, 3.8)
    ax = fig.subplots()
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(threads) <= 10 else "tab20"]
    ncolors = 10 if len(threads) <= 10 else 20
    cpus_seen: set[int] = set()
    drawn = 0
    for i, th in enumerate(threads):
        times = list(th.get("sample_times") or [])
        cpus = list(th.get("sample_cpus") or [])
        n = min(len(times), len(cpus))
        if n == 0:
            continue
        t, c = np.asarray(times[:n], float), np.asarray(cpus[:n], float)
        cpus_seen.update(int(x) for x in c)
        label = f"tid {th.get('tid')}" + (f" ({th.get('role')})" if th.get("role") else "")
        if n == 1:
            ax.plot(t, c, marker="o", linestyle="none", color=cmap(i % ncolors), label=label)
        else:
            ax.step(t, c, where="post", color=cmap(i % ncolors), linewidth=1.6, alpha=0.85, label=label)
            ax.plot(t, c, ".", color=cmap(i % ncolors), markersize=3)
        drawn += 1
    ticks = sorted(cpus_seen)
    if len(ticks) <= 32:
        ax.set_yticks(ticks)
    else:
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(min(ticks) - 0.7, max(ticks) + 0.7)
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the program started", fontsize=9)
    ax.set_ylabel("CPU", fontsize=9)
    ax.grid(alpha=0.3)
    planned = row.get("placement_cpus")
    if isinstance(planned, (list, tuple)) and planned:
        shown = ",".join(str(c) for c in list(planned)[:16]) + (",…" if len(planned) > 16 else "")
        planned_text = f"; planned CPUs {shown}"
    else:
        planned_text = ""
    ax.set_title(f"{placement}: {row.get('config')}, run {row.get('run_index')}{planned_text}", fontsize=10)
    if drawn <= 16:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.text(1.01, 1.0, f"{drawn} threads", transform=ax.transAxes, fontsize=8, va="top")
    return _finish(fig)
