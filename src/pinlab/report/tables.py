"""The report as terminal tables and CSV files (the JSON export is pinlab.report.export's)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pinlab import terminal
from pinlab.report.data import StudyReport, by_node, direction_of

RUN_COLUMNS = [
    "study",
    "program",
    "threads",
    "placement",
    "mem",
    "corun",
    "run_index",
    "status",
    "wall_seconds",
    "user_seconds",
    "system_seconds",
    "metric",
    "exit_status",
    "signal",
    "migrations",
    "voluntary_context_switches",
    "involuntary_context_switches",
    "max_rss_kib",
    "placement_cpus",
    "stored_at",
]


def runs_table(report: StudyReport):
    columns = [c for c in RUN_COLUMNS if c in report.runs.columns] + [
        f"counter:{e}" for e in report.counters if f"counter:{e}" in report.runs.columns
    ]
    return report.runs[columns]


def write_csv(report: StudyReport, directory: str | Path) -> tuple[Path, Path]:
    """``runs.csv`` (one row per stored measured run) and ``stats.csv`` (one row per configuration)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    runs = runs_table(report).copy()
    runs["placement_cpus"] = runs["placement_cpus"].map(lambda v: "" if v is None else ",".join(map(str, v)))
    runs.to_csv(out / "runs.csv", index=False)
    report.stats.to_csv(out / "stats.csv", index=False)
    return out / "runs.csv", out / "stats.csv"


def print_by_node(report: StudyReport, console=None) -> None:
    """pinlab report --by-node: each configuration's successful runs and median on each node."""
    from rich.table import Table

    console = console or terminal.console(piped_width=180)
    if "node" not in report.runs:
        console.print("the runs of this study do not say which node they ran on (stored by an older pinlab)")
        return
    table = Table(title="Per configuration and node (successful runs; median in the metric's unit)")
    for column in ("configuration", "node", "hardware", "runs", "ok", "median"):
        table.add_column(column, justify="left" if column in ("configuration", "node", "hardware") else "right")
    for row in by_node(report):
        table.add_row(row["config"], str(row["node"]), str(row["hardware"]), str(row["runs"]), str(row["ok"]), _fmt(row["median"]))
    console.print(table)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def print_report(report: StudyReport, console=None) -> None:
    """Readable tables: per configuration, then overall; the check warnings recorded with the study."""
    from rich.markup import escape
    from rich.table import Table

    console = console or terminal.console(piped_width=180)
    study = report.study
    direction = direction_of(report)
    console.print(
        f"[bold]Study {escape(study.name)}[/]: metric {escape(report.metric)} ({direction.label()}), baseline {report.baseline}, "
        f"risk alpha = {report.alpha}; {len(report.runs)} measured runs on {study.machine.get('hostname', '?')} "
        f"({study.machine.get('cpu_model') or 'CPU model unknown'})"
    )
    if direction.assumed:
        console.print(f"[yellow]warning:[/] {escape(assumed_text(direction))}")
    for warning in study.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if getattr(report, "node_warning", None):
        console.print(f"[yellow]warning:[/] {escape(report.node_warning)}")
    elif len(getattr(report, "nodes", [])) > 1:
        console.print(
            f"runs on {len(report.nodes)} nodes of one kind ({escape(str(report.nodes[0]['hardware']))}): "
            + ", ".join(f"{escape(str(n['node']))} ({n['runs']})" for n in report.nodes)
        )
    speedup = f"speedup\n({direction.better} is better:\n{direction.ratio(report.baseline)})"
    table = Table(title="Per configuration (successful runs, in the metric's unit; speedups against the baseline)", show_lines=False)
    for column in (
        "configuration",
        "n",
        "failed",
        "mean",
        "median",
        "min",
        "max",
        "variance",
        "RV",
        "stable",
        f"mean {speedup}",
        f"median {speedup}",
        "verdict",
    ):
        table.add_column(column, justify="left" if column in ("configuration", "verdict") else "right")
    colours = {"faster": "green", "slower": "red", "more runs needed": "yellow"}
    for row in report.stats.to_dict(orient="records"):
        verdict = row.get("verdict") if isinstance(row.get("verdict"), str) else ("baseline" if row["placement"] == report.baseline else "-")
        if isinstance(row.get("mean_verdict"), str) and row["mean_verdict"] == "more runs needed" and verdict != "baseline":
            verdict += " (mean: more runs needed)"
        colour = colours.get(str(row.get("verdict")), "")
        table.add_row(
            row["config"],
            _fmt(row.get("n")),
            _fmt(row.get("failed")),
            _fmt(row.get("mean")),
            _fmt(row.get("median")),
            _fmt(row.get("min")),
            _fmt(row.get("max")),
            _fmt(row.get("variance")),
            "-" if row.get("rv") is None or (isinstance(row.get("rv"), float) and math.isnan(row["rv"])) else f"{row['rv']:.2%}",
            "-" if row.get("unstable") is None or row.get("unstable") != row.get("unstable") else ("no" if row["unstable"] else "yes"),
            _fmt(row.get("mean_speedup")),
            _fmt(row.get("median_speedup")),
            f"[{colour}]{verdict}[/]" if colour else verdict,
        )
    console.print(table)
    if report.adaptive:
        console.print(adaptive_text(report.adaptive))
    if report.counters:
        console.print(counters_table(report))
    if report.overall:
        overall = Table(
            title=f"Overall, across programs (as the tables of Mazouz et al. 2011: speedup of the total of the means and of the medians "
            f"against {report.baseline}; variances in the metric's unit squared)"
        )
        for column in (
            "placement",
            "programs",
            f"mean {speedup}",
            f"median {speedup}",
            f"geometric mean of mean {speedup}",
            "min variance",
            "max variance",
            "significantly faster",
        ):
            overall.add_column(column, justify="left" if column == "placement" else "right")
        for row in report.overall:
            low, high = row["share_faster_ci"] or (None, None)
            share = f"{row['n_faster']}/{row['n_programs']} ({row['share_faster']:.0%}, CI {_fmt(low, 2)}-{_fmt(high, 2)})"
            overall.add_row(
                row["placement"],
                str(row["n_programs"]),
                _fmt(row["mean_speedup"]),
                _fmt(row["median_speedup"]),
                _fmt(row["geomean_speedup"]),
                _fmt(row["min_variance"]),
                _fmt(row["max_variance"]),
                share,
            )
        console.print(overall)
    console.print(
        f"Speedup > 1: faster than the baseline. Verdicts: one-sided Mann-Whitney on the medians, and the one-sided t-test on the "
        f"means where valid (n > 30 or both samples normal by Shapiro-Wilk). {unstable_rule(direction)}"
    )


def unstable_rule(direction) -> str:
    """The "unstable" rule as it was applied: AV > 1 s only for a metric in seconds."""
    if direction.seconds:
        return "Unstable: AV > 1 s or RV > 1%."
    return "Unstable: RV > 1% (AV > 1 s applies to times in seconds only; RV is unit-free)."


def assumed_text(direction) -> str:
    """What a report says of a study stored without its metric's direction, and how to state it."""
    other = "lower" if direction.better == "higher" else "higher"
    return (
        f"This study was stored without its metric's direction (by a pinlab older than metric_better): {direction.better} is better "
        f"is assumed for {direction.metric!r}, as pinlab assumed when it ran; if {other} is better, report it with --metric-better {other}"
    )


def adaptive_text(adaptive: dict[str, Any]) -> str:
    """How many runs an adaptive study took, against a fixed number of runs per configuration."""
    text = (
        f"Adaptive study (--runs auto, alpha {adaptive['alpha']}): {adaptive['measured']} measured runs over {adaptive['configs']} "
        f"configurations ({adaptive['fewest']}-{adaptive['most']} each, between {adaptive['min_runs']} and {adaptive['max_runs']}); "
        f"a fixed {adaptive['fixed_runs']} runs each would take {adaptive['fixed_total']} "
        f"({adaptive['measured'] / adaptive['fixed_total']:.0%} of that)."
    )
    if adaptive["undecided"]:
        text += f" Not decided at --max-runs {adaptive['max_runs']}: {', '.join(adaptive['undecided'])}."
    else:
        text += " Every comparison with the baseline is decided."
    return text


def counters_table(report: StudyReport):
    """Each counter's mean per run and its ratio to the baseline ([ribeiro2012], Figures 3-5)."""
    from rich.table import Table

    table = Table(title=f"Performance counters: mean per run, and relative to {report.baseline} (above 1 = more events than the OS placement)")
    table.add_column("configuration")
    for event in report.counters:
        table.add_column(event, justify="right")
        table.add_column("ratio", justify="right")
    for row in report.stats.to_dict(orient="records"):
        cells = [row["config"]]
        for event in report.counters:
            mean, ratio = row.get(f"counter:{event}"), row.get(f"counter:{event}:ratio")
            cells += [_count(event, mean), _fmt(ratio, 3)]
        table.add_row(*cells)
    return table


def _count(event: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if event in ("task-clock", "cpu-clock"):
        return f"{value / 1e6:,.1f} ms"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
