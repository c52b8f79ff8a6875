"""The picture of an autopin run: the rate over time, with the probing windows marked.

Each probing window is shaded in its candidate's colour, the warm-up before it (from the re-pin
to the window's start) hatched, and the rate of each sub-window drawn over it; choices are solid
vertical lines, re-probes dashed ones, and the rate after a choice a black line. Candidates are
numbered in the windows wide enough for a label and named in the key under the figure, so a
run of an hour with ten or more candidates stays readable. Figures follow
:mod:`pinlab.report.plots`: Agg canvas, no pyplot state, texts kept inside the image.
"""

from __future__ import annotations

from pathlib import Path

from pinlab.autopin.log import AutopinLog, finite
from pinlab.cpuset import format_cpulist
from pinlab.errors import UsageError
from pinlab.outputs import check_picture
from pinlab.report import plots
from pinlab.report.autopin_data import rate_unit, searches, what_ran

__all__ = ["timeline", "save_picture", "time_scale"]

_CHOICE = "#1a7f37"
_REPROBE = "#c62828"
_AFTER = "#1d232b"


def time_scale(end: float) -> tuple[float, str]:
    """(seconds per unit, unit name) for an x axis reaching ``end`` seconds: s, min or h."""
    if end <= 600:
        return 1.0, "s"
    if end <= 3 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


def _colors(n: int) -> list:
    from matplotlib import colormaps

    if n <= 10:
        cmap = colormaps["tab10"]
        return [cmap(i) for i in range(n)]
    if n <= 20:
        cmap = colormaps["tab20"]
        return [cmap(i) for i in range(n)]
    cmap = colormaps["turbo"]
    return [cmap(0.05 + 0.9 * i / (n - 1)) for i in range(n)]


def _darker(colour, keep: float = 0.75) -> tuple:
    """``colour`` mixed with black: the light colours of tab20 stay visible as lines over their shading."""
    return (*(keep * c for c in colour[:3]), 1.0)


def timeline(log: AutopinLog):
    """The rate over time of the run in ``log`` (a :class:`matplotlib.figure.Figure`)."""
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import EngFormatter

    start = log.start
    end = log.end_time
    scale, unit = time_scale(end)
    zoomed = _zoomed(log, end)
    fig = plots._figure(plots._PAGE_INCHES, 4.4 + ZOOM_INCHES * len(zoomed))
    axes = fig.subplots(1 + len(zoomed), 1, height_ratios=[4.4] + [ZOOM_INCHES] * len(zoomed), squeeze=False)[:, 0]
    ax = axes[0]
    palette = dict(zip([c.index for c in start.candidates], _colors(len(start.candidates))))
    renderer = fig.canvas.get_renderer()
    values: list[float] = []

    def x(t: float) -> float:
        return t / scale

    values.extend(_draw_probes(ax, log.probes, palette, scale))

    after = [r for r in log.rates if finite(r.rate)]
    if after:
        xs, ys = [], []
        for i, r in enumerate(after):
            if i and abs(r.start - after[i - 1].end) > 1e-6:  # a gap (a search in between): break the line
                xs.append(np.nan)
                ys.append(np.nan)
            xs += [x(r.start), x(r.end)]
            ys += [r.rate, r.rate]
            values.append(r.rate)
        ax.plot(xs, ys, color=_AFTER, linewidth=1.4)

    if values:
        low, high = min(values), max(values)
        pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        ax.set_ylim(low - pad, high + 3 * pad)  # room at the top for the labels
    else:
        ax.text(0.5, 0.5, "no rate was measured", transform=ax.transAxes, ha="center", va="center", color="#555555")
    ax.set_xlim(0, x(end) if end > 0 else 1)

    for choice in log.choices:
        ax.axvline(x(choice.t), color=_CHOICE, linewidth=1.6)
    for reprobe in log.reprobes:
        ax.axvline(x(reprobe.t), color=_REPROBE, linewidth=1.4, linestyle="--")
    summary = log.summary
    if summary is not None and summary.ended_during_probing:
        ax.axvline(x(end), color=_REPROBE, linewidth=1.4, linestyle=":")

    ax.set_xlabel(f"time since autopin started ({unit})", fontsize=9)
    ax.set_ylabel(", then ".join(rate_unit(log, at=t) for t in [0.0, *(c.t for c in log.metric_changes)]), fontsize=9)
    ax.yaxis.set_major_formatter(EngFormatter(sep=" "))  # 1.2 M rather than an offset 1e6 above the axis
    ax.grid(alpha=0.3)
    n_search = len(searches(log))
    metrics = " then ".join([start.metric_label, *(c.metric for c in log.metric_changes)])
    ax.set_title(f"autopin {what_ran(log)}; metric {metrics}" + (f"; {n_search} searches" if n_search > 1 else ""), fontsize=10)

    handles = [Patch(facecolor=palette[c.index], alpha=0.5, linewidth=0) for c in start.candidates]
    labels = [f"{c.index}: {c.name} ({_cpus(c.cpus)})" for c in start.candidates]
    handles += [Patch(facecolor="white", edgecolor="#777777", hatch="////", linewidth=0.4), Line2D([], [], color="#555555", linewidth=1.6)]
    labels += ["the probe's run starting (-i)" if start.mode == "restart" else "warm-up after a re-pin", "rate of each sub-window"]
    if after:
        handles.append(Line2D([], [], color=_AFTER, linewidth=1.4))
        labels.append("rate after the choice")
    if log.choices:
        handles.append(Line2D([], [], color=_CHOICE, linewidth=1.6))
        labels.append("choice")
    if log.reprobes:
        handles.append(Line2D([], [], color=_REPROBE, linewidth=1.4, linestyle="--"))
        labels.append("re-probe (phase change)")
    if summary is not None and summary.ended_during_probing:
        handles.append(Line2D([], [], color=_REPROBE, linewidth=1.4, linestyle=":"))
        labels.append("program ended while probing")
    for zoom, (number, began, ended) in zip(axes[1:], zoomed):
        _draw_probes(zoom, [p for p in log.probes if began <= p.start < ended], palette, 1.0)
        zoom.set_xlim(began, ended)
        if values:
            zoom.set_ylim(*ax.get_ylim())
        zoom.yaxis.set_major_formatter(EngFormatter(sep=" "))
        zoom.grid(alpha=0.3)
        zoom.set_title(f"search {number}, probing enlarged (s since autopin started)", fontsize=8)
        for choice in log.choices:
            if began <= choice.t <= ended:
                zoom.axvline(choice.t, color=_CHOICE, linewidth=1.6)
    legend = plots._legend(fig, renderer, handles, labels)
    plots._finish(fig, footer=[legend])
    _label_windows(ax, log, scale)  # once the Axes has its final size
    return fig


#: A search's probing is drawn again, enlarged, in a panel of this height under the run when it
#: takes less than ZOOM_BELOW of the run: on a run of hours its windows are slivers otherwise.
ZOOM_INCHES, ZOOM_BELOW, MOST_ZOOMED = 2.2, 0.125, 3


def _zoomed(log: AutopinLog, end: float) -> list[tuple[int, float, float]]:
    """(search number, from, to) of the searches whose probing is drawn enlarged: the first
    ``MOST_ZOOMED`` of those taking less than ``ZOOM_BELOW`` of the run."""
    found = []
    for search in searches(log):
        if not search.probes or search.began is None:
            continue
        ended = search.choice.t if search.choice is not None else search.probes[-1].end
        if end > 0 and (ended - search.began) < ZOOM_BELOW * end:
            pad = 0.02 * (ended - search.began)
            found.append((search.number, max(0.0, search.began - pad), ended + pad))
    return found[:MOST_ZOOMED]


def _draw_probes(ax, probes, palette, scale: float) -> list[float]:
    """Each probing window shaded in its candidate's colour, its warm-up hatched and its
    sub-windows' rates drawn over it (each as long as it lasted, where the log says); the rates."""
    import numpy as np

    values: list[float] = []
    for probe in probes:
        colour = palette[probe.candidate]
        if probe.repinned_at is not None and probe.repinned_at < probe.start:
            ax.axvspan(
                probe.repinned_at / scale, probe.start / scale, facecolor=(*colour[:3], 0.08), edgecolor=(*colour[:3], 0.6), hatch="////", linewidth=0
            )
        ax.axvspan(probe.start / scale, probe.end / scale, facecolor=colour, alpha=0.22, linewidth=0)
        samples = [w for w in probe.samples if finite(w)]
        if samples:
            if len(probe.window_seconds) == len(probe.windows) == len(samples):
                edges = (probe.start + np.concatenate([[0.0], np.cumsum(probe.window_seconds)])) / scale
            else:
                edges = np.linspace(probe.start, probe.end, len(samples) + 1) / scale
            ax.stairs(samples, edges, color=_darker(colour), linewidth=1.6, baseline=None)
            values.extend(samples)
    return values


def _cpus(cpus) -> str:
    text = format_cpulist(cpus) if cpus else "?"
    return f"CPU {text}" if len(cpus) == 1 else f"CPUs {text}"


def _label_windows(ax, log: AutopinLog, scale: float) -> None:
    """The candidate's number at the top of each probing window wide enough to hold it, and the
    chosen candidate's name beside each choice line where it fits."""
    per_second = ax.bbox.width / max(1e-9, ax.get_xlim()[1] - ax.get_xlim()[0]) / scale
    for probe in log.probes:
        label = str(probe.candidate)
        if (probe.end - probe.start) * per_second >= plots._text_width(label, 7) + 4:
            ax.text(
                (probe.start + probe.end) / 2 / scale,
                0.97,
                label,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize=7,
                color="#333333",
            ).set_in_layout(False)
    right = ax.bbox.x1
    for choice in log.choices:
        label = f" {choice.candidate}: {choice.name}"
        at = ax.transData.transform((choice.t / scale, 0))[0]
        if at + plots._text_width(label, 7) + 2 <= right:
            ax.text(
                choice.t / scale, 0.90, label, transform=ax.get_xaxis_transform(), ha="left", va="top", fontsize=7, color=_CHOICE, fontweight="bold"
            ).set_in_layout(False)


def save_picture(fig, path) -> Path:
    """Write ``fig`` to ``path`` as SVG or PNG (by its suffix) and return the path."""
    path = Path(path)
    fmt = check_picture(path)
    try:
        fig.savefig(path, format=fmt, dpi=plots.DPI)
    except OSError as exc:
        raise UsageError(f"cannot write picture {str(path)!r}: {exc.strerror or exc}") from None
    return path
