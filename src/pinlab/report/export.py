"""The study export, ``pinlab report --json``: one owner for its version, its writing and its reading.

Scripts and notebooks read this JSON instead of the SQLite store, whose tables may change between
versions; the export's fields are only ever added within a version, so a reader refuses only
another version. Its JSON Schema is ``docs/reference/formats/study-export.schema.json``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pinlab.errors import UsageError
from pinlab.report.data import StudyReport, direction_of
from pinlab.report.tables import runs_table

#: The version of the export (key ``pinlab_study_export``).
STUDY_EXPORT_VERSION = 1

#: Fields every export has, with the JSON types a reader may rely on.
_EXPORT_FIELDS: dict[str, type] = {"study": str, "metric": str, "baseline": str, "runs": list, "stats": list, "overall": list}

_EXPORT_HINT = "give the output of `pinlab report NAME --json`"


def _clean(value: Any) -> Any:
    """A value JSON can hold: numpy scalars as Python numbers, NaN and infinities as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


def _records(frame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def to_json(report: StudyReport) -> dict[str, Any]:
    """The export of ``report``: what was run and on what machine, every measured run, the
    statistics per configuration and overall."""
    return {
        "pinlab_study_export": STUDY_EXPORT_VERSION,
        "study": report.study.name,
        "parameters": report.study.parameters,
        "machine": {k: v for k, v in report.study.machine.items() if k != "topology_xml"},
        "warnings": report.study.warnings + ([report.node_warning] if getattr(report, "node_warning", None) else []),
        "nodes": getattr(report, "nodes", []),
        "baseline": report.baseline,
        "alpha": report.alpha,
        "metric": report.metric,
        "metric_better": direction_of(report).better,
        "metric_direction": direction_of(report).to_dict(),
        "counters": report.counters,
        "adaptive": report.adaptive,
        "runs": _records(runs_table(report)),
        "stats": _records(report.stats),
        "overall": [{k: _clean(v) for k, v in row.items()} for row in report.overall],
    }


def dump_json(report: StudyReport) -> str:
    """The export as ``pinlab report --json`` prints it."""
    return json.dumps(to_json(report), indent=1)


def check_study_export(data: Any, source: str = "study export") -> dict[str, Any]:
    """``data`` if it is a study export this pinlab reads, else a one-line UsageError saying what
    is wrong. An export without a version comes from a pinlab before versions: it is format 1."""
    if not isinstance(data, dict) or "study" not in data:
        raise UsageError(f"{source} is not a pinlab study export (no 'study' field); {_EXPORT_HINT}")
    version = data.get("pinlab_study_export", STUDY_EXPORT_VERSION)
    if version != STUDY_EXPORT_VERSION:
        raise UsageError(
            f"{source} is a study export of format {version!r}; this pinlab reads format {STUDY_EXPORT_VERSION}: {_EXPORT_HINT} with this pinlab"
        )
    for name, wanted in _EXPORT_FIELDS.items():
        if not isinstance(data.get(name), wanted):
            what = "a string" if wanted is str else "a list"
            raise UsageError(f"{source}: field {name!r} should be {what}, not {json.dumps(data.get(name))[:40]}; {_EXPORT_HINT}")
    return data


def parse_study_export(text: str, source: str = "study export") -> dict[str, Any]:
    """The study export in ``text`` (the output of ``pinlab report --json``), checked."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{source} is not valid JSON ({exc}); {_EXPORT_HINT}") from None
    return check_study_export(data, source)
