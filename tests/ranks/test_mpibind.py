"""pinlab's split of real GPU nodes against LLNL mpibind's expected mappings.

The machines are hwloc XML files of two real nodes kept in mpibind's repository (see
data/README.md): Lassen (IBM POWER9, 2 sockets x 20 usable cores x SMT4, 4 NVIDIA V100, two per
socket) and Corona (2 x AMD EPYC 7401, 8 NUMA nodes of 6 cores x SMT2, 4 AMD Vega 20 GPUs on NUMA
nodes 1, 2, 5 and 7). For each of mpibind's test cases, the figures below are its expected CPUs
(at its default SMT level, one PU per core) and GPUs per task. pinlab gives whole cores rather
than one PU of each, so domains are compared by the cores they cover. A case is either the
same (cores and GPUs), or one of the differences the README explains, checked as such.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.ranks.launch import node_split
from pinlab.topology import load_topology
from tests.conftest import run_pinlab, with_allowed

DATA = Path(__file__).with_name("data")
LASSEN_SOCKET0 = "8,12,16,20,24,28,32,36,40,44,48,52,56,60,64,68,72,76,80,84"
LASSEN_SOCKET1 = "96,100,104,108,112,116,120,124,128,132,136,140,144,148,152,156,160,164,168,172"

# (case, description, ranks, CPUs the process may use (None: all), --gpus?, mpibind's CPUs per task, GPUs per task, outcome)
CASES = {
    "coral-lassen": [
        (
            1,
            "one task per core",
            40,
            None,
            True,
            ";".join(LASSEN_SOCKET0.split(",") + LASSEN_SOCKET1.split(",")),
            ";".join(["0"] * 10 + ["1"] * 10 + ["2"] * 10 + ["3"] * 10),
            "same",
        ),
        (2, "one task", 1, None, True, "8-87,96-175", "0-3", "same"),
        (3, "two tasks", 2, None, True, f"{LASSEN_SOCKET0};{LASSEN_SOCKET1}", "0-1;2-3", "same"),
        (4, "fewer tasks than NUMA nodes, more threads", 1, None, True, "8-87,96-175", "0-3", "same"),
        (5, "as many tasks as the first core has PUs, on that core", 4, "8-11", True, "8;9;10;11", "0;0;1;1", "same"),
        (6, "two tasks at SMT 1", 2, None, True, f"{LASSEN_SOCKET0};{LASSEN_SOCKET1}", "0-1;2-3", "same"),
        (7, "two tasks at SMT 4", 2, None, True, "8-87;96-175", "0-1;2-3", "same"),
        (8, "two tasks at SMT 3", 2, None, True, f"{LASSEN_SOCKET0};{LASSEN_SOCKET1}", "0-1;2-3", "same"),
        (9, "two tasks on the first NUMA node", 2, "8-87", True, "8,12,16,20,24,28,32,36,40,44;48,52,56,60,64,68,72,76,80,84", "0;1", "same"),
        (10, "one task per NUMA node, no GPU optimisation", 2, None, False, f"{LASSEN_SOCKET0};{LASSEN_SOCKET1}", "0-1;2-3", "same CPUs, no GPUs"),
        (11, "one task per NUMA node", 2, None, True, f"{LASSEN_SOCKET0};{LASSEN_SOCKET1}", "0-1;2-3", "same"),
        (12, "8 tasks on one PU", 8, "8", False, "8;8;8;8;8;8;8;8", "0;0;0;0;1;1;1;1", "refused"),
    ],
    "epyc-corona": [
        (
            1,
            "one task per core",
            48,
            None,
            True,
            "6,54;6,54;7,55;7,55;8,56;8,56;9,57;9,57;10,58;10,58;11,59;11,59;12,60;12,60;13,61;13,61;14,62;14,62;15,63;15,63;16,64;16,64;"
            "17,65;17,65;30,78;30,78;31,79;31,79;32,80;32,80;33,81;33,81;34,82;34,82;35,83;35,83;42,90;42,90;43,91;43,91;44,92;44,92;"
            "45,93;45,93;46,94;46,94;47,95;47,95",
            ";".join(["0"] * 12 + ["1"] * 12 + ["2"] * 12 + ["3"] * 12),
            "one hardware thread each",
        ),
        (2, "one task", 1, None, True, "0-95", "0-3", "next to the GPUs only"),
        (3, "two tasks", 2, None, True, "0-23,48-71;24-47,72-95", "0-1;2-3", "next to the GPUs only"),
        (
            4,
            "fewer tasks than NUMA nodes, more threads",
            7,
            None,
            True,
            "0-11,48-59;12-17,60-65;18-23,66-71;24-29,72-77;30-35,78-83;36-41,84-89;42-47,90-95",
            "0;1;;;2;;3",
            "next to the GPUs only",
        ),
        (5, "as many tasks as the first core has PUs, on that core", 2, "0,48", True, "0;48", ";", "same"),
        (6, "two tasks at SMT 1", 2, None, True, "0-23,48-71;24-47,72-95", "0-1;2-3", "next to the GPUs only"),
        (7, "two tasks at SMT 2", 2, None, True, "0-23,48-71;24-47,72-95", "0-1;2-3", "next to the GPUs only"),
        (8, "two tasks at SMT 1 (max - 1)", 2, None, True, "0-23,48-71;24-47,72-95", "0-1;2-3", "next to the GPUs only"),
        (9, "two tasks on the first NUMA node", 2, "0-5,48-53", True, "0-2;3-5", ";", "same"),
        (
            10,
            "one task per NUMA node, no GPU optimisation",
            8,
            None,
            False,
            "0-5;6-11;12-17;18-23;24-29;30-35;36-41;42-47",
            ";0;1;;;2;;3",
            "same CPUs, no GPUs",
        ),
        (11, "one task per NUMA node", 8, None, True, "6-8;9-11;12-14;15-17;30-32;33-35;42-44;45-47", "0;0;1;1;2;2;3;3", "same"),
        (12, "8 tasks on one PU", 8, "0", False, "0;0;0;0;0;0;0;0", ";;;;;;;", "refused"),
    ],
}


def machine(name: str, allowed: str | None):
    topo = load_topology(str(DATA / f"{name}.xml"))
    return with_allowed(topo, parse_cpulist(allowed)) if allowed else topo


def cores(topo, cpus) -> set[int]:
    return {topo.core_of(topo.pu(c)).logical_index for c in cpus}


def gpu_numbers(domain) -> list[int]:
    return [next(g.indexes[s] for s in ("CUDA", "RSMI") if s in g.indexes) for g in domain.gpus]


def expected_gpus(text: str) -> list[int]:
    return parse_cpulist(text) if text else []


@pytest.mark.parametrize(
    "name, case",
    [(name, case) for name, cases in CASES.items() for case in cases],
    ids=[f"{name}-{case[0]}" for name, cases in CASES.items() for case in cases],
)
def test_mpibind_test_suite_cases(name, case):
    number, what, ranks, allowed, gpus, cpus_text, gpus_text, outcome = case
    topo = machine(name, allowed)
    theirs = [parse_cpulist(part) for part in cpus_text.split(";")]
    their_gpus = [expected_gpus(part) for part in gpus_text.split(";")]
    assert len(theirs) == len(their_gpus) == ranks
    if outcome == "refused":
        # mpibind stacks 8 tasks on one PU; pinlab refuses more ranks than CPUs
        with pytest.raises(UsageError, match=f"{ranks} local ranks but only 1 allowed CPU"):
            node_split(topo, ranks, "all" if gpus else None)
        return
    split, notices = node_split(topo, ranks, "all" if gpus else None)
    ours = split.domains
    if outcome in ("same", "same CPUs, no GPUs", "one hardware thread each"):
        assert [cores(topo, d.cpus) for d in ours] == [cores(topo, c) for c in theirs], case
    if outcome == "same":
        assert [gpu_numbers(d) for d in ours] == their_gpus
    elif outcome == "same CPUs, no GPUs":
        assert all(not d.gpus for d in ours)  # without --gpus pinlab hands out no GPU
    elif outcome == "one hardware thread each":
        # mpibind gives two tasks the same whole core; pinlab gives each its own PU of that core
        assert all(len(d.cpus) == 1 for d in ours) and len({c for d in ours for c in d.cpus}) == ranks
        assert [gpu_numbers(d) for d in ours] == their_gpus
    elif outcome == "next to the GPUs only":
        # mpibind spreads few tasks over whole packages (NUMA nodes without a GPU included);
        # pinlab keeps every rank on CPUs local to its GPUs, and every GPU still goes to a rank
        for d in ours:
            assert d.gpus and d.cpus <= frozenset().union(*(g.cpus for g in d.gpus))
        assert {n for d in ours for n in gpu_numbers(d)} == {0, 1, 2, 3}
        assert split.unused == topo.allowed_cpus - frozenset().union(*(g.cpus for g in split.gpus))
        if ranks <= 4:
            assert [gpu_numbers(d) for d in ours] == their_gpus  # the same GPUs per rank
    if gpus and not split.gpus and allowed:
        assert any("none of the 4 GPUs" in n and "is local to the CPUs this process may use" in n for n in notices)


def test_the_gpus_hwloc_shows_on_the_real_nodes():
    lassen = load_topology(str(DATA / "coral-lassen.xml"))
    result = run_pinlab("place", "--ranks", "4", "--gpus", "-t", str(DATA / "coral-lassen.xml"), "-f", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [g["busid"] for g in data["gpus"]] == ["0004:04:00.0", "0004:05:00.0", "0035:03:00.0", "0035:04:00.0"]
    assert {g["model"] for g in data["gpus"]} == {"Tesla V100-SXM2-16GB"}
    assert [d["env"] for d in data["domains"]] == [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(4)]
    assert [d["nodes"] for d in data["domains"]] == [[0], [0], [8], [8]]  # Lassen's NUMA nodes are 0 and 8
    assert len(lassen.allowed_cpus) == 160  # the first 2 cores of each socket are kept for the system
    corona = run_pinlab("place", "--ranks", "4", "--gpus", "-t", str(DATA / "epyc-corona.xml"), "-f", "json")
    data = json.loads(corona.stdout)
    # hwloc saw the Vega 20 through OpenCL only: pinlab numbers them in PCI order for ROCm
    assert [d["env"] for d in data["domains"]] == [{"ROCR_VISIBLE_DEVICES": str(i)} for i in range(4)]
    assert [d["nodes"] for d in data["domains"]] == [[1], [2], [5], [7]]
    assert "CPUs 0-5,18-29,36-41,48-53,66-77,84-89 are local to no GPU" in corona.stderr


@pytest.mark.parametrize("ranks", [1, 2, 4, 8, 16])
def test_two_more_real_gpu_nodes(ranks):
    """g4dn.metal (2 x 24-core Xeon, 8 T4, four per package) and Tioga (64-core EPYC in 4 NUMA
    nodes, 8 MI250X dies that hwloc attaches to the whole machine): every rank's CPUs are local
    to its GPUs, every GPU is used, and shared GPUs go to neighbouring ranks."""
    for name, stack, variable in (("g4dnmetal", "CUDA", "CUDA_VISIBLE_DEVICES"), ("hpe-tioga", "RSMI", "ROCR_VISIBLE_DEVICES")):
        topo = load_topology(str(DATA / f"{name}.xml"))
        split, notices = node_split(topo, ranks, "all")
        assert len(split.gpus) == 8 and not notices and not split.unused
        numbers = [[g.indexes[stack] for g in d.gpus] for d in split.domains]
        assert sorted({n for ns in numbers for n in ns}) == list(range(8))
        assert [n for ns in numbers for n in ns] == sorted(n for ns in numbers for n in ns)  # in order along the ranks
        for d, ns in zip(split.domains, numbers):
            assert d.env == {variable: ",".join(map(str, ns))}
            assert d.cpus <= frozenset().union(*(g.cpus for g in d.gpus))
        if name == "g4dnmetal" and ranks >= 2:
            for d in split.domains:  # four T4 per package: a rank's GPUs are on its package
                package = next(p for p in topo.packages if d.cpus <= p.cpus)
                assert all(g.cpus == package.cpus for g in d.gpus)


def test_an_hwloc_1_file_whose_gpus_show_only_as_display_devices():
    """CORAL EA (POWER8, hwloc 1.11): its 4 P100 appear only as DRM devices (card1-4), so
    mpibind's test suite expects no GPU at all; pinlab knows them by their PCI class and vendor
    and numbers them in PCI order, as NVML does."""
    topo = load_topology(str(DATA / "coral-ea-hwloc1.xml"))
    split, notices = node_split(topo, 4, "all")
    assert [g.busid for g in split.gpus] == ["0002:01:00.0", "0003:01:00.0", "0006:01:00.0", "0007:01:00.0"]
    assert [d.env for d in split.domains] == [{"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(i)} for i in range(4)]
    assert [sorted(d.nodes) for d in split.domains] == [[0], [0], [1], [1]]
