"""Pictures of a study: run times per configuration, speedups, counters, and where threads ran over time.

Every function returns a :class:`matplotlib.figure.Figure` drawn with the Agg canvas; no pyplot
global state is touched, so figures can be made from threads and never open a window.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["violin", "speedups", "counters", "timeline", "save", "DPI", "metric_label"]

DPI = 110
_MAX_COLS = 3
_PAGE_INCHES = 9.9  # the HTML page shows figures up to about 1090 px wide unscaled, at 110 dpi
_MARKS = {"faster": "*", "slower": "x"}
_DEFAULTS = {"mem": ("", "none", "None", "first-touch"), "corun": ("", "none", "None")}


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, path) -> Path:
    """Write ``fig`` as a PNG at 110 dpi and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI)
    return path


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
    return fig


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
    for i, (program, threads) in enumerate(keys):
        ax = axes[i // cols][i % cols]
        sel = (runs["program"] == program) & (runs["threads"].astype(str) == str(threads))
        panel = runs[sel]
        groups = []  # (label, placement, values)
        seen = []
        for _, row in panel.iterrows():
            key = (row["placement"], _variant(row))
            if key not in seen:
                seen.append(key)
        seen.sort(key=lambda k: (placements.index(k[0]) if k[0] in placements else 99, k[1]))
        for placement, variant in seen:
            mask = (panel["placement"] == placement) & (panel.apply(_variant, axis=1) == variant)
            values = panel[mask & ok[sel]]["metric"].astype(float).to_numpy()
            label = placement if not variant else f"{placement}\n{variant}"
            groups.append((label, placement, values))
        excluded = int((~ok[sel]).sum())
        for x, (label, placement, values) in enumerate(groups, start=1):
            color = colors.get(placement, "grey")
            if len(values) >= 2 and np.ptp(values) > 0:
                parts = ax.violinplot([values], positions=[x], widths=0.8, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(color)
                    body.set_edgecolor(color)
                    body.set_alpha(0.35)
            if len(values):
                jitter = rng.uniform(-0.12, 0.12, len(values))
                ax.scatter(x + jitter, values, s=12, color=color, edgecolors="black",
                           linewidths=0.4, zorder=3)
                ax.hlines(np.median(values), x - 0.3, x + 0.3, color="black", linewidth=2, zorder=4)
            else:
                ax.text(x, 0.5, "no ok run", ha="center", va="center", rotation=90,
                        transform=ax.get_xaxis_transform(), color="#aa0000", fontsize=8)
        ax.set_xticks(range(1, len(groups) + 1))
        ax.set_xticklabels([g[0] for g in groups], fontsize=8,
                           rotation=30 if len(groups) > 4 else 0)
        ax.set_xlim(0.4, len(groups) + 0.6)
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
    fig.tight_layout()
    return fig


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
    fig = _figure(min(22, max(6.0, 1.0 + 0.35 * len(groups) * max(1, len(placements)) + 0.5 * len(groups))), 4.6)
    ax = fig.subplots()
    top = 1.0
    for gi, (program, threads, variant) in enumerate(groups):
        for pi, placement in enumerate(placements):
            hit = cmp[(cmp["program"] == program) & (cmp["threads"].astype(str) == str(threads))
                      & (cmp["placement"] == placement)]
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
    labels = [f"{p}\n{_threads_label(t)}" + (f"\n{v}" if v else "") for p, t, v in groups]
    ax.set_xticklabels(labels, fontsize=8, rotation=30 if len(groups) > 6 else 0)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(f"median speedup over {base}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    handles = [Patch(facecolor=colors[p], edgecolor="black", label=p) for p in placements]
    handles += [
        Line2D([], [], linestyle="none", marker="$*$", color="black", markersize=9,
               label="significantly faster"),
        Line2D([], [], linestyle="none", marker="x", color="black", markersize=7,
               label="significantly slower"),
        Line2D([], [], color="black", linestyle="--", label="1 = same as baseline"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0)
    ax.set_title(f"Median speedup over the baseline ({base}); above 1 is better", fontsize=11)
    fig.tight_layout()
    return fig


def _group_label(program, threads, variant, several_threads: bool) -> str:
    """An x tick: the program, its thread count when the study has several, its variant."""
    parts = [str(program)] + ([_threads_label(threads)] if several_threads else []) + ([variant] if variant else [])
    return "\n".join(parts)


def counters(report):
    """Each event's mean count per run, divided by the baseline's, one panel per event.

    As Figures 3-5 of the seed paper (Ribeiro et al.): a bar is a placement's count normalised
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
    # Panels side by side only while the figure fits the page (about 10 inches) unscaled:
    # shrunk to fit, its bar labels would be unreadable.
    panel_w = min(14.0, max(4.3, 0.8 + 0.25 * bars + 0.25 * len(groups)))
    cols = max(1, min(_MAX_COLS, len(events), int(_PAGE_INCHES // panel_w)))
    rows = int(math.ceil(len(events) / cols))
    fig = _figure(panel_w * cols, 3.4 * rows + 1.0)
    axes = fig.subplots(rows, cols, squeeze=False)
    missing = False
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
        ax.set_xticklabels([_group_label(p, t, v, several_threads) for p, t, v in groups], fontsize=8,
                           rotation=30 if len(groups) > 6 else 0)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_title(event, fontsize=10)
        ax.set_ylabel(f"count / count with {base}", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for j in range(len(events), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    handles = [Patch(facecolor=colors[p], edgecolor="black", label=p) for p in placements]
    handles.append(Line2D([], [], color="black", linestyle="--", label=f"1 = as many events as {base}"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"Performance counters, each placement's mean count over {base}'s; above 1 = more events", fontsize=11)
    legend_h, note_h = 0.32 / fig.get_figheight(), 0.22 / fig.get_figheight()
    if missing:
        fig.text(0.5, legend_h + note_h / 2, "n/a: no ratio (the baseline counted no such event, or it was not counted)",
                 ha="center", va="center", fontsize=8, color="#aa0000")
    fig.tight_layout(rect=(0, legend_h + (note_h if missing else 0), 1, 1))
    return fig


def _timeline_run(report, placement, program=None):
    runs = report.runs
    if runs is None or len(runs) == 0:
        return None
    sel = runs[runs["placement"] == placement]
    if program is not None:
        sel = sel[sel["program"] == program]
    for config in dict.fromkeys(sel["config"].tolist()):
        cand = sel[(sel["config"] == config) & (sel["status"] == "ok")]
        if "run_index" in cand:
            cand = cand.sort_values("run_index", kind="stable")
        for _, row in cand.iterrows():
            record = row.get("record")
            if isinstance(record, dict) and record.get("threads"):
                return row
    return None


def timeline(report, placement, program=None):
    """The CPU each thread of one run was on over time (one step line per thread).

    The run is the first ok run (lowest run index) of the first configuration with this placement
    (and program, when given) whose record has thread samples.
    """
    import numpy as np

    row = _timeline_run(report, placement, program)
    if row is None:
        what = f"placement {placement}" + (f", program {program}" if program else "")
        return _message(_figure(7, 2.2), f"no ok run with thread samples for {what}")
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
    if not drawn:
        ax.remove()
        return _message(fig, f"run {row.get('run_index')} of {row.get('config')}: no thread samples")
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
    ax.set_title(f"{placement}: {row.get('config')}, run {row.get('run_index')}{planned_text}",
                 fontsize=10)
    if drawn <= 16:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.text(1.01, 1.0, f"{drawn} threads", transform=ax.transAxes, fontsize=8, va="top")
    fig.tight_layout()
    return fig
