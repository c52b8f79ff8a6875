"""Where a process's memory lives: resident bytes per NUMA node, per mapping and in total.

The kernel says it in ``/proc/PID/numa_maps``: one line per mapping (the start address, the
memory policy, what the mapping is: ``heap``, ``stack``, ``file=PATH``, ``huge``...), then
``N<node>=<pages>`` for each node holding some of its pages, in units of the mapping's
``kernelpagesize_kB``. ``/proc/PID/maps`` gives each mapping's end, hence its virtual size.
numastat -p sums the same lines into Huge, Heap, Stack and Private (everything else); pinlab
keeps every mapping, tells anonymous memory from files, and counts bytes rather than pages,
so huge pages weigh what they hold.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError

#: Kinds of mapping, in the order tables list them.
KINDS = ("heap", "stack", "anon", "huge", "shm", "file")

_FIELD = re.compile(r"(\w+)=(\S+)")
_NODE = re.compile(r"N(\d+)")


@dataclass
class Mapping:
    """One mapping of the process: where it starts and ends, what it is, its policy, resident bytes per node."""

    start: int
    end: int | None
    kind: str
    path: str | None
    policy: str
    bytes_per_node: dict[int, int] = field(default_factory=dict)
    page_size: int = 4096

    @property
    def size(self) -> int | None:
        """Virtual size in bytes (None when /proc/PID/maps no longer had the mapping)."""
        return None if self.end is None else self.end - self.start

    @property
    def resident(self) -> int:
        return sum(self.bytes_per_node.values())

    @property
    def name(self) -> str:
        """What a user calls the mapping: the file, ``[heap]``, ``[stack]``, ``[anon]``..."""
        return self.path if self.path else f"[{self.kind}]"

    def to_json(self) -> dict:
        return {
            "start": f"{self.start:#x}",
            "end": None if self.end is None else f"{self.end:#x}",
            "size": self.size,
            "kind": self.kind,
            "path": self.path,
            "policy": self.policy,
            "page_size": self.page_size,
            "resident": self.resident,
            "bytes_per_node": {str(n): b for n, b in sorted(self.bytes_per_node.items())},
        }


@dataclass
class MemMap:
    """A process's mappings at one moment (``time`` from time.time())."""

    pid: int
    time: float
    mappings: list[Mapping]
    nodes: list[int]

    def per_node(self) -> dict[int, int]:
        """Resident bytes on each node, every node of the machine listed (0 where none)."""
        total = {node: 0 for node in self.nodes}
        for mapping in self.mappings:
            for node, size in mapping.bytes_per_node.items():
                total[node] = total.get(node, 0) + size
        return dict(sorted(total.items()))

    def per_kind(self) -> dict[str, dict[int, int]]:
        """Resident bytes per node for each kind of mapping (heap, stack, anon, huge, shm, file)."""
        out: dict[str, dict[int, int]] = {kind: {node: 0 for node in self.nodes} for kind in KINDS}
        for mapping in self.mappings:
            row = out[mapping.kind]
            for node, size in mapping.bytes_per_node.items():
                row[node] = row.get(node, 0) + size
        return out

    @property
    def resident(self) -> int:
        return sum(m.resident for m in self.mappings)

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "time": self.time,
            "nodes": self.nodes,
            "resident": self.resident,
            "bytes_per_node": {str(n): b for n, b in self.per_node().items()},
            "bytes_per_kind": {kind: {str(n): b for n, b in row.items()} for kind, row in self.per_kind().items()},
            "mappings": [m.to_json() for m in self.mappings],
        }


def machine_nodes() -> list[int]:
    """The NUMA nodes with memory, from /sys (``[0]`` on a kernel without NUMA)."""
    try:
        text = open("/sys/devices/system/node/has_memory", encoding="ascii").read().strip()
    except OSError:
        try:
            text = open("/sys/devices/system/node/online", encoding="ascii").read().strip()
        except OSError:
            return [0]

    return sorted(parse_cpulist(text, "node list")) if text else [0]


def parse_numa_maps(text: str, ends: dict[int, int] | None = None) -> list[Mapping]:
    """The mappings of a ``/proc/PID/numa_maps`` text; ``ends`` maps start addresses to ends (from maps)."""
    ends = ends or {}
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            start = int(parts[0], 16)
        except ValueError:
            continue
        policy, rest = parts[1], parts[2:]
        if policy == "weighted" and rest:  # the kernel's name has a space: "weighted interleave:0-1"
            policy, rest = f"weighted {rest[0]}", rest[1:]
        fields = dict(_FIELD.findall(" ".join(rest)))
        page_size = int(fields.get("kernelpagesize_kB", "4")) * 1024
        path = None
        if "file" in fields:
            # A file name may hold spaces: it runs from 'file=' to the next known field.
            raw = line.split(" file=", 1)[1]
            path = re.split(r" (?:huge|anon|dirty|mapped|mapmax|swapcache|active|writeback|N\d+|kernelpagesize_kB)(?:=| |$)", raw, maxsplit=1)[0]
        if "huge" in rest:
            kind = "huge"
        elif "heap" in rest:
            kind = "heap"
        elif "stack" in rest:
            kind = "stack"
        elif path is not None and path.startswith(("/dev/shm/", "/memfd:", "/SYSV", "/dev/zero")):  # /dev/zero: MAP_SHARED|MAP_ANONYMOUS
            kind = "shm"
        elif path is not None:
            kind = "file"
        else:
            kind = "anon"
        per_node = {}
        for key, value in fields.items():
            node = _NODE.fullmatch(key)
            if node:
                per_node[int(node.group(1))] = int(value) * page_size
        out.append(Mapping(start=start, end=ends.get(start), kind=kind, path=path, policy=policy, bytes_per_node=per_node, page_size=page_size))
    return out


def _ends(pid: int) -> dict[int, int]:
    ends = {}
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            span = line.split(" ", 1)[0]
            low, _, high = span.partition("-")
            ends[int(low, 16)] = int(high, 16)
    return ends


def memmap(pid: int) -> MemMap:
    """Process ``pid``'s memory per mapping and NUMA node now.

    Raises UsageError when the process does not exist, is not ours to read, or the kernel shows
    no NUMA maps (a kernel built without NUMA).
    """
    if pid <= 0:
        raise UsageError(f"PID {pid}: give the process id of a running program (pinlab ps lists them)")
    try:
        _check_process(pid)
        ends = _ends(pid)
        with open(f"/proc/{pid}/numa_maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            raise UsageError(f"no process {pid}: it has ended or never existed") from None
        raise UsageError("this kernel shows no /proc/PID/numa_maps (built without NUMA support): memory per node cannot be read") from None
    except PermissionError:
        raise UsageError(f"process {pid} is not yours: run pinlab as its user or as root to read its memory map") from None
    except ProcessLookupError:
        raise UsageError(f"no process {pid}: it has ended") from None
    if not text and _zombie(pid):
        raise UsageError(f"no process {pid}: it has ended")
    if not text and _kernel_thread(pid):
        raise UsageError(f"process {pid} is a kernel thread: it has no memory map of its own; give the PID of a program (pinlab ps lists them)")
    return MemMap(pid=pid, time=time.time(), mappings=parse_numa_maps(text, ends), nodes=machine_nodes())


def _check_process(pid: int) -> None:
    """Refuse a thread id that is not its process's: /proc shows any thread under its id, with the
    whole process's maps, so a TID would silently stand for its process."""
    with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
        for line in status:
            if line.startswith("Tgid:"):
                tgid = int(line.split()[1])
                if tgid != pid:
                    raise UsageError(
                        f"{pid} is a thread of process {tgid}, and threads share their process's memory: give the process, pinlab memmap {tgid}"
                    )
                return


#: PF_KTHREAD in the flags of /proc/PID/stat (include/linux/sched.h).
_PF_KTHREAD = 0x00200000


def _kernel_thread(pid: int) -> bool:
    """Whether ``pid`` is a kernel thread (no user memory at all, so empty maps)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return bool(int(stat.read().rpartition(")")[2].split()[6]) & _PF_KTHREAD)
    except (OSError, IndexError, ValueError):
        return False


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has ended and waits for its parent to reap it (its maps are then empty)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


#: The longest pause between two looks of a watch (``pinlab memmap --watch``, ``pinlab ps --watch``).
MAX_WATCH_INTERVAL_S = 86400.0


def check_interval(seconds: float) -> None:
    """Refuse a watch interval that is not a positive number of seconds up to a day (NaN too):
    one check for every command that looks again and again, so they refuse in the same words."""
    if not 0 < seconds <= MAX_WATCH_INTERVAL_S:
        raise UsageError(f"--watch must be a positive number of seconds, at most a day (got {seconds})")


def watch(pid: int, every: float, count: int | None = None, sleep: Callable[[float], None] = time.sleep) -> Iterator[MemMap]:
    """A MemMap every ``every`` seconds until the process ends (or ``count`` looks).

    The interval is checked when this is called, not at the first look: a generator would
    refuse only once iterated, after the caller had started printing.
    """
    check_interval(every)
    return _looks(pid, every, count, sleep)


def _looks(pid: int, every: float, count: int | None, sleep: Callable[[float], None]) -> Iterator[MemMap]:
    taken = 0
    while count is None or taken < count:
        try:
            yield memmap(pid)
        except UsageError:
            if taken and _zombie(pid):
                return  # the program ended between two looks: the watch is over
            raise
        taken += 1
        if count is None or taken < count:
            sleep(every)
