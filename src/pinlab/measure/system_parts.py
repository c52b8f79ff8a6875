"""The programs of the system that pinlab uses but does not ship, found at run time.

pinlab installs without root and on any Linux (a wheel, Spack, EasyBuild), so nothing here may
assume Debian or a checkout: each part is looked for on ``PATH`` when it is needed, and a missing
one is one line that names the package to install on the common systems (Debian/Ubuntu,
RHEL/Fedora, Spack or a site module) and what pinlab still does without it. ``pinlab check``
lists them all.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from pinlab.errors import UsageError
from pinlab.measure.noise import INFO, OK, WARNING, Finding

#: The oldest hwloc whose lstopo has what pinlab asks of it: XML of format 2, ``--disallowed``,
#: ``--no-io`` and synthetic descriptions with memory children (``pack:2 [numa] core:4``).
HWLOC_MINIMUM = (2, 0)


@dataclass(frozen=True)
class Part:
    """A system program pinlab uses: the names it is looked for under, why, and how to get it."""

    name: str
    programs: tuple[str, ...]  # looked for on PATH in this order
    needed_for: str
    debian: str
    rhel: str
    spack: str
    without: str  # what still works when it is missing; "" for a part pinlab cannot do without
    required: bool = False

    def install_line(self) -> str:
        return f"Debian/Ubuntu: apt-get install {self.debian}; RHEL/Fedora: dnf install {self.rhel}; Spack: spack install {self.spack} (or module load {self.spack})"

    def missing_line(self, what: str | None = None) -> str:
        """The one line for a missing part: what needed it, what to install, what still works."""
        found_as = " or ".join(self.programs)
        line = f"{found_as} not found on PATH, needed for {what or self.needed_for}: install {self.name} ({self.install_line()})"
        return line + (f"; without it {self.without}" if self.without else "")


HWLOC = Part(
    "hwloc " + ".".join(map(str, HWLOC_MINIMUM)) + " or newer",
    ("lstopo-no-graphics", "lstopo"),
    "reading this machine's topology and synthetic descriptions",
    debian="hwloc-nox",
    rhel="hwloc",
    spack="hwloc",
    without="pinlab still works on the bundled presets and on hwloc XML files (-t PRESET or -t FILE.xml)",
    required=True,
)
COMPILER = Part(
    "a C compiler",
    ("cc", "gcc", "clang"),
    "pinlab cc and trace --method exact",
    debian="gcc",
    rhel="gcc",
    spack="gcc",
    without="every other command works, and trace's other methods need no compiler",
)
NUMACTL = Part(
    "numactl",
    ("numactl",),
    "running the `numactl ...` lines that pinlab place -f numactl prints",
    debian="numactl",
    rhel="numactl",
    spack="numactl",
    without="pinlab applies placements and memory policies itself (pinlab run --mem ...)",
)
LIKWID = Part(
    "likwid",
    ("likwid-pin",),
    "running the `likwid-pin ...` lines that pinlab place -f likwid prints",
    debian="likwid",
    rhel="likwid",
    spack="likwid",
    without="pinlab pins threads itself (pinlab run)",
)
PARTS = (HWLOC, COMPILER, NUMACTL, LIKWID)


def find(part: Part) -> str | None:
    """The path of the first of ``part``'s programs on PATH, or None."""
    for program in part.programs:
        path = shutil.which(program)
        if path is not None:
            return path
    return None


def require(part: Part, what: str | None = None) -> str:
    """The path of ``part``, or a UsageError with its one line (``what`` needed it)."""
    path = find(part)
    if path is None:
        raise UsageError(part.missing_line(what))
    return path


@functools.lru_cache(maxsize=16)
def version_of(path: str) -> tuple[int, ...] | None:
    """The version ``path --version`` prints (the first dotted number), or None (asked once per path)."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout + done.stderr)
    return tuple(int(n) for n in found.groups() if n is not None) if found else None


def require_lstopo(what: str) -> str:
    """lstopo's path, refusing one older than :data:`HWLOC_MINIMUM` in one line."""
    path = require(HWLOC, what)
    old = too_old(path)
    if old is not None:
        raise UsageError(f"{path} is hwloc {old}, pinlab needs {HWLOC.name} for {what}: install it ({HWLOC.install_line()}) and put it first on PATH")
    return path


def too_old(lstopo: str) -> str | None:
    """The version of hwloc behind ``lstopo`` when it is older than :data:`HWLOC_MINIMUM`, else None."""
    version = version_of(lstopo)
    return _shown(version) if version is not None and version[:2] < HWLOC_MINIMUM else None


def _shown(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def findings() -> list[Finding]:
    """One line per part for ``pinlab check``: found (where, which version) or what to install."""
    found = []
    for part in PARTS:
        path = find(part)
        if path is None:
            status = WARNING if part.required else INFO
            found.append(
                Finding(
                    part.name,
                    status,
                    "not found",
                    f"needed for {part.needed_for}" + (f"; without it {part.without}" if part.without else ""),
                    part.install_line(),
                )
            )
            continue
        old = too_old(path) if part is HWLOC else None
        if old is not None:
            found.append(Finding(part.name, WARNING, f"{path} (hwloc {old})", f"too old for {part.needed_for}", part.install_line()))
            continue
        version = version_of(path) if part is HWLOC else None
        shown = f" ({_shown(version)})" if version else ""
        found.append(Finding(part.name, OK, f"{os.path.realpath(path)}{shown}", f"used for {part.needed_for}"))
    return found
