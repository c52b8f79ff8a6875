"""The files pinlab shares with a program (/dev/shm), and the removal of those a killed pinlab left.

The event ring, autopin's live plan and heartbeat, and the attachment table are files the program
opens by name, in every process it starts and after every exec, so they cannot be unlinked while
it runs. pinlab removes them when it ends; a pinlab killed with SIGKILL cannot. Each such file is
named ``pinlab-KIND-PID-...`` after the pinlab that made it, which holds an flock on it as long as
it lives (the kernel drops the lock with the process). Whenever pinlab creates one, it first
removes the files of that kind whose maker has died: the PID in the name is gone and nobody holds
the lock (the lock also protects a live pinlab in another PID namespace sharing /dev/shm, whose
PID this one cannot see).
"""

from __future__ import annotations

import fcntl
import os
import re
import time

from pinlab.measure.linux import process_alive

#: The kinds of shared file, as they appear in the names.
KINDS = ("events", "plan", "heartbeat", "attach")
_NAME = re.compile(r"pinlab-(?:%s)-([0-9]+)-[0-9]+-[0-9]+\.bin" % "|".join(KINDS))

#: Open descriptors holding the lock of each file this process made, by path.
_held: dict[str, int] = {}


def create(directory: str, kind: str) -> tuple[str, int]:
    """A new empty file ``pinlab-KIND-PID-NS-N.bin`` in ``directory``, held by this process until
    :func:`release`; returns its path and a descriptor open for reading and writing (the
    caller's to use, not to close). Stale files of dead pinlabs are removed first."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of shared file {kind!r}")
    sweep(directory)
    for attempt in range(100):
        path = os.path.join(directory, f"pinlab-{kind}-{os.getpid()}-{time.monotonic_ns()}-{attempt}.bin")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        hold(path, fd)
        return path, fd
    raise FileExistsError(f"cannot find a free name for a shared file in {directory}")


def hold(path: str, fd: int) -> None:
    """Lock ``path`` (open as ``fd``) for this process's life, until :func:`release`. A file
    system without locks (some network ones, in PINLAB_EVENTS_DIR) leaves the PID in the name as
    the only sign of life: the run goes on."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass
    _held[path] = fd


def release(path: str | None) -> None:
    """Remove a file this process made (one already gone is fine) and drop its lock."""
    if not path:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def sweep(directory: str) -> list[str]:
    """Remove the shared files in ``directory`` left by pinlabs that have died; returns their paths.

    A file is stale when the PID in its name is not a live process and no process holds its lock.
    Files of other users, and anything not named as pinlab names them, are left alone.
    """
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _NAME.fullmatch(name)
        if match is None or int(match.group(1)) == os.getpid() or process_alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # gone already, or not ours to open
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its maker lives (in another PID namespace)
            opened, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
            if (opened.st_dev, opened.st_ino) == (there.st_dev, there.st_ino) and opened.st_uid == os.getuid():
                os.unlink(path)
                removed.append(path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


#: LLVM's OpenMP runtime (libomp, and Intel's libiomp5) registers each process that loads it as a
#: file in /dev/shm named after the process and its user, and removes it when the process exits
#: normally. A process killed by a signal, or one that calls ``_exit``, leaves it behind.
OPENMP_REGISTRATION = "__KMP_REGISTERED_LIB_{pid}_{uid}"


def remove_openmp_registrations(pids, directory: str = "/dev/shm") -> list[str]:
    """Remove the registration files libomp left in ``directory`` for processes of a program
    that have ended; returns their paths.

    pinlab calls this for the processes of a program it ran, once the program has ended, so that
    a program killed (by a timeout, by the user, or by itself) leaves nothing in /dev/shm. Only
    files of processes that no longer live and of this user are removed: a child the program left
    running keeps its file.
    """
    removed: list[str] = []
    uid = os.getuid()
    for pid in sorted(set(pids)):
        if pid <= 0 or process_alive(pid):
            continue
        path = os.path.join(directory, OPENMP_REGISTRATION.format(pid=pid, uid=uid))
        try:
            if os.stat(path, follow_symlinks=False).st_uid == uid:
                os.unlink(path)
                removed.append(path)
        except OSError:
            continue  # none left, or not ours
    return removed


def shared_directory() -> str:
    """Where files shared with the program go (the event ring, autopin's live plan and heartbeat): ``PINLAB_EVENTS_DIR`` if set, else /dev/shm, else TMPDIR.

    The ring is memory shared by the program and pinlab: in /dev/shm (tmpfs) writing and deleting
    it costs nothing, where on a disk file system the blocks the program's first events allocate
    and the unlink that frees them cost milliseconds a run.
    """
    chosen = os.environ.get("PINLAB_EVENTS_DIR")
    if chosen:
        return os.path.abspath(chosen)
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return os.path.abspath(os.environ.get("TMPDIR") or "/tmp")  # absolute: the program may change directory
