"""An autopin log as terminal text: what ran, each search's candidates and verdict, the summary."""

from __future__ import annotations

from pinlab import terminal
from pinlab.autopin.log import AutopinLog
from pinlab.report.autopin_data import (
    Search,
    choice_lines,
    metric_why,
    migration_sentence,
    opening_sentence,
    parameters,
    rate_unit,
    recheck_sentence,
    run_summary,
    searches,
    seconds,
    si,
    what_ran,
)

__all__ = ["print_autopin_report", "candidates_table", "search_title"]


def search_title(search: Search) -> str:
    """'Search 1, from the start' or 'Search 2, after the re-probe at 412 s'."""
    if search.metric_change is not None:
        return f"Search {search.number}, after the metric changed to {search.metric_change.metric} at {seconds(search.metric_change.t)}"
    if search.reprobe is None:
        began = f" (probing from {seconds(search.began)})" if search.began is not None else ""
        return f"Search {search.number}, from the start{began}"
    return f"Search {search.number}, after the re-probe at {seconds(search.reprobe.t)}"


def candidates_table(log: AutopinLog, search: Search):
    """The rich table of one search's candidates."""
    from rich.table import Table

    against = "the chosen one" if search.reference_is_choice else "the best measured"
    table = Table(title=f"{search_title(search)}\nrates in {rate_unit(log, search)}; % against {against}")
    for column in ("#", "candidate", "CPUs", "rounds", "mean rate", "spread: sd (n)", "vs chosen" if search.reference_is_choice else "vs best", ""):
        table.add_column(column, justify="left" if column in ("candidate", "CPUs", "") else "right")
    colours = {"chosen": "green", "runner-up": "yellow", "equivalent": "cyan"}
    for row in search.rows:
        spread = (
            f"± {100 * row.relative_spread:.2f} % ({row.samples})" if row.relative_spread is not None else f"({row.samples})" if row.samples else "–"
        )
        relative = "–" if row.relative is None else ("reference" if row.index == search.reference else f"{100 * row.relative:+.1f} %")
        role = f"[{colours[row.role]}]{row.role}[/]" if row.role else ""
        table.add_row(str(row.index), row.name, row.cpulist, str(row.rounds), si(row.mean), spread, relative, role)
    return table


def print_autopin_report(log: AutopinLog, console=None) -> None:
    """The report on the terminal (or ``console``)."""
    from rich.markup import escape

    console = console or terminal.console()
    start = log.start
    console.print(f"[bold]autopin log {escape(log.path)}[/]: {escape(what_ran(log))}")
    why = metric_why(log)
    notice = f" ({escape(why)})" if why else ""
    if log.summary is not None and log.summary.ended_during_init:
        console.print("Metric none: the run ended during the initialisation, before autopin chose one")
    else:
        console.print(f"Metric {escape(start.metric_label)}, rates in {escape(rate_unit(log))}{notice}")
    params = parameters(log)
    if params:
        console.print("Parameters: " + escape(", ".join(f"{k} {v}" for k, v in params)))
    for search in searches(log):
        opening = opening_sentence(search)
        if opening is not None:
            console.print(escape(opening))
        if not search.probes and search.choice is None:
            console.print(
                f"{escape(search_title(search))}: nothing was measured after it."
                if opening is not None
                else "Nothing was measured: the log ends before the first probe."
            )
            continue
        console.print(candidates_table(log, search))
        for line in choice_lines(log, search):
            console.print(escape(line))
        for m in search.migrations:
            console.print(escape(migration_sentence(m)))
        if rechecked := recheck_sentence(search.rechecks):
            console.print(escape(rechecked))
    for line in run_summary(log):
        console.print(escape(line))
