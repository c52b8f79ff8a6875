"""The doctor's report for people: one line per process, then one block per finding.

A block is the finding's statement (after its severity and code), its evidence, why it costs,
and its fix: lines to paste, printed as they are (no wrapping, no markup), so that copying them
from the terminal gives the exact command.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pinlab.cpuset import format_cpulist
from pinlab.doctor.findings import Finding, Report
from pinlab.words import plural

if TYPE_CHECKING:
    from rich.console import Console

STYLES = {"info": "cyan", "warning": "yellow", "problem": "bold red"}


def _call(v: dict) -> str:
    """An affinity call: 'tid call old -> new by library [at t s]' (of another thread: 'tid -> target ...')."""
    who = str(v["tid"]) if v.get("target_tid") in (None, v["tid"]) else f"{v['tid']} -> {v['target_tid']}"
    when = f" at {v['t']:.3f} s" if isinstance(v.get("t"), (int, float)) else ""
    library = os.path.basename(v["library"]) if v.get("library") else "?"
    return f"{who} {v['call']} {v.get('old') or '?'} -> {v.get('new') or '?'} by {library}{when}"


def _value(value: Any) -> str:
    """An evidence value in one line: threads as 'tid name [library]', affinity calls as what
    they changed, the rest as JSON."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and "planned_cpu" in v for v in value):
        return "; ".join(
            f"{v['tid']} planned on {v['planned_cpu']}, set to {v['new']} by {os.path.basename(v['library']) if v.get('library') else '?'} ({v['call']})"
            for v in value
        )
    if isinstance(value, list) and value and all(isinstance(v, dict) and "call" in v for v in value):
        return "; ".join(_call(v) for v in value)
    if isinstance(value, list) and value and all(isinstance(v, dict) and "tid" in v for v in value):
        return ", ".join(" ".join(str(x) for x in (v["tid"], v.get("name", ""), f"[{v['library']}]" if v.get("library") else "") if x) for v in value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=False)


def print_report(report: Report, console: Console) -> None:
    from rich.text import Text

    for process in report.processes:
        ended = ", ended during the window" if process.ended else ""
        console.print(
            Text(
                f"process {process.pid} ({process.command}): {plural(process.threads, 'thread')}, allowed CPUs {format_cpulist(process.allowed)}, "
                f"{plural(process.samples, 'sample')} over {report.seconds:.1f} s{ended}",
                style="bold",
            )
        )
    if report.exit_status is not None:
        console.print(Text(f"the program exited with status {report.exit_status}"))
    if not report.findings:
        console.print(Text("nothing found: no thread-pool library, never more busy threads than allowed CPUs"))
    for finding in report.findings:
        print_finding(finding, console)
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("problem", "warning", "info")}
    console.print(Text(", ".join(plural(n, s, "info" if s == "info" else None) for s, n in counts.items()), style=STYLES[report.worst]))


def print_finding(finding: Finding, console: Console) -> None:
    from rich.text import Text

    console.print()
    head = Text()
    head.append(f"{finding.severity.upper():8}", style=STYLES[finding.severity])
    head.append(f"{finding.code} (pid {finding.pid}): ", style="bold")
    head.append(finding.statement)
    console.print(head)
    for key, value in finding.evidence.items():
        console.print(Text(f"  {key}: {_value(value)}"), overflow="fold")
    if finding.why:
        console.print(Text(f"  why: {finding.why}"))
    if finding.fix:
        console.print(Text("  fix:"))
        for line in finding.fix:
            console.print(Text(f"    {line}", style="green" if not line.startswith("#") else "dim"), soft_wrap=True)
