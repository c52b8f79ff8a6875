"""The project's own files: nothing in them names a path of one development machine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Home directories, and the workplace's checkout folders: paths that exist only where the project was written.
MACHINE_PATHS = re.compile(r"(?<![\w.])(/work/(main|shared)\b|/root/|/home/[a-z_][\w-]*/)")


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
        return [ROOT / name.decode() for name in listed if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive)
        return [
            p
            for p in ROOT.rglob("*")
            if p.is_file() and not any(part.startswith(".") or part in ("build", "demo-output") for part in p.relative_to(ROOT).parts)
        ]


def test_no_file_names_a_path_of_a_development_machine():
    found = []
    for path in tracked_files():
        if path.resolve() == Path(__file__).resolve() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATHS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


def test_the_check_finds_such_a_path():
    assert MACHINE_PATHS.search("# copy of /work/shared/tools/numavm") and MACHINE_PATHS.search("see /home/alice/x")
    assert not MACHINE_PATHS.search("tests/vm/numavm, shared/tools/numavm beside the project")
