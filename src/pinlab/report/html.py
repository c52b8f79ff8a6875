"""A study as one self-contained HTML page: tables, verdicts and pictures, no external resource.

Images are embedded as base64 ``data:`` URIs (PNG for the plots, SVG for the placement
pictures, whose texts stay sharp at any zoom) and the CSS is inline, so ``index.html`` can be
mailed, archived or opened offline and shows the same thing everywhere.
"""

from __future__ import annotations

import base64
import datetime as _dt
import io
import math
import re
import tempfile
from pathlib import Path
from typing import Any

from pinlab.errors import UsageError
from pinlab.measure.counters import SOFTWARE
from pinlab.placement import picture
from pinlab.placement.plan import Placement
from pinlab.placement.strategies import UNPINNED
from pinlab.report import plots
from pinlab.report.data import direction_of
from pinlab.report.tables import assumed_text
from pinlab.topology.hwloc_xml import parse_xml

__all__ = ["write_html", "render_html", "TEMPLATE_DIR"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"


def _num(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits; '–' for missing values."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == int(x) and abs(x) < 1e9:
        return str(int(x))
    return f"{x:.{digits}g}"


def _fixed(value: Any, decimals: int = 3) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "–" if value is None else str(value)
    if math.isnan(x):
        return "–"
    return f"{x:.{decimals}f}"


def _percent(value: Any, decimals: int = 2) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(x):
        return "–"
    return f"{100 * x:.{decimals}f} %"


def _p(value: Any) -> str:
    """A p-value: three decimals, '<0.001' below that, '' when missing."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return ""
    if math.isnan(x):
        return ""
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def _interval(low: Any, high: Any, fmt=_num) -> str:
    a, b = fmt(low), fmt(high)
    if a == "–" and b == "–":
        return "–"
    return f"[{a}, {b}]"


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return isinstance(value, float) and math.isnan(value)
    except TypeError:
        return False


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=plots.DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _verdict_class(verdict: Any) -> str:
    return {
        "faster": "v-faster",
        "slower": "v-slower",
        "no significant difference": "v-none",
        "more runs needed": "v-more",
    }.get(str(verdict), "")


def _machine(study) -> list[tuple[str, str]]:
    machine = dict(getattr(study, "machine", None) or {})
    rows: list[tuple[str, str]] = []
    names = {
        "hostname": "Host",
        "kernel": "Kernel",
        "cpu_model": "CPU model",
        "topology": "Topology",
        "governor": "CPU frequency governor",
        "machine": "Architecture",
    }
    for key in ["hostname", "kernel", "cpu_model", "machine", "topology", "governor"] + sorted(k for k in machine if k not in names):
        if key not in machine or str(key).endswith("_xml"):
            continue  # the full hwloc XML is stored in the database, not shown
        value = machine[key]
        if isinstance(value, dict):
            text = ", ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            text = ", ".join(str(v) for v in value)
        else:
            text = "–" if value is None else str(value)
        rows.append((names.get(key, key), text))
    return rows


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
    return str(value)


def _parameters(study) -> list[tuple[str, str]]:
    params = dict(getattr(study, "parameters", None) or {})
    out = []
    for key in sorted(params, key=str):
        out.append((str(key), _text(params[key])))
    return out


def _overall(report) -> list[dict[str, str]]:
    rows = []
    for item in getattr(report, "overall", None) or []:
        ci = item.get("share_faster_ci") or (None, None)
        n = item.get("n_programs")
        k = item.get("n_faster")
        rows.append(
            {
                "placement": str(item.get("placement", "")),
                "n_programs": _num(n),
                "mean_speedup": _fixed(item.get("mean_speedup")),
                "median_speedup": _fixed(item.get("median_speedup")),
                "geomean_speedup": _fixed(item.get("geomean_speedup")),
                "min_variance": _num(item.get("min_variance")),
                "max_variance": _num(item.get("max_variance")),
                "faster": f"{_num(k)} of {_num(n)}",
                "share_faster": _percent(item.get("share_faster"), 0),
                "share_faster_ci": _interval(ci[0], ci[1], lambda v: _percent(v, 0)),
            }
        )
    return rows


def _stats(report) -> list[dict[str, Any]]:
    stats = report.stats
    if stats is None or len(stats) == 0:
        return []
    base = getattr(report, "baseline", None)
    rows = []
    for _, r in stats.iterrows():
        get = r.get
        is_base = get("placement") == base
        verdict = get("verdict")
        verdict = None if _missing(verdict) else verdict
        unstable = get("unstable")
        rows.append(
            {
                "config": str(get("config", "")),
                "program": str(get("program", "")),
                "threads": _num(get("threads")),
                "placement": str(get("placement", "")),
                "variant": plots._variant(r),
                "baseline": is_base,
                "n": _num(get("n")) if not _missing(get("n")) else "0",
                "failed": 0 if _missing(get("failed")) else int(get("failed")),
                "mean": _num(get("mean")),
                "median": _num(get("median")),
                "min": _num(get("min")),
                "max": _num(get("max")),
                "std": _num(get("std")),
                "av": _num(get("av")),
                "rv": _percent(get("rv")),
                "unstable": (not _missing(unstable)) and bool(unstable),
                "mean_ci": _interval(get("mean_ci_low"), get("mean_ci_high")),
                "median_ci": _interval(get("median_ci_low"), get("median_ci_high")),
                "mean_speedup": "baseline" if is_base else _fixed(get("mean_speedup")),
                "median_speedup": "baseline" if is_base else _fixed(get("median_speedup")),
                "mean_p": "" if is_base else _p(get("mean_p")),
                "shapiro": "" if is_base else _shapiro(get("baseline_shapiro_p"), get("placement_shapiro_p")),
                "median_p": "" if is_base else _p(get("median_p")),
                "verdict": "" if is_base else (verdict or "–"),
                "verdict_class": _verdict_class(verdict),
            }
        )
    return rows


def _shapiro(baseline_p: Any, placement_p: Any) -> str:
    """Both samples' Shapiro-Wilk p-values: the t-test needs both normal (or both large), so
    showing one would hide half of why a mean test is or is not valid. '' when neither ran."""
    b, c = _p(baseline_p), _p(placement_p)
    if not b and not c:
        return ""
    return f"{b or 'not run'} / {c or 'not run'}"


def _squared(unit: str | None) -> str:
    """The unit of a variance, e.g. "s²" or "(MB/s)²", for the overall table's variance columns."""
    if unit is None:
        return "(the metric's unit)²"
    return f"{unit}²" if "/" not in unit else f"({unit})²"


def _run_counts(report) -> dict[str, int]:
    runs = report.runs
    if runs is None or len(runs) == 0:
        return {"total": 0, "ok": 0, "failed": 0, "timeout": 0}
    status = runs["status"].astype(str)
    return {
        "total": int(len(runs)),
        "ok": int((status == "ok").sum()),
        "failed": int((status == "failed").sum()),
        "timeout": int((status == "timeout").sum()),
    }


def _timeline_placements(report) -> list[str]:
    runs = report.runs
    if runs is None or len(runs) == 0:
        return []
    return plots._placements(report, runs)


def _timeline(report, placement: str) -> dict[str, Any]:
    """One placement's "Where the threads ran": the picture of one run, or why there is none.

    A run shorter than the sampling period can end before a worker thread is sampled, or with
    one sample, a dot rather than a line: the page says so in words rather than show an empty
    chart (see :func:`pinlab.report.plots.timeline_run`).
    """
    row, why = plots.timeline_run(report, placement)
    item = {
        "title": f"Where the threads ran: {placement}",
        "src": None,
        "note": None,
        "short_runs": False,
        "alt": f"CPU of each thread over time in one run with placement {placement}",
    }
    if row is None:
        item["note"] = why + "."
        item["short_runs"] = "sampled" in why  # runs there were, but too short for their samples
    else:
        item["src"] = _png(plots.timeline(report, placement))
    return item


def _adaptive(report) -> dict[str, Any] | None:
    """The numbers of an adaptive study (``--runs auto``), as the page words them; None otherwise."""
    info = getattr(report, "adaptive", None)
    if not info:
        return None
    fixed_total = info.get("fixed_total") or 0
    share = info["measured"] / fixed_total if fixed_total else None
    return {
        "measured": _num(info.get("measured")),
        "configs": _num(info.get("configs")),
        "fewest": _num(info.get("fewest")),
        "most": _num(info.get("most")),
        "min_runs": _num(info.get("min_runs")),
        "max_runs": _num(info.get("max_runs")),
        "fixed_runs": _num(info.get("fixed_runs")),
        "fixed_total": _num(fixed_total),
        "share": _percent(share, 0),
        "alpha": _num(info.get("alpha"), 3),
        "undecided": [str(c) for c in info.get("undecided") or []],
    }


#: Events whose count is a time, not a number of events: the table says so in its header.
_UNITS = {"task-clock": "ns", "cpu-clock": "ns"}


def _software_only(events: list[str]) -> bool:
    """Whether every counted event is a software one (no cycle, instruction or cache event).

    The kernel counts those itself, so every Linux has them, even a VM or container without a
    PMU; a study of only those cannot show the cache behaviour the figures of [ribeiro2012] show.
    """
    return bool(events) and all(e in SOFTWARE for e in events)


def _count(value: Any) -> str:
    """A mean count per run: whole numbers with thousands separators, small means with 3 digits."""
    if _missing(value):
        return "–"
    x = float(value)
    return f"{x:,.0f}" if abs(x) >= 100 else _num(x, 3)


def _counters(report) -> dict[str, Any] | None:
    """The counters section: its figure and, per configuration, each event's mean count and ratio."""
    events = list(getattr(report, "counters", None) or [])
    if not events:
        return None
    base = getattr(report, "baseline", None)
    stats = report.stats
    rows = []
    for _, r in stats.iterrows() if stats is not None else []:
        is_base = r.get("placement") == base
        cells = []
        for event in events:
            ratio = r.get(f"counter:{event}:ratio")
            cells.append({"mean": _count(r.get(f"counter:{event}")), "ratio": "baseline" if is_base else _fixed(None if _missing(ratio) else ratio)})
        rows.append({"config": str(r.get("config", "")), "baseline": is_base, "cells": cells})
    return {
        "events": [{"name": e, "unit": _UNITS.get(e, "")} for e in events],
        "rows": rows,
        "software_only": _software_only(events),
        "figure": {
            "src": _png(plots.counters(report)),
            "alt": f"bar charts of each placement's mean count of {', '.join(events)} divided by the {base} placement's",
        },
    }


def _study_topology(study):
    """(topology, None) from the hwloc XML recorded with the study, or (None, why not)."""
    xml = (getattr(study, "machine", None) or {}).get("topology_xml")
    if not xml:
        return None, "The study did not record the machine's topology (hwloc XML), so its placements are not drawn."
    try:
        return parse_xml(str(xml), source="study"), None
    except UsageError as exc:
        return None, f"The topology recorded with the study could not be read, so its placements are not drawn ({exc})."


def _threads_key(value: Any) -> int | None:
    """A thread count usable as a dict key (NaN, the pandas missing value, never equals itself)."""
    return None if _missing(value) else int(value)


def _pinned_runs(report) -> dict[tuple[str, int | None], Any]:
    """For each pinned (placement, threads), the first successful run that recorded its CPUs.

    Configurations are taken in the order of the statistics table and runs by run index, so the
    picture is of the first run a reader finds in the tables. Configurations of one placement
    and thread count that differ only by program, memory policy or co-runner pin the same CPUs
    (all but random), so each pair is drawn once.
    """
    runs = report.runs
    if runs is None or len(runs) == 0 or "placement_cpus" not in runs:
        return {}
    order = {c: i for i, c in enumerate(report.stats["config"])} if report.stats is not None and "config" in report.stats else {}
    ok = runs[(runs["status"] == "ok") & (~runs["placement"].isin(UNPINNED))]
    ok = ok.assign(_order=[order.get(c, len(order)) for c in ok["config"]])
    ok = ok.sort_values(["_order", "run_index"] if "run_index" in ok else ["_order"], kind="stable")
    found: dict[tuple[str, int | None], Any] = {}
    for placement in plots._placements(report, runs):
        if placement in UNPINNED:
            continue
        for _, row in ok[ok["placement"] == placement].iterrows():
            cpus = row.get("placement_cpus")
            key = (placement, _threads_key(row.get("threads")))
            if key not in found and isinstance(cpus, (list, tuple)) and cpus:
                found[key] = row
    return found


def _placement_of(row, topology):
    """The placement a run was pinned with, rebuilt from its stored CPUs and plan."""
    record = row.get("record")
    plan = record.get("plan") if isinstance(record, dict) else None
    plan = plan if isinstance(plan, dict) else {}
    cpus = [int(c) for c in row["placement_cpus"]]
    return Placement(
        strategy=str(plan.get("strategy") or row["placement"]),
        threads=len(cpus),
        cpus=cpus,
        topology=topology,
        smt=bool(plan.get("smt")),
        oversubscribe=bool(plan.get("oversubscribe")),
        seed=plan.get("seed"),
        expression=plan.get("expression"),
    )


def _mapping(cpus: list[int], shown: int = 64) -> str:
    """``0→3, 1→7``: the CPU of each thread, as text a reader can search and copy (the SVG is an image)."""
    pairs = ", ".join(f"{t}→{c}" for t, c in enumerate(cpus[:shown]))
    return pairs + (f", … ({len(cpus)} threads)" if len(cpus) > shown else "")


def _svg(placement) -> tuple[str, int | None]:
    """The placement drawn by :mod:`pinlab.placement.picture`: an SVG ``data:`` URI and its width in CSS px.

    The width lets the page size the figure to its picture, so that the caption wraps under
    it rather than widening it (and pictures of a small machine sit side by side).
    """
    with tempfile.TemporaryDirectory(prefix="pinlab-report-") as tmp:
        path = Path(tmp) / "placement.svg"
        picture.draw(placement, path)
        data = path.read_bytes()
    found = re.search(rb'<svg[^>]*\swidth="([0-9.]+)pt"', data)
    width = math.ceil(float(found.group(1)) * 96 / 72) + 2 if found else None  # + the image's border
    return "data:image/svg+xml;base64," + base64.b64encode(data).decode("ascii"), width


def _placement_picture(key: tuple[str, int | None], row, topology) -> dict[str, Any]:
    """One placement picture and its caption, from the run that shows it."""
    plan = _placement_of(row, topology)
    item = {
        "placement": key[0],
        "threads": plots._threads_label(len(plan.cpus) if key[1] is None else key[1]),
        "config": str(row.get("config", "")),
        "run": _num(row.get("run_index")),
        "mapping": _mapping(plan.cpus),
        "random": plan.strategy == "random",
        "src": None,
        "width": None,
        "problem": None,
    }
    unknown = sorted(set(plan.cpus) - set(topology.root.cpus))
    if unknown:  # the run used CPUs the recorded machine lacks: say so rather than draw a wrong picture
        item["problem"] = f"CPU {', '.join(map(str, unknown))} is not in the recorded topology"
    else:
        item["src"], item["width"] = _svg(plan)
    return item


def _placements(report) -> dict[str, Any]:
    """The placement pictures: one per pinned placement and thread count, and a note on what is not drawn."""
    wanted = [p for p in _timeline_placements(report) if p not in UNPINNED]
    if not wanted:
        return {"pictures": [], "note": "Every configuration left the placement to the operating system: nothing was pinned."}
    topology, note = _study_topology(report.study)
    if topology is None:
        return {"pictures": [], "note": note}
    runs = _pinned_runs(report)
    pictures = [_placement_picture(key, row, topology) for key, row in runs.items()]
    missing = [p for p in wanted if all(key[0] != p for key in runs)]
    if missing:
        note = f"No successful run recorded the CPUs of {', '.join(missing)}: {'it is' if len(missing) == 1 else 'they are'} not drawn."
    return {"pictures": pictures, "note": note}


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render_html(report) -> str:
    """The page as a string (see :func:`write_html`)."""
    study = report.study
    created = getattr(study, "created_at", None)
    created_text = (
        _dt.datetime.fromtimestamp(float(created), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        if created is not None and not _missing(created)
        else "–"
    )
    figures = [
        {
            "title": "Every run, per configuration",
            "src": _png(plots.violin(report)),
            "alt": f"violin plots of the {plots.metric_label(report)} of every run",
        },
        {
            "title": "Speedups over the baseline",
            "src": _png(plots.speedups(report)),
            "alt": "bar chart of the median speedup of each placement over the baseline",
        },
    ]
    timelines = [_timeline(report, p) for p in _timeline_placements(report)]
    metric = getattr(report, "metric", "time") or "time"
    direction = direction_of(report)
    base = str(getattr(report, "baseline", ""))
    context = {
        "name": str(getattr(study, "name", "study")),
        "created": created_text,
        "machine": _machine(study),
        "warnings": [str(w) for w in (getattr(study, "warnings", None) or [])],
        "parameters": _parameters(study),
        "overall": _overall(report),
        "stats": _stats(report),
        "counts": _run_counts(report),
        "baseline": str(getattr(report, "baseline", "")),
        "alpha": _num(getattr(report, "alpha", 0.05), 3),
        "confidence": _num(1 - float(getattr(report, "alpha", 0.05)), 3),
        "metric": str(metric),
        "metric_label": plots.metric_label(report),
        "time_metric": metric == "time",
        "direction": {
            "better": direction.better,
            "label": direction.label(),
            "ratio": direction.ratio(base),
            "assumed": assumed_text(direction) if direction.assumed else None,
            "seconds": direction.seconds,
            "squared": _squared(direction.unit),
        },
        "figures": figures,
        "timelines": timelines,
        "adaptive": _adaptive(report),
        "counters": _counters(report),
        "placements": _placements(report),
    }
    return _environment().get_template(TEMPLATE).render(**context)


def write_html(report, directory) -> Path:
    """Write ``directory/index.html`` (created with its parents) and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "index.html"
    text = render_html(report)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
