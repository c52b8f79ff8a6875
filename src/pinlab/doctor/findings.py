"""What the doctor reports: findings, each with its evidence and its exact fix, and the report.

A finding is meant to be acted on by someone who has not read pinlab's manual: one line saying
what is wrong, the evidence it rests on (threads by tid and name, CPUs, counts), one sentence on
why it costs time, and the lines to paste that fix it. The JSON form is for tools; its keys are
documented in docs/commands/doctor.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Severities, mildest first: info is something worth knowing, warning something likely to cost
#: time, problem something that costs time now (seen during the window).
SEVERITIES = ("info", "warning", "problem")

#: The version of the JSON object a report is written as (``pinlab doctor --json``).
JSON_FORMAT_VERSION = 1


@dataclass
class Finding:
    """One thing found about a process: ``code`` names its kind (stable, for tools)."""

    code: str
    severity: str
    statement: str
    evidence: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    fix: list[str] = field(default_factory=list)
    pid: int | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "pid": self.pid,
            "statement": self.statement,
            "evidence": self.evidence,
            "why": self.why,
            "fix": list(self.fix),
        }


@dataclass
class ProcessSummary:
    """What the report says of each process looked at, beside its findings."""

    pid: int
    command: str
    threads: int
    allowed: list[int]
    samples: int
    ended: bool
    pools: dict[str, str]  # pool library -> the file mapped

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "command": self.command,
            "threads": self.threads,
            "allowed_cpus": self.allowed,
            "samples": self.samples,
            "ended": self.ended,
            "pool_libraries": self.pools,
        }


@dataclass
class Report:
    """The doctor's answer: the processes looked at, over which window, and what was found.

    ``exit_status`` is the launched program's, when the doctor ran it (None for processes it
    only looked at).
    """

    processes: list[ProcessSummary]
    seconds: float
    findings: list[Finding]
    exit_status: int | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    @property
    def worst(self) -> str:
        """The most severe finding's severity (info when there is none)."""
        return max((f.severity for f in self.findings), key=SEVERITIES.index, default="info")

    @property
    def status(self) -> int:
        """0 when nothing is above info, 1 when a warning or a problem was found."""
        return 0 if self.worst == "info" else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "pinlab_doctor": JSON_FORMAT_VERSION,
            "pids": self.pids,
            "seconds": round(self.seconds, 3),
            "processes": [p.to_json() for p in self.processes],
            "worst": self.worst,
            "findings": [f.to_json() for f in self.findings],
            "exit_status": self.exit_status,
        }
