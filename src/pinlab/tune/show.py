"""A tune's answer for people: the placements raced, the answer, how sure, the settings to paste.

The settings are printed as they are (no wrapping, no markup), so that copying them from the
terminal gives the exact lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinlab.tune.answer import Answer, Entry
from pinlab.words import plural

if TYPE_CHECKING:
    from rich.console import Console


def _state(entry: Entry, answer: Answer) -> str:
    if entry.left_at is not None:
        return f"left after {entry.left_at} runs ({entry.why_left})"
    if entry.position == answer.winner.position:
        return "winner"
    return "in the race to the end"


def print_answer(answer: Answer, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    unit = " (s)" if answer.metric == "time" else ""
    table = Table(title=f"{answer.study}: {plural(answer.threads, 'thread')}, {answer.metric}{unit}, {answer.better} is better", title_justify="left")
    for column in ("placement", "CPUs", "runs", "median", "state"):
        table.add_column(column, justify="right" if column in ("runs", "median") else "left", overflow="fold")
    for entry in answer.entries:
        cpus = "any (unpinned)" if entry.cpus is None else ",".join(map(str, entry.cpus))
        median = "-" if entry.median is None else f"{entry.median:,.0f}" if abs(entry.median) >= 1000 else f"{entry.median:.4g}"
        table.add_row(entry.label, cpus, str(entry.runs), median, _state(entry, answer))
    console.print(table)
    console.print(
        Text(f"race: {plural(answer.measured_runs, 'measured run')}, {answer.seconds:.0f} s of runs; ended: {answer.ended or 'not yet (resume it)'}")
    )
    console.print(Text(f"answer: {answer.sentence()}", style="bold"))
    console.print(Text(f"how sure: {answer.sureness()}"))
    if answer.settings:
        console.print(Text("settings:", style="bold"))
        for tool, lines in answer.settings.items():
            console.print(Text(f"  # {tool}"))
            for line in lines.splitlines():
                console.print(Text(line), soft_wrap=True)
    console.print(Text(f"every run is stored: pinlab report {answer.study} --db {answer.db}"))
