"""One autopin per program: a claim on a process that ends with the autopin holding it.

Two autopins re-pinning the same threads fight: each moves them to its own candidate in the
middle of the other's windows, and both judge from measurements the other spoiled. So an
autopin claims the program before it touches any thread, and a second one is refused.

The claim is a Unix socket bound to an abstract name made of the program's PID and start time
(so a later process that gets the same PID is a different program). Binding fails while another
autopin holds the name; the kernel releases it when that autopin exits, however it ends
(``kill -9`` too), and nothing is ever written to a file system. The socket listens, so that a
refused autopin can ask the kernel who holds the claim (SO_PEERCRED) and name it.
"""

from __future__ import annotations

import errno
import socket
import struct

from pinlab.errors import UsageError


class Claim:
    """A held claim on one process; :meth:`release` (or the holder's exit) lets another autopin in."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self._sock = pid, sock

    def release(self) -> None:
        self._sock.close()

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim_name(pid: int) -> str:
    """The abstract socket name (without its leading NUL) of a claim on process ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            started = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22: start time in clock ticks
    except (OSError, IndexError, ValueError):
        started = 0  # gone: nothing to fight over, the name only has to be consistent
    return f"pinlab-autopin-{pid}-{started}"


def claim(pid: int) -> Claim:
    """Claim process ``pid`` for this autopin, or refuse (UsageError) when another one holds it."""
    name = b"\0" + claim_name(pid).encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by the programs pinlab starts
    try:
        sock.bind(name)
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        holder = _holder(name)
        who = f" (pid {holder})" if holder else ""
        raise UsageError(
            f"process {pid} is already being probed by another pinlab autopin{who}: two would fight over its threads' "
            f"CPUs and spoil each other's measurements; stop that one first"
        ) from None
    sock.listen(1)
    return Claim(pid, sock)


def _holder(name: bytes) -> int | None:
    """The PID of the autopin holding the claim ``name`` (None when it cannot be told)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(name)
        pid, _, _ = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        return pid or None
    except OSError:
        return None
    finally:
        probe.close()


__all__ = ["Claim", "claim", "claim_name"]
