"""What ``pinlab report`` and ``pinlab autopin-report`` are asked for, checked before any work.

A report reads a database or a log and may compute statistics for seconds before it writes its
files; a missing database or an output that cannot be written is refused when the request is
made, in the same words whether it comes from the command line or from Python.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pinlab.autopin.log import AutopinLog, read_log
from pinlab.errors import UsageError
from pinlab.outputs import check_picture, check_writable_directory
from pinlab.report.autopin_html import write_autopin_html
from pinlab.report.autopin_timeline import save_picture, timeline
from pinlab.report.data import StudyReport, study_report
from pinlab.report.html import write_html
from pinlab.report.tables import write_csv


@dataclass(frozen=True)
class ReportRequest:
    """A study's report: the database and study, the statistics' settings, and the directories
    to write CSV and HTML into (made when written; checked, and left as they were, now)."""

    db: str = "pinlab.db"
    name: str | None = None
    baseline: str = "none"
    alpha: float = 0.05
    metric_better: str | None = None
    html_dir: str | None = None
    csv_dir: str | None = None

    def __post_init__(self) -> None:
        if not os.path.exists(self.db):
            raise UsageError(f"no study database at {self.db!r}: run `pinlab study --db {self.db} ...` first")
        for option, directory in (("--csv", self.csv_dir), ("--html", self.html_dir)):
            if directory:
                check_writable_directory(directory, option)

    def report(self) -> StudyReport:
        """The report's statistics, from the stored runs."""
        return study_report(self.db, self.name, baseline=self.baseline, alpha=self.alpha, metric_better=self.metric_better)

    def write(self, rep: StudyReport) -> list[str]:
        """Write the CSV and HTML files asked for; the lines that say where they are."""
        written = []
        try:
            if self.csv_dir:
                runs_csv, stats_csv = write_csv(rep, self.csv_dir)
                written.append(f"wrote {runs_csv} and {stats_csv}")
            if self.html_dir:
                written.append(f"HTML report: {write_html(rep, self.html_dir)}")
        except OSError as exc:  # checked when asked, but a disk can fill or a directory vanish meanwhile
            raise UsageError(f"could not write the report: {exc.strerror or exc} ({exc.filename}); the study database is unchanged") from None
        return written


@dataclass(frozen=True)
class AutopinReportRequest:
    """A report on an autopin log, with its optional HTML directory and timeline picture."""

    log: str
    html_dir: str | None = None
    picture: str | None = None

    def __post_init__(self) -> None:
        if self.html_dir:
            check_writable_directory(self.html_dir, "--html")
        if self.picture:
            check_picture(self.picture)

    def read(self) -> AutopinLog:
        """The log, read (its warnings in :attr:`AutopinLog.warnings`)."""
        return read_log(self.log)

    def write(self, log: AutopinLog) -> list[str]:
        """Draw the picture and write the HTML asked for; the lines that say where they are."""
        written = []
        if self.picture:
            written.append(f"picture: {save_picture(timeline(log), self.picture)}")
        if self.html_dir:
            written.append(f"HTML report: {write_autopin_html(log, self.html_dir)}")
        return written
