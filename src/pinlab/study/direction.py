"""Which way a study's metric is better, and what pinlab knows of its unit.

A speedup only means something once it is known whether the metric is a time (lower is better)
or a rate (higher is better). pinlab knows it for its own metrics: ``time`` (wall seconds), and
the figures the built-in workloads print with ``--json`` (``*_mbs`` keys are MB/s, ``*seconds``
and ``*_time`` keys are seconds). Any other metric -- a regular expression on a program's output,
or a JSON key of a program pinlab did not write -- must be told (``--metric-better``): a guess
reports slower placements as faster whenever it is wrong.

A study stores the direction in its parameters (``metric_better``). Studies stored before that
existed have none: for them the known direction is used, and for a custom metric the direction
pinlab then assumed (higher is better) is kept, and every report says it is an assumption.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pinlab.errors import UsageError
from pinlab.stats import HIGHER, LOWER
from pinlab.workloads import WORKLOADS

#: How the direction of a study's metric was found (:attr:`MetricDirection.source`).
STATED = "stated"  # given with --metric-better, stored with the study
KNOWN = "known"  # a metric pinlab knows (time, a built-in workload's figure)
REPORTED = "report"  # not stored (an older study): stated with `pinlab report --metric-better`
ASSUMED = "assumed"  # not stored, not known: what pinlab assumed before directions were stored
#: What pinlab assumed for every metric other than time before the direction was stored.
LEGACY_ASSUMPTION = HIGHER
BETTER_HELP = "lower (times, latencies) or higher (rates such as MB/s, operations per second)"


@dataclass(frozen=True)
class MetricDirection:
    """Which way a metric is better (``better``), how that was found (``source``), and its unit
    when pinlab knows it (``unit``: "s" or "MB/s", else None)."""

    metric: str
    better: str
    source: str
    unit: str | None = None

    @property
    def seconds(self) -> bool:
        """Whether the values are seconds: only then does [mazouz2011variability]'s "AV > 1 s" apply."""
        return self.unit == "s"

    @property
    def assumed(self) -> bool:
        return self.source == ASSUMED

    def label(self) -> str:
        """The direction in words, e.g. "lower is better", with the caveat when it is assumed."""
        text = f"{self.better} is better"
        if self.source == ASSUMED:
            text += " (assumed: not stored with this study)"
        elif self.source == REPORTED:
            text += " (given to pinlab report: not stored with this study)"
        return text

    def ratio(self, baseline: str) -> str:
        """How a speedup is formed, e.g. "none / placement" (> 1 always means faster)."""
        return f"{baseline} / placement" if self.better == LOWER else f"placement / {baseline}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "better": self.better, "source": self.source, "unit": self.unit, "label": self.label()}


def _workload_programs(programs: Iterable[Sequence[Any]]) -> bool:
    """Whether every program is one of pinlab's built-in workloads (name and executable match),
    so that its JSON keys mean what pinlab wrote them to mean."""
    programs = list(programs)
    return bool(programs) and all(
        name in WORKLOADS and bool(argv) and os.path.basename(str(argv[0])) == WORKLOADS[name].executable for name, argv in programs
    )


def known_direction(metric: str, programs: Iterable[Sequence[Any]]) -> tuple[str, str] | None:
    """(better, unit) for a metric pinlab knows, else None.

    ``programs`` are (name, argv) pairs. ``time`` is wall seconds. A ``json:KEY`` of built-in
    workloads only (another program may use the same key for something else): a key ending in
    ``_mbs`` is MB/s (higher is better), one ending in ``seconds`` or ``_time`` is seconds.
    """
    if metric == "time":
        return LOWER, "s"
    if not metric.startswith("json:") or not _workload_programs(programs):
        return None
    last = metric[5:].split(".")[-1]
    if last.endswith("_mbs"):
        return HIGHER, "MB/s"
    if last.endswith("seconds") or last.endswith("_time"):
        return LOWER, "s"
    return None


def check_better_option(metric: str, better: str | None, programs: Iterable[Sequence[Any]], option: str = "--metric-better") -> str:
    """The direction a new study stores: ``better`` as given, checked (one UsageError line).

    ``time`` needs none (lower is better). Any other metric must state it: pinlab cannot tell a
    time printed by a program from a rate. A direction that contradicts one pinlab knows (time,
    a built-in workload's MB/s or seconds) is refused.
    """
    programs = list(programs)
    if better is not None and better not in (LOWER, HIGHER):
        raise UsageError(f"{option} must be lower or higher (got {better!r}): {BETTER_HELP}")
    known = known_direction(metric, programs)
    if better is None:
        if metric != "time":
            raise UsageError(f"--metric {metric!r} does not say which way is better: add {option} {BETTER_HELP}")
        return known[0]
    if known is not None and known[0] != better:
        if metric == "time":
            raise UsageError(f"{option} {better} contradicts --metric time (wall seconds: lower is better): leave {option} out")
        raise UsageError(
            f"{option} {better} contradicts --metric {metric} ({metric[5:]} of the built-in workloads is in {known[1]}: "
            f"{known[0]} is better): give {option} {known[0]}"
        )
    return better


def study_direction(parameters: dict[str, Any], stated: str | None = None) -> MetricDirection:
    """The direction of a stored study's metric, from its parameters.

    The stored ``metric_better`` wins (``stated``, e.g. from ``pinlab report --metric-better``,
    may only repeat it). Without one (a study from before directions were stored): ``stated`` if
    given (checked against what pinlab knows), else the known direction, else the old
    assumption, higher is better, marked ``assumed``.
    """
    metric = parameters.get("metric", "time")
    programs = parameters.get("programs", [])
    known = known_direction(metric, programs)
    unit = known[1] if known else None
    stored = parameters.get("metric_better")
    if stored is not None:
        if stated is not None and stated != stored:
            raise UsageError(
                f"this study stores that {stored} is better for its metric {metric!r}: leave --metric-better out (a stored study keeps its direction)"
            )
        return MetricDirection(metric, stored, STATED, unit)
    if stated is not None:
        return MetricDirection(metric, check_better_option(metric, stated, programs), REPORTED, unit)
    if known is not None:
        return MetricDirection(metric, known[0], KNOWN, unit)
    return MetricDirection(metric, LEGACY_ASSUMPTION, ASSUMED, None)
