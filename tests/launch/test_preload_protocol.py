"""The PINLAB_* variables pinlab writes for the preload library, the ones the library reads, and
the list documented at the top of the library's source are the same set (less the one a user may
set, which pinlab never writes)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRELOAD = REPO / "native" / "preload" / "pinlab_preload.c"
WRITERS = [REPO / "src" / "pinlab" / "launch" / "runner.py", REPO / "src" / "pinlab" / "autopin" / "session.py"]
#: Read by the library, set only by a user who wants helpers elsewhere than the allowed CPUs.
USER_ONLY = {"PINLAB_HELPER_CPUS"}


def documented(text: str) -> set[str]:
    header = text[: text.index("*/")]
    return set(re.findall(r"^ \*\s+(PINLAB_[A-Z_]+)\s", header, re.M)) | set(re.findall(r"with (PINLAB_[A-Z_]+)", header))


def read(text: str) -> set[str]:
    return set(re.findall(r'"(PINLAB_[A-Z_]+)"', text))


def written(texts: list[str]) -> set[str]:
    return {name for text in texts for name in re.findall(r'env\["(PINLAB_[A-Z_]+)"\]\s*=', text)}


def other_libraries() -> set[str]:
    """What the other native parts read (the heartbeat and memory libraries, the tracers)."""
    return {name for path in [*(REPO / "native").rglob("*.c"), *(REPO / "native").rglob("*.h")] if path != PRELOAD for name in read(path.read_text())}


def test_the_preload_protocol_has_one_list_of_variables():
    source = PRELOAD.read_text()
    wrote = written([w.read_text() for w in WRITERS]) - (other_libraries() - read(source))
    assert documented(source) == read(source), "the comment at the top of pinlab_preload.c lists what the library reads"
    assert wrote == read(source) - USER_ONLY, (sorted(wrote), sorted(read(source)))


def test_the_check_sees_a_variable_missing_from_the_list():
    source = PRELOAD.read_text()
    planted = source.replace(" *   PINLAB_CHILDREN ", " *   (gone) ", 1)
    assert documented(planted) != read(planted)
    assert written(['env["PINLAB_NEW"] = "1"']) - read(source) == {"PINLAB_NEW"}
