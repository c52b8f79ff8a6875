"""What a stored run holds, and how its values become SQLite values.

The columns of a run and of the flat rows a study is read back as, the checks that turn a Python
value into a column's value (text, a 64-bit integer, a real, canonical JSON), and the run columns
found in a ``pinlab run`` record. :mod:`pinlab.study.store` writes and reads them; this module
knows nothing of the database file. Only the standard library is used (:func:`dataframe` imports
pandas when it is called).
"""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Any

RUN_STATUSES = ("ok", "failed", "timeout")

CONFIG_KEYS = ("program", "argv", "threads", "placement", "mem", "corun", "extra")
REAL_FIELDS = ("started_at", "wall_seconds", "user_seconds", "system_seconds", "metric")
INT_FIELDS = ("exit_status", "signal", "migrations", "voluntary_context_switches", "involuntary_context_switches", "max_rss_kib")
JSON_FIELDS = ("placement_cpus", "record")
#: The keyword fields :meth:`~pinlab.study.store.Store.add_run` accepts (``status`` is required).
RUN_FIELDS = ("status", *REAL_FIELDS, *INT_FIELDS, *JSON_FIELDS, "stderr_tail")
RUN_COLUMNS = ("id", "config_id", "run_index", "warmup", "stored_at", *RUN_FIELDS)
#: Columns of :meth:`~pinlab.study.store.Store.run_rows` rows, in order (``record`` only when asked for).
FRAME_COLUMNS = (
    "study",
    "config_id",
    "position",
    "program",
    "argv",
    "threads",
    "placement",
    "mem",
    "corun",
    "extra",
    "run_id",
    "run_index",
    "warmup",
    "stored_at",
    *RUN_FIELDS,
)


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays, sets and paths as plain JSON values (so a run is never lost to a type)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if hasattr(value, "__index__"):
        return operator.index(value)
    if hasattr(value, "__float__"):
        return float(value)
    raise TypeError(f"{type(value).__name__} value {value!r} cannot be stored as JSON")


def canonical_json(value: Any) -> str:
    """The one text of a JSON value: sorted keys, no spaces, ASCII only (so equal values give equal bytes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_json_default)


def loads_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def text_value(value: Any, name: str, nullable: bool = True) -> str | None:
    """A text column: str (or bytes, decoded as UTF-8 with replacement); lone surrogates escaped."""
    if value is None:
        if nullable:
            return None
        raise TypeError(f"{name} is required")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        raise TypeError(f"{name} must be text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # e.g. undecodable bytes from os.fsdecode: keep them visible
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def integer_value(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r}") from None
    if not -(2**63) <= number < 2**63:
        raise ValueError(f"{name} = {number} does not fit in a 64-bit integer")
    return number


def real_value(value: Any, name: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, not {type(value).__name__} {value!r}") from None


def fields_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """The run columns found in a ``pinlab run`` record (:meth:`RunRecord.to_json`), plus the record itself."""
    fields = {name: record.get(name) for name in (*REAL_FIELDS, *INT_FIELDS) if name != "metric"}
    plan = record.get("plan") or {}
    fields["placement_cpus"] = plan.get("cpus")
    fields["record"] = record
    return fields


def dataframe(rows: list[dict[str, Any]]):
    """A pandas DataFrame of :meth:`~pinlab.study.store.Store.run_rows` rows (pandas imported only here)."""
    import pandas

    columns = [c for c in FRAME_COLUMNS if c != "record" or any("record" in row for row in rows)]
    return pandas.DataFrame(rows, columns=columns)
