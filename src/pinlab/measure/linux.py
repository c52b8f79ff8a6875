"""Small readers of /proc and /sys, kept free of heavy imports (they are on the launch path)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Mapping

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError

NODE_DIR = Path("/sys/devices/system/node")
_NUMA_PAGES = re.compile(r"\bN(\d+)=(\d+)")


def present_cpus() -> frozenset[int]:
    """CPUs the kernel knows (``/sys/devices/system/cpu/present``)."""
    try:
        return frozenset(parse_cpulist(Path("/sys/devices/system/cpu/present").read_text()))
    except OSError:
        return frozenset(range(os.cpu_count() or 1))


def numa_nodes() -> dict[int, frozenset[int]]:
    """NUMA node number -> its CPUs, from sysfs; a machine without NUMA support is one node 0."""
    nodes: dict[int, frozenset[int]] = {}
    for path in sorted(NODE_DIR.glob("node[0-9]*")):
        text = (path / "cpulist").read_text().strip()
        nodes[int(path.name[4:])] = frozenset(parse_cpulist(text)) if text else frozenset()
    return nodes or {0: present_cpus()}


def node_of_cpus(nodes: Mapping[int, Iterable[int]] | None = None) -> dict[int, int]:
    """CPU -> its NUMA node, from ``nodes`` (node -> CPUs; this machine's :func:`numa_nodes` by default).

    The inverse map every mover of pages needs: a thread is re-pinned to a CPU, its memory goes to
    that CPU's node. A CPU missing from the map belongs to no node the caller knows of; callers say
    what that means for them (``.get(cpu)``).
    """
    return {cpu: node for node, cpus in (numa_nodes() if nodes is None else nodes).items() for cpu in cpus}


def environ_path(pid: int, name: str) -> str | None:
    """The path in variable ``name`` of process ``pid``'s environment (as it was started), made
    absolute against the process's working directory; None when unset, empty or unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in entries:
        if entry.startswith(prefix):
            value = os.fsdecode(entry[len(prefix) :])
            if not value:
                return None
            if not os.path.isabs(value):
                try:
                    value = os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)
                except OSError:
                    return None
            return value
    return None


def mems_allowed(pid: int | str = "self") -> frozenset[int]:
    """NUMA nodes a process may allocate on (``Mems_allowed_list``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Mems_allowed_list:"):
            return frozenset(parse_cpulist(line.split(":", 1)[1]))
    return frozenset(numa_nodes())


def task_cpus(pid: int) -> dict[int, int]:
    """tid -> the CPU each thread of a process last ran on (field 39 of /proc/PID/task/TID/stat)."""
    found: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue  # the thread ended between listdir and open
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = data[data.rfind(b")") + 2 :].split()
        found[int(tid)] = int(fields[36])
    return found


def thread_mask(tid: int) -> frozenset[int] | None:
    """The CPUs a thread may run on now, None once it has ended.

    The same mask as ``Cpus_allowed_list`` in /proc/PID/task/TID/status, but one system call
    (sched_getaffinity takes a thread id) instead of the kernel writing out the whole status
    file: the sampler asks this of every thread at every sample.
    """
    try:
        return frozenset(os.sched_getaffinity(tid))
    except OSError:
        return None


def task_migrations(pid: int, tid: int) -> int | None:
    """The scheduler's own count of a thread's migrations (``se.nr_migrations``), where the kernel shows it."""
    try:
        with open(f"/proc/{pid}/task/{tid}/sched", "rb") as sched:
            for line in sched:
                if line.startswith(b"se.nr_migrations"):
                    return int(line.split(b":")[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def numa_pages(numa_maps_text: str) -> dict[int, int]:
    """Pages per NUMA node summed over the mappings of a ``/proc/PID/numa_maps`` text."""
    pages: dict[int, int] = {}
    for node, count in _NUMA_PAGES.findall(numa_maps_text):
        pages[int(node)] = pages.get(int(node), 0) + int(count)
    return pages


def thp_mode() -> str | None:
    """The system's transparent huge page mode (always, madvise or never), if readable."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def cores_all_alike(sys_root: Path = Path("/sys")) -> bool:
    """Whether the kernel shows every CPU as a core of its own and of one kind: no hardware
    threads sharing a core, no Intel hybrid E-cores (``cpu_atom``), one ``cpu_capacity`` and one
    maximum frequency. hwloc would then find nothing more about the cores than this. False
    whenever a CPU's topology cannot be read (ask hwloc then)."""
    if (sys_root / "devices" / "cpu_atom").exists():
        return False
    capacities: set[str] = set()
    frequencies: set[str] = set()
    cpus = sorted((sys_root / "devices" / "system" / "cpu").glob("cpu[0-9]*"))
    if not cpus:
        return False
    for cpu in cpus:
        try:
            if len(parse_cpulist((cpu / "topology" / "thread_siblings_list").read_text())) > 1:
                return False
        except (OSError, UsageError):
            return False
        for name, seen in (("cpu_capacity", capacities), ("cpufreq/cpuinfo_max_freq", frequencies)):
            try:
                seen.add((cpu / name).read_text().strip())
            except OSError:
                pass
    return len(capacities) <= 1 and len(frequencies) <= 1


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, killed and not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def allowed_cpus() -> frozenset[int]:
    return frozenset(os.sched_getaffinity(0))


def check_cpus(cpus: list[int]) -> None:
    """Every CPU of an explicit list must exist and be allowed (no hwloc needed for this)."""
    present, allowed = present_cpus(), allowed_cpus()
    for cpu in cpus:
        if cpu not in present:
            raise UsageError(f"CPU {cpu} does not exist on this machine (CPUs: {format_cpulist(present)})")
        if cpu not in allowed:
            raise UsageError(f"CPU {cpu} is not allowed for this process (allowed: {format_cpulist(allowed)}); check taskset/cgroup limits")
