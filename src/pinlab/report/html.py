"""A study as one self-contained HTML page: tables, verdicts and pictures, no external resource.

Images are embedded as base64 PNG ``data:`` URIs and the CSS is inline, so ``index.html`` can be
mailed, archived or opened offline and shows the same thing everywhere.
"""
from __future__ import annotations

import base64
import datetime as _dt
import io
import math
from pathlib import Path
from typing import Any

from pinlab.report import plots

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
    names = {"hostname": "Host", "kernel": "Kernel", "cpu_model": "CPU model",
             "topology": "Topology", "governor": "CPU frequency governor", "machine": "Architecture"}
    for key in ["hostname", "kernel", "cpu_model", "machine", "topology", "governor"] + sorted(
            k for k in machine if k not in names):
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
        rows.append({
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
        })
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
        rows.append({
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
            "median_p": "" if is_base else _p(get("median_p")),
            "verdict": "" if is_base else (verdict or "–"),
            "verdict_class": _verdict_class(verdict),
        })
    return rows


def _run_counts(report) -> dict[str, int]:
    runs = report.runs
    if runs is None or len(runs) == 0:
        return {"total": 0, "ok": 0, "failed": 0, "timeout": 0}
    status = runs["status"].astype(str)
    return {"total": int(len(runs)), "ok": int((status == "ok").sum()),
            "failed": int((status == "failed").sum()), "timeout": int((status == "timeout").sum())}


def _timeline_placements(report) -> list[str]:
    runs = report.runs
    if runs is None or len(runs) == 0:
        return []
    return plots._placements(report, runs)


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
        if created is not None and not _missing(created) else "–")
    figures = [
        {"title": "Every run, per configuration", "src": _png(plots.violin(report)),
         "alt": f"violin plots of the {plots.metric_label(report)} of every run"},
        {"title": "Speedups over the baseline", "src": _png(plots.speedups(report)),
         "alt": "bar chart of the median speedup of each placement over the baseline"},
    ]
    timelines = [
        {"title": f"Where the threads ran: {p}", "src": _png(plots.timeline(report, p)),
         "alt": f"CPU of each thread over time in one run with placement {p}"}
        for p in _timeline_placements(report)
    ]
    metric = getattr(report, "metric", "time") or "time"
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
        "metric": str(metric),
        "metric_label": plots.metric_label(report),
        "time_metric": metric == "time",
        "figures": figures,
        "timelines": timelines,
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
