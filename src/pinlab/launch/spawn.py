"""Start the program with its CPU, memory policy, personality and THP setting from its first instruction.

Why not ``subprocess.Popen(preexec_fn=...)``: a ``preexec_fn`` forces a full ``fork`` of the
Python interpreter (page tables of everything imported, pandas included: about 8 ms a run),
where ``posix_spawn`` costs well under 1 ms. The settings a child inherits at creation are
those of the *calling thread* (CPU affinity, memory policy, personality) or of the process
(``PR_SET_THP_DISABLE``), so :func:`spawn` sets them on the calling thread, spawns, and puts the
caller's own settings back, whatever happens in between. Performance counters opened on the
calling thread with ``inherit`` and ``enable_on_exec`` (see :mod:`pinlab.measure.counters`)
follow the same path into the child.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterator, Sequence

from pinlab.launch import controls, memory

#: Signals Python ignores for itself, which a program must get back at their default.
_RESET_TO_DEFAULT = tuple(s for s in (getattr(signal, "SIGPIPE", None), getattr(signal, "SIGXFSZ", None)) if s is not None)
PR_GET_THP_DISABLE = 42

_libc = None


def _c():
    """libc through ctypes, loaded the first time a setting needs it (not on every launch)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> int:
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


@contextlib.contextmanager
def _affinity(mask: frozenset[int] | None) -> Iterator[None]:
    if mask is None:
        yield
        return
    old = os.sched_getaffinity(0)  # pid 0: the calling thread
    os.sched_setaffinity(0, mask)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


@contextlib.contextmanager
def _mempolicy(mode: int | None, nodes: tuple[int, ...]) -> Iterator[None]:
    if mode is None:
        yield
        return
    old_mode, old_nodes = memory.get_mempolicy()
    memory.set_mempolicy(mode, nodes)
    try:
        yield
    finally:
        memory.set_mempolicy(old_mode, old_nodes)


@contextlib.contextmanager
def _no_aslr(wanted: bool) -> Iterator[None]:
    if not wanted:
        yield
        return
    old = _check(_c().personality(0xFFFFFFFF), "personality")
    _check(_c().personality(old | controls.ADDR_NO_RANDOMIZE), "personality(ADDR_NO_RANDOMIZE)")
    try:
        yield
    finally:
        _c().personality(old)


@contextlib.contextmanager
def _no_thp(wanted: bool) -> Iterator[None]:
    if not wanted:
        yield
        return
    old = _check(_c().prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0), "prctl(PR_GET_THP_DISABLE)")
    _check(_c().prctl(controls.PR_SET_THP_DISABLE, 1, 0, 0, 0), "prctl(PR_SET_THP_DISABLE)")
    try:
        yield
    finally:
        _c().prctl(controls.PR_SET_THP_DISABLE, old, 0, 0, 0)


def _fd(stream) -> int | None:
    if stream is None or isinstance(stream, int):
        return stream
    return stream.fileno()


def spawn(
    program: str,
    argv: Sequence[str],
    env: dict[str, str],
    *,
    cpus: frozenset[int] | None = None,
    mem_mode: int | None = None,
    mem_nodes: tuple[int, ...] = (),
    no_aslr: bool = False,
    no_thp: bool = False,
    sigmask: set[int] | None = None,
    stdin=None,
    stdout=None,
    stderr=None,
    new_group: bool = False,
) -> int:
    """Start ``program`` (a path) with ``argv`` and ``env`` and return its pid.

    ``cpus``, the memory policy, ``no_aslr`` and ``no_thp`` hold in the child from its first
    instruction; ``sigmask`` is the child's signal mask (the caller may block signals it waits
    for); ``new_group`` puts it in a process group of its own. Raises FileNotFoundError, PermissionError or OSError (ENOEXEC) when exec fails.
    """
    streams = ((_fd(stdin), 0), (_fd(stdout), 1), (_fd(stderr), 2))
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in streams if fd is not None and fd != target]
    with _affinity(cpus), _mempolicy(mem_mode, mem_nodes), _no_aslr(no_aslr), _no_thp(no_thp):
        return os.posix_spawn(
            program,
            list(argv),
            env,
            file_actions=actions or None,
            setsigmask=sigmask if sigmask is not None else (),
            setsigdef=_RESET_TO_DEFAULT,
            **({"setpgroup": 0} if new_group else {}),
        )
