"""pinlab report and pinlab autopin-report: tables, pictures and HTML of studies and autopin logs."""

from __future__ import annotations

import click

from pinlab.report.autopin_tables import print_autopin_report
from pinlab.report.export import dump_json
from pinlab.report.requests import AutopinReportRequest, ReportRequest
from pinlab.report.tables import print_by_node, print_report


@click.command()
@click.argument("name", required=False)
@click.option("--db", default="pinlab.db", show_default=True, help="The study database.")
@click.option("--baseline", default="none", show_default=True, help="The placement others are compared with.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Risk level of the statistical tests.")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), help="Write a self-contained HTML report into DIR.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="Write runs.csv and stats.csv into DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@click.option("--metric-better", help="For a study stored without its metric's direction (older pinlab): lower or higher is better.")
@click.option("--by-node", is_flag=True, help="Also each configuration's runs and median per node (a Slurm campaign's nodes).")
def report(name, db, baseline, alpha, html_dir, csv_dir, as_json, metric_better, by_node) -> None:
    """Statistics of a stored study (NAME, default the latest): tables, CSV, JSON, HTML."""
    request = ReportRequest(db, name, baseline=baseline, alpha=alpha, metric_better=metric_better, html_dir=html_dir, csv_dir=csv_dir)
    rep = request.report()
    if as_json:
        click.echo(dump_json(rep))
    else:
        print_report(rep)
        if by_node:
            print_by_node(rep)
    for line in request.write(rep):
        click.echo(f"pinlab: {line}", err=True)


@click.command("autopin-report")
@click.argument("log_path", metavar="LOG")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), help="Write a self-contained HTML report into DIR.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw the rate over time to FILE.svg or FILE.png.")
def autopin_report(log_path, html_dir, picture) -> None:
    """Report on an autopin log (written by `pinlab autopin --log FILE`): candidates, verdicts, timeline."""
    request = AutopinReportRequest(log_path, html_dir=html_dir, picture=picture)
    log = request.read()
    for warning in log.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    print_autopin_report(log)
    for line in request.write(log):
        click.echo(f"pinlab: {line}", err=True)
