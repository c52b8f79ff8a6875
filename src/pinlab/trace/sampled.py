"""The ``sampled`` tracing method: data-address samples from memory-sampling hardware, for unmodified binaries.

Intel processors (PEBS: the ``mem-loads`` and ``mem-stores`` events of the ``cpu`` PMU, or
``cpu_core`` on hybrid parts) and AMD ones (IBS: the ``ibs_op`` PMU) can record, every N memory
operations, the data address a thread touched. ``perf record -d`` collects them for the program
(started by :class:`PerfController` as soon as pinlab's launcher reports the program's pid),
``perf script -F pid,tid,addr`` lists them, and each sample counts one access by its thread (by
creation index, from the run record) to its cache line (address // 64); :func:`graph_from_counts`
makes the affinity graph of those counts. The graph is a sample of the exact one: pairs that
share little may not show at all, and the period (``sample_period``, default 1000 operations)
trades overhead for detail.

Honesty: the machine this was written on is a virtual machine with no such hardware, so this
method has only been tested here on samples written by hand and on a stand-in for perf; it has not
been run on PEBS or IBS hardware. AMD IBS samples are taken system-wide (perf needs root or
perf_event_paranoid <= 0) and filtered by the program's pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

from pinlab.errors import UsageError
from pinlab.launch.runner import ControllerBase
from pinlab.trace.common import TraceRequest, TraceResult, graph_from_counts
from pinlab.trace.traced_run import check_request, preload_problem, run_traced, thread_indexes, which

PMU_ROOT = Path("/sys/bus/event_source/devices")
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
LINE = 64
DEFAULT_PERIOD = 1000


def memory_events(root: Path | None = None) -> tuple[list[str], bool]:
    """The perf events that sample data addresses here, and whether they are system-wide only (IBS)."""
    root = PMU_ROOT if root is None else root
    for pmu in ("cpu", "cpu_core"):
        events = root / pmu / "events"
        found = [name for name in ("mem-loads", "mem-stores") if (events / name).exists()]
        if found:
            return [f"{pmu}/{name}/Pu" if name == "mem-stores" else f"{pmu}/{name},ldlat=30/Pu" for name in found], False
    if (root / "ibs_op").exists():
        return ["ibs_op//"], True
    return [], False


def _paranoid() -> int | None:
    try:
        return int(PARANOID.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def unavailable(request: TraceRequest) -> str | None:
    """Why no data-address samples can be taken of this program here, naming what is missing."""
    if request.after is not None:
        return (
            "the sampled method cannot start counting late (--after): perf samples the whole run; use --method pages or --method exact for a window"
        )
    events, system_wide = memory_events()
    if not events:
        return (
            f"the sampled method needs memory-sampling hardware, and this machine has none: {PMU_ROOT} has no "
            f"cpu/events/mem-loads or mem-stores (Intel PEBS) and no ibs_op PMU (AMD IBS), as on most virtual "
            f"machines; use --method pages (unmodified programs) or --method exact (programs you can recompile)"
        )
    if which("perf", request) is None:
        return "the sampled method needs the perf tool (linux-perf / linux-tools), not found in PATH; install it or use --method pages"
    paranoid = _paranoid()
    root = os.geteuid() == 0
    if not root and paranoid is not None:
        if system_wide and paranoid > 0:
            return (
                f"AMD IBS samples are system-wide, which needs root or kernel.perf_event_paranoid <= 0 (it is {paranoid}); "
                f"run as root, lower it (sysctl kernel.perf_event_paranoid=0), or use --method pages"
            )
        if paranoid > 2:
            return (
                f"kernel.perf_event_paranoid is {paranoid}: perf may not sample other processes; lower it to 2 "
                f"(sysctl kernel.perf_event_paranoid=2) or use --method pages"
            )
    return preload_problem(request, "sampled")


def parse_samples(text: str) -> list[tuple[int | None, int, int]]:
    """(pid or None, tid, data address) of each line of ``perf script -F [pid,]tid,addr``; lines without an address are skipped."""
    samples = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        who, addr = words[0], words[-1]
        pid: int | None = None
        if "/" in who:
            head, _, who = who.partition("/")
            if not head.isdigit():
                continue
            pid = int(head)
        if not who.isdigit():
            continue
        try:
            address = int(addr, 16)
        except ValueError:
            continue
        if address:
            samples.append((pid, int(who), address))
    return samples


def attribute(samples, indexes: dict[int, int], pid: int | None = None, line_bytes: int = LINE) -> dict[int, dict[int, int]]:
    """counts[thread index][cache line] from samples; samples of other processes or unknown threads are left out."""
    counts: dict[int, dict[int, int]] = {}
    for sample_pid, tid, address in samples:
        if pid is not None and sample_pid is not None and sample_pid != pid:
            continue
        index = indexes.get(tid)
        if index is None:
            continue
        lines = counts.setdefault(index, {})
        lines[address // line_bytes] = lines.get(address // line_bytes, 0) + 1
    return counts


class PerfController(ControllerBase):
    """Starts ``perf record`` on the program as soon as it runs (the launcher's controller hook)."""

    def __init__(self, perf: str, events: list[str], system_wide: bool, period: int, output: str, env: dict[str, str]) -> None:
        self.perf, self.events, self.system_wide, self.period, self.output, self.env = perf, events, system_wide, period, output, env
        self.process: subprocess.Popen | None = None
        self.error = ""

    def command(self, pid: int) -> list[str]:
        argv = [self.perf, "record", "-q", "-d", "-c", str(self.period), "-o", self.output]
        for event in self.events:
            argv += ["-e", event]
        return argv + (["-a"] if self.system_wide else ["-p", str(pid)])

    def started(self, pid: int, events: str | None) -> None:
        try:
            self.process = subprocess.Popen(
                self.command(pid), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env
            )
        except OSError as exc:
            self.error = f"cannot start perf: {exc.strerror or exc}"

    def wake_at(self) -> float:
        return float("inf")

    def step(self) -> None:
        pass

    def finish(self) -> str:
        """Waits for perf (it ends with a program it follows by pid; system-wide, it is told to stop)."""
        if self.process is None:
            return self.error
        try:
            if self.system_wide:
                self.process.send_signal(signal.SIGINT)
            _, err = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        if self.process.returncode not in (0, -signal.SIGINT, 130):
            return f"perf record failed ({self.process.returncode}): {err.decode(errors='replace').strip()[:300]}"
        return ""


def trace(request: TraceRequest) -> TraceResult:
    """Run the program once with perf sampling data addresses and return its cache-line affinity graph."""
    check_request(request)
    why = unavailable(request)
    if why is not None:
        raise UsageError(why)
    period = request.options.get("sample_period", DEFAULT_PERIOD)
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        raise UsageError(f"sampled method: sample_period must be a whole number of at least 1, not {period!r}")
    events, system_wide = memory_events()
    perf = which("perf", request)
    env = dict(os.environ if request.env is None else request.env)
    with tempfile.TemporaryDirectory(prefix="pinlab-sampled-") as directory:
        data = os.path.join(directory, "perf.data")
        controller = PerfController(perf, events, system_wide, period, data, env)
        record = run_traced(request, {}, controller=controller)
        problem = controller.finish()
        if problem:
            raise UsageError(f"the sampled method could not record samples: {problem}; use --method pages")
        listing = subprocess.run([perf, "script", "-i", data, "-F", "pid,tid,addr"], capture_output=True, text=True, env=env)
        if listing.returncode != 0:
            raise UsageError(f"perf script could not read the samples: {listing.stderr.strip()[:300]}; use --method pages")
    samples = parse_samples(listing.stdout)
    counts = attribute(samples, thread_indexes(record), pid=record.pid)
    units = len({line for lines in counts.values() for line in lines})
    used = sum(sum(lines.values()) for lines in counts.values())
    warnings = list(record.warnings)
    if used == 0:
        warnings.append(
            "perf recorded no data-address samples of the program's threads: the graph is empty; lower sample_period or trace a longer run"
        )
    measured = {
        "method": "sampled",
        "argv": list(request.argv),
        "threads": request.threads,
        "events": events,
        "sample_period": period,
        "samples": used,
        "units_seen": units,
        "traced_seconds": record.wall_seconds,
    }
    graph = graph_from_counts(counts, request.threads, granularity="line", unit_bytes=LINE, measured=measured)
    return TraceResult(
        graph=graph, exit_status=record.exit_status, wall_seconds=record.wall_seconds, warnings=warnings, interrupted=record.interrupted
    )
