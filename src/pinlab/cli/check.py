"""pinlab check: what this machine lets pinlab do."""

from __future__ import annotations

import json

import click

from pinlab import terminal
from pinlab.measure import system_parts
from pinlab.measure.noise import WARNING
from pinlab.measure.noise import check as run_checks
from pinlab.words import plural


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check(as_json: bool) -> None:
    """Tell what on this machine will add noise or bias to measurements, and how to change it.

    It also lists the system programs pinlab uses (hwloc's lstopo, a C compiler, numactl, likwid):
    where each was found, or what to install and what works without it."""
    findings = run_checks() + system_parts.findings()
    if as_json:
        click.echo(json.dumps([f.to_dict() for f in findings], indent=2))
        return
    from rich.table import Table

    table = Table(title="pinlab check: what will add noise or bias to measurements here, and the system programs pinlab uses", show_lines=True)
    for column in ("check", "status", "found", "what it means", "how to change it"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "info": "cyan", "warning": "yellow"}
    for f in findings:
        table.add_row(f.name, f"[{colours[f.status]}]{f.status}[/]", f.found, f.meaning, f.fix)
    terminal.console().print(table)
    warnings = sum(1 for f in findings if f.status == WARNING)
    click.echo(f"{plural(warnings, 'warning')}." if warnings else "No warnings.")
