"""Counted nouns for messages: "1 thread", "2 threads" (never "1 threads")."""

from __future__ import annotations

_IRREGULAR = {"process": "processes", "co-runner process": "co-runner processes"}


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly one."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_form or _IRREGULAR.get(noun) or noun + 's'}"
