"""Memory placement on a machine whose nodes are uneven: one boot of the emulated NUMA machine
with a node of CPUs only and nodes of memory only (a shape real machines have: CXL memory, HBM
tiers, sub-NUMA clusters without memory).

    node 0: CPUs 0-1, 512 MiB    node 1: CPUs 2-3, no memory
    node 2: no CPUs, 512 MiB     node 3: no CPUs, 256 MiB
    distances: node 1's nearest memory is node 2 (17), then node 0 (21)

In it (tests/memory/touch_check.c, and pinlab's commands):

- next touch in a forked child of memory shared copy-on-write with its parent, by region and by
  page, and of memory shared with it (MAP_SHARED), touched from node 0, the data starting on
  node 2; pm_migrate's message for shared memory;
- next touch by page at vm.max_map_count: the fallback, every page on the toucher's node;
- pm_where of an armed region on this 6.1 kernel, whose move_pages answers EFAULT for a page
  mapped PROT_NONE: the pages there are on their node, not "never touched";
- PM_LOCAL and next touch from a CPU of node 1 (no memory): the nearest memory, node 2, as the
  kernel's own local allocation;
- ``pinlab run --mem follow -c 2``: the thread on node 1 binds its memory to node 2;
- ``pinlab migrate --from 0,3 --to 2,0``: node 0's pages to node 2 and node 3's to node 0, as
  written (one migrate_pages call would pair them in ascending order: 0 to 0, 3 to 2); a cycle
  is refused.
"""

from __future__ import annotations

import errno
import re
import shlex

import pytest

from tests.conftest import PINLAB
from tests.memory import mem_expect
from tests.vm.conftest import marked_sections

pytestmark = pytest.mark.vm

LAYOUT = ("--node-cpus", "2,2,0,0", "--node-mem", "512,0,512,256", "--dist", "10,21,28,20,21,10,17,30,28,17,10,25,20,30,25,10")
NEAREST = 2  # node 1's nearest node with memory

MIGRATE = r"""
mkfifo "$R/in"
{check} hold 0:8 3:24 < "$R/in" > "$R/ready" &
H=$!
exec 3>"$R/in"
i=0; until [ -s "$R/ready" ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
echo "@@pairs@@"; {pinlab} migrate $H --from 0,3 --to 2,0
echo "@@cycle@@"; {pinlab} migrate $H --from 0,2 --to 2,0 2>&1; echo "rc $?"
exec 3>&-
wait $H
"""


@pytest.fixture(scope="module")
def guest(numavm, pinlab_cmd, tmp_path_factory):
    check = mem_expect.build(str(PINLAB), tmp_path_factory.mktemp("vm-nodes") / "touch_check", mem_expect.SOURCE.with_name("touch_check.c"))
    program = shlex.quote(str(check))
    commands = {
        "fork": f"{program} fork 2",
        "maplimit": f"{program} maplimit 2",
        "where_armed": f"{program} where-armed 2",
        "cpu_only": f"{program} cpu-only 0",
        "follow": f"{pinlab_cmd} run -q -c 2 --mem follow -- cat /proc/self/numa_maps",
        "migrate": MIGRATE.format(check=program, pinlab=pinlab_cmd),
    }
    setup = "echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null\nR=$(mktemp -d)\nexport R\n"
    return numavm.batch([numavm.Group("nodes", commands, setup=setup, parallel=False)], nodes=4, sockets=2, cpus=4, timeout=300, layout=LAYOUT)


def cases(result) -> dict[str, dict]:
    return {c["case"]: c for c in mem_expect.parse(result.check("touch_check").stdout)}


def test_next_touch_in_a_forked_child_copies_and_moves_what_it_shares_copy_on_write(guest):
    found = cases(guest["fork"])
    for name in ("fork-region", "fork-page"):
        child = found[name]
        assert child["arm_rc"] == 0 and child["same"] and child["toucher_node"] == 0, child
        assert (child["moved"], child["failed"]) == (64, 0) and mem_expect.pages(child["where"]) == {0: 64}, child
    assert mem_expect.pages(found["fork-parent"]["where"]) == {2: 64}, "the parent's pages stay where they were"
    shared = found["fork-shared"]
    where = mem_expect.pages(shared["where"])
    assert shared["moved"] + shared["failed"] == 64 and sum(where.values()) == 64, shared
    if shared["failed"]:  # (the kernel refuses a page another process maps too, when it maps it at the time)
        assert shared["errno"] == errno.EACCES, shared
    assert shared["migrate_rc"] == -8 and "shared memory" in shared["migrate_error"] and "CAP_SYS_NICE" not in shared["migrate_error"], shared


def test_next_touch_at_the_mapping_limit_puts_every_page_on_the_toucher_node(guest):
    result = cases(guest["maplimit"])["maplimit"]
    assert result["split"] > 0 and result["same"] and result["pending"] == 0, result
    assert result["fallback_regions"] == 1 and result["moved"] + result["failed"] == result["pages"], result
    assert mem_expect.pages(result["where"]) == {0: result["pages"]}, result


def test_where_finds_the_pages_of_an_armed_region_on_their_node(guest):
    result = cases(guest["where_armed"])["where-armed"]
    assert result["arm_rc"] == 0 and result["pending"] == result["pages"], "asking moved nothing"
    assert mem_expect.pages(result["where"]) == {2: result["pages"] // 2} and result["absent"] == result["pages"] // 2, result


def test_a_cpu_of_a_node_without_memory_allocates_and_touches_into_the_nearest_memory(guest):
    found = mem_expect.parse(guest["cpu_only"].check("cpu-only").stdout)
    local = [c for c in found if c["case"] == "local"]
    assert [c["node"] for c in local] == [1], found
    assert local[0]["rc"] == 0 and mem_expect.pages(local[0]["where"]) == {NEAREST: 64}, local
    touches = [c for c in found if c["case"] == "next-touch"]
    assert [c["granularity"] for c in touches] == [0, 1], found
    for touch in touches:
        assert touch["arm_rc"] == 0 and touch["same"] and touch["pending"] == 0, touch
        assert (touch["moved"], touch["failed"]) == (64, 0) and mem_expect.pages(touch["where"]) == {NEAREST: 64}, touch


def test_mem_follow_binds_a_thread_on_a_node_without_memory_to_the_nearest_memory(guest):
    result = guest["follow"]
    assert result.returncode == 0, result.stderr
    heap = next(line for line in result.stdout.splitlines() if "heap" in line)
    assert f"bind:{NEAREST} " in heap, heap


def test_migrate_sends_each_from_node_to_the_to_node_written_beside_it(guest):
    parts = {k: "\n".join(v) for k, v in marked_sections(guest["migrate"].check("migrate").stdout).items()}
    before, after = (
        dict(map(int, pair.split(": ")) for pair in side.split(", "))
        for side in re.fullmatch(r"process \d+: pages per node before (.*); after (.*)", parts["pairs"].strip()).groups()
    )
    assert before[0] >= 8 << 8 and before[3] >= 24 << 8, before
    assert after.get(2, 0) >= 8 << 8 and after.get(0, 0) >= 24 << 8 and 3 not in after, (before, after)
    assert after[2] < after[0], "node 0's 8 MiB went to node 2, node 3's 24 MiB to node 0"
    assert "rc 2" in parts["cycle"] and "cycle" in parts["cycle"] and len(parts["cycle"].splitlines()) == 2, parts["cycle"]
