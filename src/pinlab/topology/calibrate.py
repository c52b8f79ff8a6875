"""``pinlab calibrate``: measure the machine's distances with the native ``pinlab-calibrate``.

Two measurements, both on the CPUs this process may use:

- **core-to-core latency**: for each pair of CPUs, the one-way time of a cache line bounced
  between two pinned threads (median of many round trips, within a per-pair time budget:
  :data:`PAIR_BUDGET_MS`, :data:`QUICK_PAIR_BUDGET_MS` with ``quick``). Every pair on small
  machines; with ``sample``, at most :data:`SAMPLE_PER_LEVEL` pairs per topology level (pairs are
  of the same level when their deepest shared object is of the same kind), the other pairs of a
  level given the level's median. Sampling trusts the tree, so it cannot reveal groups a flat tree
  hides: leave it off on virtual machines.
- **memory**: for each NUMA node, from one CPU of each package (the machine as a whole where the
  topology has no package), the read bandwidth and the pointer-chase latency of memory bound to
  the node. Rows: the package read from; columns: the node read.

The results become a :class:`Calibration`, which :func:`calibrated_xml` writes into the topology's
hwloc XML (see :mod:`pinlab.topology.user_distances`).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from pinlab.errors import UsageError
from pinlab.native import native_path
from pinlab.outputs import check_picture, check_writable
from pinlab.topology.model import CpuLatency, MeasuredMemory, Topology, TopoObject
from pinlab.topology.user_distances import cpu_latency_element, memory_elements, with_measurements

#: Time spent on each pair (ms): a full 16-core matrix (120 pairs) takes about 1 s of measuring.
PAIR_BUDGET_MS = 8.0
QUICK_PAIR_BUDGET_MS = 2.0
#: Round trips per timed sample.
BATCH = 50
#: With ``sample``: pairs measured per topology level.
SAMPLE_PER_LEVEL = 8
#: Pairs per run of the native program (a command line stays well under the kernel's limits).
PAIRS_PER_RUN = 2000
#: The memory buffer is this many times the largest data cache (at least MIN_BUFFER bytes).
BUFFER_FACTOR, QUICK_BUFFER_FACTOR = 4, 2
MIN_BUFFER, QUICK_MIN_BUFFER = 64 << 20, 32 << 20
CHASE_MS, QUICK_CHASE_MS = 200.0, 50.0


@dataclass
class Calibration:
    """What ``pinlab calibrate`` measured: the CPU latency matrix and the package x node memory matrices."""

    latency: CpuLatency
    measured_pairs: int
    estimated_pairs: int
    latency_seconds: float
    memory: MeasuredMemory | None = None
    reader_cpus: list[int] = field(default_factory=list)  # per initiator (row of memory): the CPU that read
    reader_names: list[str] = field(default_factory=list)  # per initiator: "Package L#0"
    memory_seconds: float = 0.0


def usable_cpus(topo: Topology) -> list[int]:
    """The CPUs to measure: the topology's allowed PUs, all of which this process must be able to use.

    A topology of another machine (or a CPU this process may not use) is refused: calibrate
    measures the machine it runs on.
    """
    cpus = sorted(cpu for cpu in topo.allowed_cpus if cpu in topo.pu_by_os)
    if len(cpus) < 2:
        raise UsageError(
            f"calibrate needs at least 2 allowed CPUs to measure latency between them; {topo.name} allows "
            f"{len(cpus)} ({','.join(map(str, cpus)) or 'none'}): run it where more CPUs are allowed (taskset, cgroup)"
        )
    here = os.sched_getaffinity(0)
    missing = [cpu for cpu in cpus if cpu not in here]
    if missing:
        raise UsageError(
            f"calibrate measures this machine, but CPUs {','.join(map(str, missing[:16]))} of topology {topo.name} "
            "are not allowed to this process: give the topology of this machine (--topology this) or allow those CPUs"
        )
    return cpus


def _shared_level(a: TopoObject, b: TopoObject) -> str:
    """The kind of the deepest object holding both PUs (their level of sharing)."""
    ancestors = set()
    obj: TopoObject | None = a
    while obj is not None:
        ancestors.add(id(obj))
        obj = obj.parent
    obj = b
    while obj is not None and id(obj) not in ancestors:
        obj = obj.parent
    return obj.kind if obj is not None else "Machine"


def plan_pairs(
    topo: Topology, cpus: list[int], sample: bool = False, per_level: int = SAMPLE_PER_LEVEL, seed: int = 0
) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str]]:
    """The pairs to measure, and each pair's level (for filling in unmeasured pairs when sampling)."""
    everything = [(a, b) for i, a in enumerate(cpus) for b in cpus[i + 1 :]]
    levels = {(a, b): _shared_level(topo.pu(a), topo.pu(b)) for a, b in everything} if sample else {}
    if not sample:
        return everything, levels
    by_level: dict[str, list[tuple[int, int]]] = {}
    for pair, level in levels.items():
        by_level.setdefault(level, []).append(pair)
    rng = random.Random(seed)
    chosen = []
    for level in sorted(by_level):
        pairs = by_level[level]
        chosen.extend(pairs if len(pairs) <= per_level else sorted(rng.sample(pairs, per_level)))
    return sorted(chosen), levels


def _run(args: list[str], what: str, timeout: float) -> list[dict]:
    exe = str(native_path("pinlab-calibrate"))
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"measuring {what} took more than {timeout:.0f} s; the machine may be overloaded: try again, or with --quick") from None
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit status {proc.returncode}"
        raise UsageError(f"measuring {what} failed: {detail}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def measure_latency(topo: Topology, quick: bool = False, sample: bool = False) -> tuple[CpuLatency, int, int, float]:
    """The CPU x CPU one-way latency matrix (ns, symmetric); also pairs measured, pairs estimated, seconds."""
    cpus = usable_cpus(topo)
    pairs, levels = plan_pairs(topo, cpus, sample=sample)
    budget = QUICK_PAIR_BUDGET_MS if quick else PAIR_BUDGET_MS
    measured: dict[tuple[int, int], float] = {}
    started = time.perf_counter()
    for start in range(0, len(pairs), PAIRS_PER_RUN):
        chunk = pairs[start : start + PAIRS_PER_RUN]
        # Generous: a loaded machine can stretch each pair well past its budget.
        timeout = 30 + len(chunk) * budget / 1000 * 50
        for row in _run(
            ["latency", "--pairs", ",".join(f"{a}:{b}" for a, b in chunk), "--budget-ms", str(budget), "--batch", str(BATCH)],
            "core-to-core latency",
            timeout,
        ):
            measured[(row["a"], row["b"])] = float(row["one_way_ns"])
    seconds = time.perf_counter() - started
    latency, estimated = build_matrix(cpus, measured, levels)
    return latency, len(measured), estimated, seconds


def build_matrix(cpus: list[int], measured: dict[tuple[int, int], float], levels: dict[tuple[int, int], str]) -> tuple[CpuLatency, int]:
    """The symmetric matrix from the measured pairs (a < b); a pair not measured gets the median of
    the measured pairs of its level. Also returns how many pairs were so estimated."""
    by_level: dict[str, list[float]] = {}
    for pair, value in measured.items():
        by_level.setdefault(levels.get(pair, ""), []).append(value)
    level_median = {level: statistics.median(values) for level, values in by_level.items()}
    index = {cpu: i for i, cpu in enumerate(cpus)}
    matrix = [[0.0] * len(cpus) for _ in cpus]
    estimated = 0
    for i, a in enumerate(cpus):
        for b in cpus[i + 1 :]:
            value = measured.get((a, b))
            if value is None:
                value = level_median[levels[(a, b)]]
                estimated += 1
            matrix[index[a]][index[b]] = matrix[index[b]][index[a]] = value
    return CpuLatency(cpus=cpus, matrix=matrix), estimated


def _buffer_bytes(topo: Topology, node: TopoObject, quick: bool) -> int:
    largest_cache = max((int(o.attributes.get("cache_size", 0)) for o in topo.root.walk() if o.is_data_cache), default=0)
    size = max((QUICK_BUFFER_FACTOR if quick else BUFFER_FACTOR) * largest_cache, QUICK_MIN_BUFFER if quick else MIN_BUFFER)
    memory = int(node.attributes.get("local_memory", 0))
    if memory:
        size = min(size, memory // 4)  # never crowd the node
    return max(size, 1 << 20)


def measure_memory(topo: Topology, quick: bool = False) -> tuple[MeasuredMemory, list[int], list[str], float]:
    """Read bandwidth (MB/s) and latency (ns) of each allowed node's memory from one CPU of each package.

    Also returns the CPU each row was read from, the rows' names and the seconds it took.
    """
    cpus = set(usable_cpus(topo))
    nodes = [n for n in topo.numa_nodes if n.allowed and n.os_index is not None]
    if not nodes:
        raise UsageError(f"{topo.name} has no NUMA node this process may allocate on: nothing to measure memory on")
    holders = [p for p in topo.packages if p.cpus & cpus] or [topo.root]
    readers = [min(p.cpus & cpus) for p in holders]
    bandwidth = [[0.0] * len(nodes) for _ in holders]
    latency = [[0.0] * len(nodes) for _ in holders]
    started = time.perf_counter()
    for row, cpu in enumerate(readers):
        for column, target in enumerate(nodes):
            result = _run(
                [
                    "memory",
                    "--cpu",
                    str(cpu),
                    "--node",
                    str(target.os_index),
                    "--bytes",
                    str(_buffer_bytes(topo, target, quick)),
                    "--passes",
                    "2" if quick else "3",
                    "--chase-ms",
                    str(QUICK_CHASE_MS if quick else CHASE_MS),
                ],
                f"memory of NUMA node {target.os_index} from CPU {cpu}",
                timeout=120,
            )[0]
            bandwidth[row][column] = float(result["bandwidth_mbps"])
            latency[row][column] = float(result["latency_ns"])
    memory = MeasuredMemory(nodes=[n.os_index for n in nodes], initiators=[p.cpus for p in holders], bandwidth_mbps=bandwidth, latency_ns=latency)
    names = [p.label if p is not topo.root else "Machine" for p in holders]
    return memory, readers, names, time.perf_counter() - started


def calibrate(topo: Topology, quick: bool = False, sample: bool = False, memory: bool = True) -> Calibration:
    """Measure this machine (described by ``topo``): latency matrix, and node bandwidth/latency unless ``memory`` is off."""
    latency, measured, estimated, seconds = measure_latency(topo, quick=quick, sample=sample)
    result = Calibration(latency=latency, measured_pairs=measured, estimated_pairs=estimated, latency_seconds=seconds)
    if memory:
        result.memory, result.reader_cpus, result.reader_names, result.memory_seconds = measure_memory(topo, quick)
    return result


def calibrated_xml(topo: Topology, result: Calibration) -> str:
    """The topology's hwloc XML with the measurements in it (earlier pinlab measurements replaced)."""
    elements = cpu_latency_element(result.latency)
    if result.memory is not None:
        elements += memory_elements(ET.fromstring(topo.xml), result.memory)
    return with_measurements(topo.xml, elements)


@dataclass(frozen=True)
class CalibrationOutputs:
    """Where a calibration's results are written: the calibrated topology (hwloc XML) and a picture.

    Both paths are checked when this is made, before the measurement: a calibration takes
    seconds to minutes, and a path that cannot be written must be refused before, not after.
    """

    output: str | None = None
    picture: str | None = None

    def __post_init__(self) -> None:
        if self.output is not None:
            if not self.output.lower().endswith(".xml"):
                raise UsageError(f"-o {self.output!r}: the calibrated topology is hwloc XML; give a file name ending in .xml")
            check_writable(self.output, "the calibrated topology")
        if self.picture:
            check_picture(self.picture)

    def write_topology(self, topo: Topology, result: Calibration) -> None:
        """Write the calibrated topology to :attr:`output` (a disk can still fill after the check)."""
        assert self.output is not None
        try:
            with open(self.output, "w", encoding="utf-8") as file:
                file.write(calibrated_xml(topo, result))
        except OSError as exc:
            raise UsageError(f"cannot write {self.output!r}: {exc.strerror or exc}") from None
