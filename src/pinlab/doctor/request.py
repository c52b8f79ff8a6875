"""What the doctor is asked: which processes (or which program to start), for how long.

Checked as a whole when made, before any process is looked at or any program started, so that
the command line and :func:`pinlab.doctor.doctor` refuse the same things in the same words.
"""

from __future__ import annotations

import math
import pwd
from collections.abc import Sequence
from dataclasses import dataclass

from pinlab.errors import UsageError
from pinlab.measure.threads import check_process

#: The window's bounds in seconds: two samples at least, an hour at most.
MIN_SECONDS = 0.2
MAX_SECONDS = 3600.0
DEFAULT_SECONDS = 3.0


def check_seconds(seconds: float) -> None:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or math.isnan(seconds) or not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise UsageError(f"--seconds must be between {MIN_SECONDS:g} and {MAX_SECONDS:g} (got {seconds})")


def check_readable(pid: int) -> None:
    """The doctor reads a process's environment and mappings: only its owner (or root) may."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            environ.read(1)
        with open(f"/proc/{pid}/maps", "rb") as maps:
            maps.read(1)
    except PermissionError:
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
                uid = next(int(line.split()[1]) for line in status if line.startswith("Uid:"))
            owner = pwd.getpwuid(uid).pw_name
        except (OSError, StopIteration, KeyError, ValueError):
            owner = "another user"
        raise UsageError(
            f"process {pid} belongs to user {owner}: pinlab doctor reads a process's environment and mappings, "
            "which only its owner (or root) may; run it as that user"
        ) from None
    except OSError:
        raise UsageError(f"no process {pid}: it has ended") from None


@dataclass(frozen=True)
class DoctorRequest:
    """Processes to look at (``pids``) or a program to start and look at (``argv``, with an
    optional placement: ``strategy`` or ``cpus``, and ``threads``), for ``seconds``."""

    pids: tuple[int, ...] = ()
    seconds: float = DEFAULT_SECONDS
    argv: tuple[str, ...] = ()
    strategy: str | None = None
    cpus: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        check_seconds(self.seconds)
        if self.pids and self.argv:
            raise UsageError("give PIDs to look at, or -- PROGRAM to start, not both")
        if not self.pids and not self.argv:
            raise UsageError("nothing to look at: pinlab doctor PID... or pinlab doctor [OPTIONS] -- PROGRAM [ARGS...]")
        if self.pids and (self.strategy is not None or self.cpus is not None or self.threads is not None):
            raise UsageError("-s, -c and -n place a program the doctor starts (-- PROGRAM): a running process keeps its placement")
        for pid in self.pids:
            check_process(pid, repin=False)
            check_readable(pid)


def request(pids: int | Sequence[int] | None = None, seconds: float = DEFAULT_SECONDS, **options) -> DoctorRequest:
    """A :class:`DoctorRequest` from one PID or several."""
    if pids is None:
        chosen: tuple[int, ...] = ()
    elif isinstance(pids, int):
        chosen = (pids,)
    else:
        chosen = tuple(pids)
    argv = options.pop("argv", ())
    return DoctorRequest(chosen, seconds, tuple(argv or ()), **options)
