"""Weighted interleave: ``--mem weighted-interleave:NODES[@WEIGHTS]``.

Where this kernel has it (Linux 6.9+), a run gets MPOL_WEIGHTED_INTERLEAVE (numa_maps says so)
with the system's weights set for the run and put back after; the weights' sysfs files are
stood in for by a directory for the set-and-restore cases. The refusal on an older kernel is
tested on the 6.1 kernel of the emulated NUMA machine (tests/vm/test_vm_memory.py) and here
with the sysfs directory pointed elsewhere.
"""

import os

import pytest

from pinlab.errors import UsageError
from pinlab.launch.memory import parse_policy
from pinlab.memory import weights
from pinlab.memory.memmap import machine_nodes
from tests.conftest import run_pinlab

has_weighted = pytest.mark.skipif(not weights.available(), reason="this kernel has no weighted interleave (Linux 6.9+)")


@pytest.mark.parametrize(
    "bandwidth, expected",
    [
        ([20000, 10000], (2, 1)),
        ([30000, 20000], (16, 11)),
        ([10000, 10000, 10000], (1, 1, 1)),
        ([50000, 1000], (16, 1)),  # a node far slower still takes a page per turn
    ],
)
def test_weights_follow_the_bandwidth(bandwidth, expected):
    assert weights.scaled(bandwidth) == expected


def test_weights_are_set_for_the_run_and_put_back(tmp_path):
    for node, weight in ((0, 1), (1, 4)):
        (tmp_path / f"node{node}").write_text(f"{weight}\n")
    with weights.weights_set([0, 1], [3, 4], root=tmp_path) as set_to:
        assert set_to == {0: 3, 1: 4}
        assert (tmp_path / "node0").read_text() == "3" and (tmp_path / "node1").read_text() == "4\n", "an equal weight is left as it is"
    assert weights.current([0, 1], root=tmp_path) == {0: 1, 1: 4}


def test_weights_put_back_when_the_run_fails(tmp_path):
    (tmp_path / "node0").write_text("1")
    with pytest.raises(RuntimeError):
        with weights.weights_set([0], [7], root=tmp_path):
            raise RuntimeError
    assert (tmp_path / "node0").read_text() == "1"


def test_an_older_kernel_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(weights, "SYSFS", tmp_path / "absent")
    with pytest.raises(UsageError, match=r"has no weighted interleave \(MPOL_WEIGHTED_INTERLEAVE, Linux 6.9 or later"):
        parse_policy("weighted-interleave:0@1")


@has_weighted
@pytest.mark.parametrize(
    "value, message",
    [
        ("weighted-interleave:0@0", "weight 0 is out of range: the kernel takes 1 to 255"),
        ("weighted-interleave:0@256", "weight 256 is out of range"),
        ("weighted-interleave:0@1,2", "2 weights for 1 node: give one weight per node"),
        ("weighted-interleave:0@x", "must be whole numbers"),
        ("weighted-interleave:", "give the nodes"),
        ("weighted-interleave:999@1", "NUMA node 999 does not exist"),
    ],
)
def test_bad_weights_are_refused_before_the_program_runs(value, message, tmp_path):
    marker = tmp_path / "ran"
    result = run_pinlab("run", "--mem", value, "--", "touch", str(marker))
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1
    assert not marker.exists()


@has_weighted
def test_a_weighted_run_has_the_policy_and_the_weights_only_while_it_runs():
    node = machine_nodes()[0]
    before = weights.current([node])[node]
    wanted = 7 if before != 7 else 5
    result = run_pinlab(
        "run",
        "-q",
        "--mem",
        f"weighted-interleave:{node}@{wanted}",
        "--",
        "sh",
        "-c",
        f"grep -m1 heap /proc/self/numa_maps; cat {weights.SYSFS}/node{node}",
    )
    assert result.returncode == 0, result.stderr
    heap, weight = result.stdout.splitlines()
    assert f" weighted interleave:{node} heap " in heap and int(weight) == wanted
    assert weights.current([node])[node] == before


@has_weighted
def test_weights_from_measured_bandwidth_when_none_are_given(tmp_path):
    costs = tmp_path / "costs.txt"
    record = tmp_path / "r.json"
    result = run_pinlab(
        "run", "-q", "--mem", "weighted-interleave:all", "--record", str(record), "--", "true", env={**os.environ, "PINLAB_MEM_COSTS": str(costs)}
    )
    assert result.returncode == 0, result.stderr
    assert costs.read_text().startswith("# pinlab memory costs 1"), "the bandwidths were measured and stored"
    import json

    mem = json.loads(record.read_text())["options"]["mem"]
    nodes, _, given = mem.removeprefix("weighted-interleave:").partition("@")
    assert [int(n) for n in nodes.split(",")] == machine_nodes() and all(1 <= int(w) <= 16 for w in given.split(","))
