"""pinlab check: each finding from a fake /proc and /sys tree, both ways, and on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinlab.measure import noise
from tests.conftest import run_pinlab


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for path, content in files.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return tmp_path


CPU = "/sys/devices/system/cpu"


@pytest.mark.parametrize(
    "check, files, status, found",
    [
        (
            noise.governor,
            {f"{CPU}/cpu0/cpufreq/scaling_governor": "performance\n", f"{CPU}/cpu1/cpufreq/scaling_governor": "performance\n"},
            "ok",
            "performance on CPUs 0-1",
        ),
        (
            noise.governor,
            {f"{CPU}/cpu0/cpufreq/scaling_governor": "powersave\n", f"{CPU}/cpu1/cpufreq/scaling_governor": "performance\n"},
            "warning",
            "powersave on CPUs 0",
        ),
        (noise.governor, {}, "info", "no cpufreq interface"),
        (noise.turbo, {f"{CPU}/intel_pstate/no_turbo": "0\n"}, "warning", "on"),
        (noise.turbo, {f"{CPU}/intel_pstate/no_turbo": "1\n"}, "ok", "off"),
        (noise.turbo, {f"{CPU}/cpufreq/boost": "1\n"}, "warning", "on"),
        (noise.smt, {f"{CPU}/smt/active": "1\n"}, "info", "on"),
        (noise.smt, {f"{CPU}/smt/active": "0\n"}, "ok", "off"),
        (noise.aslr, {"/proc/sys/kernel/randomize_va_space": "2\n"}, "warning", "on (randomize_va_space = 2)"),
        (noise.aslr, {"/proc/sys/kernel/randomize_va_space": "0\n"}, "ok", "off"),
        (noise.numa_balancing, {"/proc/sys/kernel/numa_balancing": "1\n"}, "warning", "on"),
        (noise.numa_balancing, {"/proc/sys/kernel/numa_balancing": "0\n"}, "ok", "off"),
        (noise.isolated, {f"{CPU}/isolated": "2-3\n"}, "ok", "CPUs 2-3"),
        (noise.isolated, {f"{CPU}/isolated": "\n"}, "info", "none"),
        (noise.swap, {"/proc/swaps": "Filename Type Size Used Priority\n/dev/sda2 partition 100 0 -2\n"}, "warning", "/dev/sda2"),
        (noise.swap, {"/proc/swaps": "Filename Type Size Used Priority\n"}, "ok", "none"),
        (noise.virtual_machine, {"/sys/class/dmi/id/sys_vendor": "QEMU\n", "/proc/cpuinfo": "flags : fpu\n"}, "warning", "yes (QEMU)"),
        (noise.virtual_machine, {"/sys/class/dmi/id/sys_vendor": "Dell Inc.\n", "/proc/cpuinfo": "flags\t\t: fpu vme\n"}, "ok", "no"),
        (noise.virtual_machine, {"/proc/cpuinfo": "flags\t\t: fpu hypervisor\n"}, "warning", "hypervisor flag"),
        (noise.thp, {"/sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n"}, "info", "madvise"),
    ],
)
def test_each_check_from_a_fake_tree(tmp_path, check, files, status, found):
    finding = check(tree(tmp_path, files))
    assert finding.status == status
    assert found in finding.found
    if status == "warning":
        assert finding.fix  # a warning always says how to change it


def test_performance_counter_levels(tmp_path):
    root = tree(tmp_path, {"/proc/sys/kernel/perf_event_paranoid": "2\n"})
    assert "no hardware counters" in noise.paranoid(root).found
    (root / "sys/bus/event_source/devices/cpu").mkdir(parents=True)
    assert "hardware counters present" in noise.paranoid(root).found
    assert "perf_event_paranoid = 2" in noise.paranoid(root).found


def test_this_machine_is_described_as_it_is():
    findings = {f.name: f for f in noise.check()}
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    assert findings["address randomisation (ASLR)"].status == ("ok" if aslr == "0" else "warning")
    swaps = Path("/proc/swaps").read_text().splitlines()[1:]
    assert findings["swap"].status == ("warning" if swaps else "ok")
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    assert f"perf_event_paranoid = {paranoid}" in findings["performance counters"].found


def test_a_busy_process_is_seen():
    import subprocess
    import sys

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    if os.geteuid() == 0:
        # ahead of everything else on its CPU: a plain loop gets too small a share to be called busy
        # on a machine busy with other work, and is cut from a list of the busiest
        os.sched_setaffinity(hog.pid, {sorted(os.sched_getaffinity(0))[-1]})
        try:
            os.sched_setscheduler(hog.pid, os.SCHED_FIFO, os.sched_param(1))
        except PermissionError:  # no real-time budget here (a container or VM without it): the highest priority instead
            os.setpriority(os.PRIO_PROCESS, hog.pid, -20)
    try:
        finding = noise.busy(Path("/"))
    finally:
        hog.kill()
        hog.wait()
    assert finding.status == "warning" and f"pid {hog.pid}" in finding.found


def test_cli_table_and_json():
    table = run_pinlab("check")
    assert table.returncode == 0 and "address randomisation" in table.stdout
    data = json.loads(run_pinlab("check", "--json").stdout)
    assert {f["name"] for f in data} >= {"frequency governor", "automatic NUMA balancing", "swap", "virtual machine"}
    assert all(f["status"] in ("ok", "info", "warning") for f in data)
