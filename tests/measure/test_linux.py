"""The CPU -> NUMA node map every mover of pages uses, read from this machine's sysfs."""

import os
from pathlib import Path

from pinlab.measure import linux


def test_node_of_cpus_inverts_the_node_lists_of_sysfs():
    node_of = linux.node_of_cpus()
    for cpu in os.sched_getaffinity(0):
        node = node_of[cpu]
        node_dir = Path(f"/sys/devices/system/node/node{node}")
        if node_dir.is_dir():  # a kernel without NUMA is one node 0 of every CPU
            assert (node_dir / f"cpu{cpu}").exists()
    assert linux.node_of_cpus({0: [0, 1], 3: [2]}) == {0: 0, 1: 0, 2: 3}
    assert linux.node_of_cpus({}) == {}


def _sysfs(root: Path, siblings: list[str], capacity: list[str] | None = None, max_freq: list[str] | None = None) -> Path:
    """A made-up /sys with one directory per CPU: its hardware-thread siblings, and optionally its
    capacity and maximum frequency."""
    for cpu, sib in enumerate(siblings):
        d = root / "devices" / "system" / "cpu" / f"cpu{cpu}"
        (d / "topology").mkdir(parents=True)
        (d / "topology" / "thread_siblings_list").write_text(sib + "\n")
        if capacity:
            (d / "cpu_capacity").write_text(capacity[cpu] + "\n")
        if max_freq:
            (d / "cpufreq").mkdir()
            (d / "cpufreq" / "cpuinfo_max_freq").write_text(max_freq[cpu] + "\n")
    return root


def test_cores_all_alike_only_without_smt_and_with_one_kind_of_core(tmp_path: Path):
    assert linux.cores_all_alike(_sysfs(tmp_path / "plain", ["0", "1", "2", "3"], ["1024"] * 4, ["3000000"] * 4))
    assert not linux.cores_all_alike(_sysfs(tmp_path / "smt", ["0,2", "1,3", "0,2", "1,3"]))  # two hardware threads per core
    assert not linux.cores_all_alike(_sysfs(tmp_path / "biglittle", ["0", "1", "2", "3"], ["1024", "1024", "446", "446"]))
    assert not linux.cores_all_alike(_sysfs(tmp_path / "freqs", ["0", "1"], max_freq=["5400000", "4200000"]))
    hybrid = _sysfs(tmp_path / "hybrid", ["0", "1"])
    (hybrid / "devices" / "cpu_atom").mkdir()  # Intel's E-cores have a PMU of their own
    assert not linux.cores_all_alike(hybrid)
    assert not linux.cores_all_alike(tmp_path / "nothing")  # unreadable: hwloc must say
    # This machine: whatever it has, hwloc agrees when the kernel shows nothing more.
    if linux.cores_all_alike():
        from pinlab.topology.sources import load_whole

        whole = load_whole()
        assert all(len(core.cpus) == 1 for core in whole.cores) and len(whole.cpu_kinds) < 2
