"""What on this machine adds noise or bias to measurements (``pinlab check``).

The seeds' methodology asks for a quiet, fixed machine: no frequency scaling, no address
randomisation, no automatic page migration, nothing else running. Each check reads /proc or
/sys (under ``root``, so tests can give a fake tree) and says what it found, what it means and
how to change it. Nothing here changes the machine.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pinlab.cpuset import format_cpulist, parse_cpulist

OK, INFO, WARNING = "ok", "info", "warning"


@dataclass(frozen=True)
class Finding:
    name: str
    status: str  # ok, info or warning
    found: str
    meaning: str
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _read(root: Path, path: str) -> str | None:
    try:
        return (root / path.lstrip("/")).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def governor(root: Path) -> Finding:
    governors = {}
    for path in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        cpu = int(path.parent.parent.name[3:])
        governors.setdefault(path.read_text().strip(), []).append(cpu)
    if not governors:
        return Finding(
            "frequency governor",
            INFO,
            "no cpufreq interface (fixed frequency, or a virtual machine)",
            "the frequency cannot be read here; on a VM the host decides it",
        )
    found = "; ".join(f"{g} on CPUs {format_cpulist(c)}" for g, c in governors.items())
    if set(governors) == {"performance"}:
        return Finding("frequency governor", OK, found, "CPUs stay at their highest frequency")
    return Finding(
        "frequency governor",
        WARNING,
        found,
        "the frequency follows the load, so run times vary with it",
        "as root: cpupower frequency-set -g performance (or write performance to .../cpufreq/scaling_governor)",
    )


def turbo(root: Path) -> Finding:
    no_turbo = _read(root, "/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read(root, "/sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is None and boost is None:
        return Finding("turbo boost", INFO, "not reported", "whether the CPUs boost above their base frequency is unknown here")
    on = (no_turbo == "0") if no_turbo is not None else (boost == "1")
    if not on:
        return Finding("turbo boost", OK, "off", "the frequency does not depend on how many cores are busy")
    fix = (
        "as root: echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"
        if no_turbo is not None
        else "as root: echo 0 > /sys/devices/system/cpu/cpufreq/boost"
    )
    return Finding("turbo boost", WARNING, "on", "the frequency depends on how many cores are busy and on temperature", fix)


def smt(root: Path) -> Finding:
    active = _read(root, "/sys/devices/system/cpu/smt/active")
    if active is None:
        return Finding("SMT (hyper-threading)", INFO, "not reported", "whether cores run several hardware threads is unknown here")
    if active == "1":
        return Finding(
            "SMT (hyper-threading)",
            INFO,
            "on",
            "hardware threads of a core share its units: pinlab places one thread per core unless --smt",
            "to turn it off, as root: echo off > /sys/devices/system/cpu/smt/control",
        )
    return Finding("SMT (hyper-threading)", OK, "off", "one hardware thread per core")


def aslr(root: Path) -> Finding:
    value = _read(root, "/proc/sys/kernel/randomize_va_space")
    if value in (None, "0"):
        return Finding(
            "address randomisation (ASLR)", OK, "off" if value == "0" else "not reported", "stack and heap start at the same addresses every run"
        )
    return Finding(
        "address randomisation (ASLR)",
        WARNING,
        f"on (randomize_va_space = {value})",
        "stack and heap addresses change every run, which changes cache and TLB conflicts",
        "pinlab run --no-aslr turns it off for the program (studies do by default); system-wide: sysctl kernel.randomize_va_space=0",
    )


def numa_balancing(root: Path) -> Finding:
    value = _read(root, "/proc/sys/kernel/numa_balancing")
    if value in (None, "0"):
        return Finding(
            "automatic NUMA balancing",
            OK,
            "off" if value == "0" else "not available",
            "the kernel does not move pages and threads between nodes by itself",
        )
    return Finding(
        "automatic NUMA balancing",
        WARNING,
        "on",
        "the kernel moves pages (and threads) between NUMA nodes while the program runs",
        "as root: sysctl kernel.numa_balancing=0",
    )


def isolated(root: Path) -> Finding:
    value = _read(root, "/sys/devices/system/cpu/isolated")
    if not value:
        return Finding(
            "isolated CPUs",
            INFO,
            "none",
            "every CPU also runs the rest of the system's work",
            "for quieter CPUs, boot with isolcpus=LIST (or use a cpuset for the measurements)",
        )
    return Finding("isolated CPUs", OK, f"CPUs {value}", "these CPUs run only what is pinned to them: place measured threads there")


def paranoid(root: Path) -> Finding:
    value = _read(root, "/proc/sys/kernel/perf_event_paranoid")
    pmu = (root / "sys/bus/event_source/devices/cpu").exists() or (root / "sys/bus/event_source/devices/cpu_core").exists()
    hardware = (
        "hardware counters present" if pmu else "no hardware counters (only software events: task-clock, context switches, migrations, page faults)"
    )
    if value is None:
        return Finding("performance counters", INFO, f"perf_event_paranoid not readable; {hardware}", "counters may not be available")
    level = int(value)
    if os.geteuid() == 0:
        readable = "all events (running as root)"
    elif level <= 1:
        readable = "user and kernel events of your processes"
    elif level == 2:
        readable = "user-space events of your processes only"
    else:
        readable = "no events for unprivileged users"
    status = OK if pmu and (level <= 2 or os.geteuid() == 0) else INFO
    return Finding(
        "performance counters",
        status,
        f"perf_event_paranoid = {level}: {readable}; {hardware}",
        "what --counters can measure",
        "as root: sysctl kernel.perf_event_paranoid=1" if level > 1 and os.geteuid() != 0 else "",
    )


def swap(root: Path) -> Finding:
    text = _read(root, "/proc/swaps") or ""
    devices = [line.split()[0] for line in text.splitlines()[1:] if line.strip()]
    if not devices:
        return Finding("swap", OK, "none", "no page of a measured program can be swapped out")
    return Finding(
        "swap",
        WARNING,
        ", ".join(devices),
        "a program near the memory limit may be swapped, which dominates its run time",
        "as root: swapoff -a during measurements",
    )


def virtual_machine(root: Path) -> Finding:
    vendor = " ".join(filter(None, (_read(root, "/sys/class/dmi/id/sys_vendor"), _read(root, "/sys/class/dmi/id/product_name"))))
    cpuinfo = _read(root, "/proc/cpuinfo") or ""
    hypervisor = any(line.startswith("flags") and " hypervisor" in line for line in cpuinfo.splitlines())
    known = ("QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Microsoft", "Amazon EC2", "Google", "Firecracker")
    if hypervisor or any(k.lower() in vendor.lower() for k in known):
        return Finding(
            "virtual machine",
            WARNING,
            f"yes ({vendor or 'hypervisor flag in /proc/cpuinfo'})",
            "virtual CPUs share physical ones with other guests: timings vary, and the topology and NUMA layout may not be the host's",
            "measure on bare metal for figures to publish",
        )
    return Finding("virtual machine", OK, "no", "the CPUs are the machine's own")


def restricted(root: Path) -> Finding:
    online_text = _read(root, "/sys/devices/system/cpu/online")
    if online_text is None:
        return Finding("allowed CPUs", INFO, "not reported", "")
    online = set(parse_cpulist(online_text))
    allowed = set(os.sched_getaffinity(0)) if root == Path("/") else online
    if allowed >= online:
        return Finding("allowed CPUs", OK, f"all {len(online)} online CPUs", "pinlab may place threads anywhere")
    return Finding(
        "allowed CPUs",
        INFO,
        f"{format_cpulist(allowed)} of {format_cpulist(online)}",
        "this process runs in a restricted cpuset or affinity mask (a batch system, taskset): placements use only these CPUs",
    )


def busy(root: Path, threshold: float = 0.1) -> Finding:
    """Other processes using CPU now (sampled over half a second)."""
    if root != Path("/"):
        return Finding("other busy processes", INFO, "not checked", "")
    import psutil

    me = {os.getpid(), os.getppid()}
    procs = [p for p in psutil.process_iter(["pid", "name"]) if p.info["pid"] not in me]
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass

    time.sleep(0.5)
    hot = []
    for p in procs:
        try:
            share = p.cpu_percent(None) / 100
        except psutil.Error:
            continue
        if share >= threshold:
            hot.append((share, f"{p.info['name']} (pid {p.info['pid']}, {share:.0%})"))
    hot = [text for _, text in sorted(hot, key=lambda h: -h[0])]  # the busiest first: the list is cut at 8
    if not hot:
        return Finding("other busy processes", OK, "none using 10% of a CPU or more", "nothing competes with the measured program")
    return Finding(
        "other busy processes",
        WARNING,
        ", ".join(hot[:8]) + (f" and {len(hot) - 8} more" if len(hot) > 8 else ""),
        "they compete for CPUs, caches and memory bandwidth",
        "stop them, or keep them off the measured CPUs",
    )


def thp(root: Path) -> Finding:
    text = _read(root, "/sys/kernel/mm/transparent_hugepage/enabled") or ""
    mode = text[text.find("[") + 1 : text.find("]")] if "[" in text else None
    if mode is None:
        return Finding("transparent huge pages", INFO, "not reported", "")
    return Finding(
        "transparent huge pages",
        INFO,
        mode,
        "page size changes cache and TLB behaviour ([mazouz2011variability])",
        "pinlab run --thp never|always fixes it per program, so page size can be a study factor",
    )


CHECKS = (governor, turbo, smt, aslr, numa_balancing, isolated, paranoid, swap, virtual_machine, restricted, busy, thp)


def check(root: Path | str = "/") -> list[Finding]:
    """Every check, in a fixed order."""
    base = Path(root)
    return [c(base) for c in CHECKS]
