"""Which library started each thread of a process pinlab did not start, read from its stacks.

Linux keeps no start routine per thread, and a process started without ``pinlab run`` has no
event ring to say it (:mod:`pinlab.measure.roles`). But a thread's start is written in its own
memory, at the top of its stack, for as long as it lives: the C library keeps the thread's
descriptor there (its tid, and on glibc and musl the start routine itself), and below it lie the
first frames of the thread, whose return addresses point into the code that started it.

So, for each thread:

1. its stack is found: the anonymous mapping, just above a guard page, whose top holds the
   thread's tid (the descriptor's tid field); failing that, the mapping that holds the stack
   pointer the kernel shows for a blocked thread (``/proc/PID/task/TID/syscall``);
2. the words of that stack are read from the top down, and the first that points into the code
   of a mapped file is the start library, the C library's own (``clone``, ``start_thread``) and
   the thread-starting trampolines of C++ runtimes and of pinlab's preload library passed over.

This is what a debugger's backtrace would end with, without stopping the process: the memory is
read through ``/proc/PID/mem``, which the kernel allows where it would allow a debugger to attach
(the process is ours and ``kernel.yama.ptrace_scope`` permits, or we are root). Where it does not,
nothing is known and :func:`start_libraries` says so (:class:`StacksUnreadable`).
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: Bytes read from the top of each candidate mapping to find a thread's tid: the descriptor sits
#: in the top few KiB of a thread's stack block (glibc: its last ~2.3 KiB, aligned).
DESCRIPTOR_BYTES = 8192

#: Bytes read from the top of a thread's stack to find its start: the descriptor, the static TLS
#: blocks below it and the first frames fit in far less on every program seen.
STACK_TOP_BYTES = 65536

#: Files whose code only passes a thread on to its real start routine, and are passed over.
TRAMPOLINES = re.compile(r"^(libc|libc\.musl.*|ld-linux.*|ld-musl.*|libpthread|libdl|libstdc\+\+|libc\+\+|libpinlab-preload)[.-]")

_WORD = struct.Struct("P")


class StacksUnreadable(Exception):
    """The process's memory may not be read by us (not ours, or ptrace_scope forbids it)."""


@dataclass(frozen=True)
class _Mapping:
    low: int
    high: int
    perms: str
    path: str


def _mappings(pid: int) -> list[_Mapping]:
    found = []
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 5:
                continue
            low, _, high = fields[0].partition("-")
            path = fields[5].strip() if len(fields) == 6 else ""
            found.append(_Mapping(int(low, 16), int(high, 16), fields[1], path.removesuffix(" (deleted)")))
    return found


def _stack_candidates(mappings: list[_Mapping]) -> list[_Mapping]:
    """Anonymous read-write mappings just above an inaccessible one: the stacks the C library
    mapped for threads, each with its guard page below it."""
    return [
        m
        for below, m in zip(mappings, mappings[1:])
        if m.path == "" and m.perms.startswith("rw") and below.perms.startswith("---") and below.high == m.low
    ]


def _stack_pointer(pid: int, tid: int) -> int | None:
    """The stack pointer of a blocked thread (None while it runs: the kernel shows none then)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii") as f:
            fields = f.read().split()
    except OSError:
        return None
    if len(fields) < 3 or fields[0] == "running":
        return None
    return int(fields[-2], 16)


class _Memory:
    def __init__(self, pid: int) -> None:
        try:
            self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        except PermissionError as error:
            raise StacksUnreadable(f"the memory of process {pid} is not ours to read") from error

    def read(self, address: int, size: int) -> bytes:
        try:
            return os.pread(self.fd, size, address)
        except OSError:
            return b""

    def close(self) -> None:
        os.close(self.fd)


def _ints(data: bytes) -> set[int]:
    """The 32-bit integers of ``data`` (a thread's tid is one, aligned, in its descriptor)."""
    count = len(data) // 4
    return set(struct.unpack(f"={count}i", data[: count * 4]))


class _Code:
    """The mapped files' code, for telling which file an address points into."""

    def __init__(self, mappings: list[_Mapping]) -> None:
        self.mappings = sorted((m for m in mappings if "x" in m.perms and m.path.startswith("/")), key=lambda m: m.low)
        self.lows = [m.low for m in self.mappings]

    def file_of(self, address: int) -> str | None:
        i = bisect.bisect_right(self.lows, address) - 1
        return self.mappings[i].path if i >= 0 and address < self.mappings[i].high else None

    def first_file(self, stack: bytes, downward: bool = True) -> str | None:
        """The file of the first word of ``stack`` that points into code (from its top, or from
        its bottom when not ``downward``), the C library's and the trampolines' code passed over."""
        words = len(stack) // _WORD.size
        for i in range(words - 1, -1, -1) if downward else range(words):
            (value,) = _WORD.unpack_from(stack, i * _WORD.size)
            path = self.file_of(value)
            if path is not None and not TRAMPOLINES.match(os.path.basename(path)):
                return path
        return None


@contextmanager
def _opened(pid: int) -> Iterator[tuple[list[_Mapping], _Code, _Memory] | None]:
    """The process's mappings, its code and its memory; None when it has ended."""
    try:
        mappings = _mappings(pid)
    except PermissionError as error:
        raise StacksUnreadable(f"the memory map of process {pid} is not ours to read") from error
    except OSError:  # it ended
        yield None
        return
    memory = _Memory(pid)
    try:
        yield mappings, _Code(mappings), memory
    finally:
        memory.close()


def start_libraries(pid: int, tids: list[int]) -> dict[int, str | None]:
    """tid -> the file whose code started that thread of process ``pid`` (a library, or the
    program itself), None where it could not be told (no stack found, or none of its words
    points into a file's code). Threads that ended meanwhile are left out.

    Raises :class:`StacksUnreadable` when the process's memory may not be read at all.
    """
    with _opened(pid) as process:
        if process is None:
            return {}
        mappings, code, memory = process
        owners: dict[int, list[_Mapping]] = {}
        for m in _stack_candidates(mappings):
            size = min(m.high - m.low, DESCRIPTOR_BYTES)
            values = _ints(memory.read(m.high - size, size))
            for tid in tids:
                if tid in values:
                    owners.setdefault(tid, []).append(m)
        found: dict[int, str | None] = {}
        for tid in tids:
            stack = owners[tid][0] if len(owners.get(tid, [])) == 1 else None
            if stack is None:
                sp = _stack_pointer(pid, tid)
                stack = next((m for m in mappings if sp is not None and m.low <= sp < m.high and m.path in ("", "[stack]")), None)
            if stack is None or stack.path == "[stack]":  # not found, or the main thread's
                if os.path.exists(f"/proc/{pid}/task/{tid}"):
                    found[tid] = None
                continue
            size = min(stack.high - stack.low, STACK_TOP_BYTES)
            found[tid] = code.first_file(memory.read(stack.high - size, size))
        return found


#: Bytes read above a blocked thread's stack pointer to find the code it waits in: the C
#: library's frames (the system call, a lock) take a few hundred.
WAIT_BYTES = 4096


def waiting_in(pid: int, tids: list[int]) -> dict[int, str]:
    """tid -> the file whose code each blocked thread of ``pid`` waits in (the innermost code on its
    stack outside the C library: a BLAS library's lock, an OpenMP barrier, the interpreter).
    Threads that run, ended, or whose stack says nothing are left out.

    Raises :class:`StacksUnreadable` when the process's memory may not be read at all.
    """
    with _opened(pid) as process:
        if process is None:
            return {}
        mappings, code, memory = process
        found = {}
        for tid in tids:
            sp = _stack_pointer(pid, tid)
            stack = next((m for m in mappings if sp is not None and m.low <= sp < m.high), None)
            if sp is None or stack is None:
                continue
            path = code.first_file(memory.read(sp, min(WAIT_BYTES, stack.high - sp)), downward=False)
            if path is not None:
                found[tid] = path
        return found
