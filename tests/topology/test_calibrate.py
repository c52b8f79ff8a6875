"""pinlab calibrate on this machine: the native program, the matrices, the XML round trip, bad input."""

from __future__ import annotations

import math
import re
import shutil
import statistics
import subprocess

import pytest

from pinlab.errors import UsageError
from pinlab.topology import load_topology
from pinlab.topology.calibrate import Calibration, build_matrix, calibrate, calibrated_xml, measure_latency, plan_pairs, usable_cpus
from pinlab.topology.hwloc_xml import parse_xml
from pinlab.topology.sources import load_file
from tests.conftest import run_pinlab, this_cpus, with_allowed

# At most this many CPUs measured here (all pairs of them): enough to see every level of a small machine.
MAX_CPUS = 6
CPUS = this_cpus()[:MAX_CPUS]
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason=f"calibrate measures between CPUs: this process may use only {len(CPUS)}")


@pytest.fixture(scope="module")
def measured() -> tuple:
    """One quick measurement of this machine's allowed CPUs (at most MAX_CPUS), shared by the tests."""
    if len(CPUS) < 2:
        pytest.skip(f"calibrate measures between CPUs: this process may use only {len(CPUS)}")
    topo = with_allowed(load_topology("this"), CPUS)
    return topo, calibrate(topo, quick=True)


def check_latency_matrix(latency, cpus):
    assert latency.cpus == cpus
    n = len(cpus)
    for i in range(n):
        assert latency.matrix[i][i] == 0.0
        for j in range(n):
            if i != j:
                value = latency.matrix[i][j]
                assert math.isfinite(value) and value > 0, (cpus[i], cpus[j], value)
                assert value == latency.matrix[j][i]
                assert value < 1e6  # a cache line takes nanoseconds to microseconds, never milliseconds


@needs_two
def test_the_latency_matrix_of_this_machine(measured):
    topo, result = measured
    check_latency_matrix(result.latency, CPUS)
    assert result.measured_pairs == len(CPUS) * (len(CPUS) - 1) // 2
    assert result.estimated_pairs == 0


@needs_two
def test_memory_of_every_node_from_every_package(measured):
    topo, result = measured
    memory = result.memory
    assert memory.nodes == sorted(n.os_index for n in topo.numa_nodes if n.allowed)
    packages = [p for p in topo.packages if p.cpus & set(CPUS)] or [topo.root]
    assert memory.initiators == [p.cpus for p in packages]
    for package, cpu in zip(packages, result.reader_cpus):
        assert cpu in package.cpus and cpu in CPUS
    for rows in (memory.bandwidth_mbps, memory.latency_ns):
        assert len(rows) == len(packages)
        assert all(len(row) == len(memory.nodes) and all(v > 0 and math.isfinite(v) for v in row) for row in rows)
    # A read from memory takes longer than a cache line between two cores? Not always on a VM;
    # but memory latency is at least tens of nanoseconds and bandwidth at least tens of MB/s anywhere.
    assert min(min(row) for row in memory.latency_ns) > 10
    assert min(min(row) for row in memory.bandwidth_mbps) > 10


@needs_two
@pytest.mark.parametrize("cpu", CPUS[1:])
def test_the_native_program_measures_a_pair_with_each_allowed_cpu(cpu):
    """Every allowed CPU can be paired with the first one: pinned threads really run there."""
    topo = with_allowed(load_topology("this"), [CPUS[0], cpu])
    latency, measured_pairs, estimated, seconds = measure_latency(topo, quick=True)
    check_latency_matrix(latency, [CPUS[0], cpu])
    assert measured_pairs == 1 and seconds > 0


@needs_two
def test_xml_round_trip_is_accepted_by_hwloc(measured, tmp_path):
    topo, result = measured
    path = tmp_path / "calibrated.xml"
    path.write_text(calibrated_xml(topo, result))
    lstopo = shutil.which("lstopo-no-graphics")
    assert lstopo, "hwloc's lstopo-no-graphics is needed (make install installs it)"
    # hwloc reads the file and keeps the measured matrices when it writes it again.
    proc = subprocess.run([lstopo, "-i", str(path), "--of", "xml", "-"], capture_output=True, text=True, check=True)
    assert re.search(r'<distances2 type="PU" nbobjs="%d" kind="6" name="PinlabCPULatency"' % len(CPUS), proc.stdout)
    assert '<memattr name="PinlabReadBandwidth" flags="5">' in proc.stdout
    assert '<memattr name="PinlabMemoryLatency" flags="6">' in proc.stdout
    again = tmp_path / "again.xml"
    again.write_text(proc.stdout)
    for file in (path, again):
        loaded = load_file(file)
        assert loaded.cpu_latency.cpus == CPUS
        for row, expected in zip(loaded.cpu_latency.matrix, result.latency.matrix):
            assert row == pytest.approx(expected, abs=0.001)  # stored in picoseconds
        memory = loaded.measured_memory
        assert memory.nodes == result.memory.nodes and memory.initiators == result.memory.initiators
        for rows, expected, tolerance in (
            (memory.bandwidth_mbps, result.memory.bandwidth_mbps, 0.5),
            (memory.latency_ns, result.memory.latency_ns, 0.001),
        ):
            for row, want in zip(rows, expected):
                assert row == pytest.approx(want, abs=tolerance)


@needs_two
def test_writing_twice_replaces_the_earlier_measurement(measured):
    topo, result = measured
    first = parse_xml(calibrated_xml(topo, result), source="first")
    halved = Calibration(
        latency=type(result.latency)(cpus=result.latency.cpus, matrix=[[v / 2 for v in row] for row in result.latency.matrix]),
        measured_pairs=result.measured_pairs,
        estimated_pairs=0,
        latency_seconds=0.0,
    )
    second_xml = calibrated_xml(first, halved)
    assert second_xml.count("PinlabCPULatency") == 1 and "PinlabReadBandwidth" not in second_xml
    second = parse_xml(second_xml, source="second")
    assert second.cpu_latency.matrix[0][1] == pytest.approx(result.latency.matrix[0][1] / 2, abs=0.001)


@needs_two
def test_the_command_prints_the_heat_map_and_writes_xml_and_picture(tmp_path):
    out, picture = tmp_path / "m.xml", tmp_path / "m.png"
    cpus = ",".join(map(str, CPUS[:2]))
    proc = run_pinlab("calibrate", "--quick", "-o", str(out), "--picture", str(picture), prefix=["taskset", "-c", cpus])
    assert proc.returncode == 0, proc.stderr
    assert "Core-to-core latency" in proc.stdout and "scale:" in proc.stdout and "Memory read bandwidth" in proc.stdout
    assert "1 pair of CPUs measured" in proc.stdout
    assert picture.read_bytes().startswith(b"\x89PNG")
    shown = run_pinlab("topology", "-t", str(out))
    assert shown.returncode == 0 and "Measured CPU latency" in shown.stdout


def test_plan_pairs_all_or_a_sample_per_level():
    topo = load_topology("clovertown")
    cpus = sorted(topo.pu_by_os)
    every, _ = plan_pairs(topo, cpus)
    assert len(every) == len(cpus) * (len(cpus) - 1) // 2
    sample, levels = plan_pairs(topo, cpus, sample=True, per_level=2)
    kinds = set(levels.values())
    assert len(kinds) >= 2  # pairs in one L2, pairs in one package, pairs across packages
    for kind in kinds:
        in_level = [p for p in sample if levels[p] == kind]
        assert 1 <= len(in_level) <= 2
    big = load_topology("synthetic:pack:4 l3:2 core:8 pu:2")
    big_cpus = sorted(big.pu_by_os)
    sample, levels = plan_pairs(big, big_cpus, sample=True)
    assert len(sample) <= 8 * len(set(levels.values())) < len(big_cpus) ** 2 // 20


def test_a_sample_fills_each_unmeasured_pair_with_its_levels_median():
    topo = load_topology("clovertown")
    cpus = sorted(topo.pu_by_os)
    sample, levels = plan_pairs(topo, cpus, sample=True, per_level=2)
    # pretend latencies: 10 ns per level rank, plus a little per pair, so medians are checkable
    rank = {kind: 10.0 * (r + 1) for r, kind in enumerate(sorted(set(levels.values())))}
    measured = {pair: rank[levels[pair]] + 0.1 * n for n, pair in enumerate(sample)}
    latency, estimated = build_matrix(cpus, measured, levels)
    assert estimated == len(levels) - len(sample)
    for (a, b), kind in levels.items():
        value = latency.between(a, b)
        assert value == latency.between(b, a)
        if (a, b) in measured:
            assert value == measured[(a, b)]
        else:
            assert value == statistics.median(v for p, v in measured.items() if levels[p] == kind)


def test_one_cpu_is_refused(tmp_path):
    topo = load_topology("this")
    one = with_allowed(topo, this_cpus()[:1])
    with pytest.raises(UsageError, match="at least 2 allowed CPUs"):
        calibrate(one)
    proc = run_pinlab("calibrate", "--quick", prefix=["taskset", "-c", str(this_cpus()[0])])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pinlab: error: calibrate needs at least 2 allowed CPUs") and "Traceback" not in proc.stderr


def test_cpus_not_allowed_here_are_refused():
    """A topology whose CPUs this process may not use (another machine's) cannot be calibrated here."""
    proc = run_pinlab("calibrate", "--quick", "--topology", "synthetic:pack:2 core:64 pu:2")
    assert proc.returncode == 2
    assert "are not allowed to this process" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(UsageError, match="not allowed to this process"):
        usable_cpus(load_topology("synthetic:pack:2 core:64 pu:2"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--picture", "x.gif"], "must end in .svg or .png"),
        (["--picture", "/nonexistent-dir/x.png"], "its directory does not exist"),
        (["-o", "/nonexistent-dir/x.xml"], "its directory does not exist"),
        (["--topology", "no-such-preset"], "unknown topology"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args, message):
    proc = run_pinlab("calibrate", "--quick", *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("pinlab: error:") and message in proc.stderr and "Traceback" not in proc.stderr


def test_the_native_program_refuses_bad_arguments():
    from pinlab.native import native_path

    exe = str(native_path("pinlab-calibrate"))
    for args, message in (
        (["latency", "--pairs", "0:0"], "two different CPU"),
        (["latency", "--pairs", "0-1"], "malformed --pairs"),
        (["memory", "--cpu", "0"], "needs --cpu, --node and --bytes"),
        (["bounce"], "unknown mode"),
    ):
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)


@pytest.mark.parametrize("name", ["existing.json", ""])
def test_an_output_that_is_not_an_xml_file_is_refused_before_measuring_and_left_alone(tmp_path, name):
    """-o writes hwloc XML: a .json file of the user's is not overwritten, an empty name is not ignored."""
    target = tmp_path / "existing.json"
    target.write_text('{"mine": true}\n')
    proc = run_pinlab("calibrate", "--quick", "-o", str(target) if name else "")
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr == f"pinlab: error: -o {str(target) if name else ''!r}: the calibrated topology is hwloc XML; give a file name ending in .xml\n"
    )
    assert target.read_text() == '{"mine": true}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["existing.json"]
