"""An autopin run as one self-contained HTML page: what ran, each search's table and verdict, the timeline.

Built like the study report (:mod:`pinlab.report.html`): one jinja2 template, inline CSS, the
picture embedded as an SVG ``data:`` URI, so ``index.html`` can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from pinlab.autopin.log import AutopinLog
from pinlab.errors import UsageError
from pinlab.report.autopin_data import (
    choice_lines,
    metric_why,
    migration_sentence,
    opening_sentence,
    parameters,
    rate_unit,
    recheck_sentence,
    run_summary,
    searches,
    si,
    what_ran,
)
from pinlab.report.autopin_timeline import timeline
from pinlab.report.html import _environment

__all__ = ["render_autopin_html", "write_autopin_html", "TEMPLATE"]

TEMPLATE = "autopin.html.j2"


def _svg(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _rows(search) -> list[dict[str, Any]]:
    rows = []
    for row in search.rows:
        rows.append(
            {
                "index": row.index,
                "name": row.name,
                "cpus": row.cpulist,
                "order": ", ".join(map(str, row.cpus)),
                "rounds": row.rounds,
                "samples": row.samples,
                "mean": si(row.mean),
                "spread": "–" if row.spread is None else f"± {si(row.spread)}",
                "relative_spread": "" if row.relative_spread is None else f"{100 * row.relative_spread:.2f} %",
                "relative": "–" if row.relative is None else ("reference" if row.index == search.reference else f"{100 * row.relative:+.1f} %"),
                "role": row.role,
            }
        )
    return rows


def _searches(log: AutopinLog) -> list[dict[str, Any]]:
    out = []
    for search in searches(log):
        out.append(
            {
                "number": search.number,
                "unit": rate_unit(log, search),
                "reprobe": opening_sentence(search),
                "measured": bool(search.probes),
                "against": "chosen" if search.reference_is_choice else "best measured",
                "rows": _rows(search),
                "lines": choice_lines(log, search) if search.probes or search.choice else [],
                "decided": None if search.choice is None else search.choice.decided,
                "migrations": [migration_sentence(m) for m in search.migrations],
                "rechecks": recheck_sentence(search.rechecks),
            }
        )
    return out


def render_autopin_html(log: AutopinLog) -> str:
    """The page as a string (see :func:`write_autopin_html`)."""
    start = log.start
    context = {
        "path": log.path,
        "what": what_ran(log),
        "metric": start.metric_label,
        "notice": metric_why(log),
        "unit": rate_unit(log),
        "parameters": parameters(log),
        "warnings": list(log.warnings),
        "searches": _searches(log),
        "summary": run_summary(log),
        "picture": {
            "src": _svg(timeline(log)),
            "alt": f"rate in {rate_unit(log)} over time, with each candidate's probing window shaded and the choices marked",
        },
    }
    return _environment().get_template(TEMPLATE).render(**context)


def write_autopin_html(log: AutopinLog, directory) -> Path:
    """Write ``directory/index.html`` (created with its parents) and return its path."""
    directory = Path(directory)
    text = render_autopin_html(log)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "index.html"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(
            f"cannot write the HTML report into {str(directory)!r}: a part of that path is a file, not a directory; give a directory path"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot write the HTML report into {str(directory)!r}: {exc.strerror or exc}; give a directory you can write to") from None
    return path
