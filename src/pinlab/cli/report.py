"""pinlab report and pinlab autopin-report: tables, pictures and HTML of studies and autopin logs."""

from __future__ import annotations

import click

from pinlab.autopin.logread import read_log
from pinlab.errors import UsageError
from pinlab.outputs import check_writable_directory
from pinlab.report.autopin_html import write_autopin_html
from pinlab.report.autopin_tables import print_autopin_report
from pinlab.report.autopin_timeline import save_picture, timeline
from pinlab.report.data import study_report
from pinlab.report.html import write_html
from pinlab.report.tables import dump_json, print_by_node, print_report, write_csv


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
    from pathlib import Path

    if not Path(db).exists():
        raise UsageError(f"no study database at {db!r}: run `pinlab study --db {db} ...` first")
    for option, directory in (("--csv", csv_dir), ("--html", html_dir)):
        if directory:
            check_writable_directory(directory, option)
    rep = study_report(db, name, baseline=baseline, alpha=alpha, metric_better=metric_better)
    if as_json:
        click.echo(dump_json(rep))
    else:
        print_report(rep)
        if by_node:
            print_by_node(rep)
    try:
        if csv_dir:
            runs_csv, stats_csv = write_csv(rep, csv_dir)
            click.echo(f"pinlab: wrote {runs_csv} and {stats_csv}", err=True)
        if html_dir:
            click.echo(f"pinlab: HTML report: {write_html(rep, html_dir)}", err=True)
    except OSError as exc:  # checked above, but a disk can fill or a directory vanish meanwhile
        raise UsageError(f"could not write the report: {exc.strerror or exc} ({exc.filename}); the study database is unchanged") from None


@click.command("autopin-report")
@click.argument("log_path", metavar="LOG")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), help="Write a self-contained HTML report into DIR.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw the rate over time to FILE.svg or FILE.png.")
def autopin_report(log_path, html_dir, picture) -> None:
    """Report on an autopin log (written by `pinlab autopin --log FILE`): candidates, verdicts, timeline."""
    if html_dir:
        check_writable_directory(html_dir, "--html")
    if picture and not picture.lower().endswith((".svg", ".png")):
        raise UsageError(f"picture file {picture!r} must end in .svg or .png")
    log = read_log(log_path)
    for warning in log.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    print_autopin_report(log)
    if picture:
        click.echo(f"pinlab: picture: {save_picture(timeline(log), picture)}", err=True)
    if html_dir:
        click.echo(f"pinlab: HTML report: {write_autopin_html(log, html_dir)}", err=True)
