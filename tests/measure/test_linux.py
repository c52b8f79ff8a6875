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
