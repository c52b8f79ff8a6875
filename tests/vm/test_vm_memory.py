"""Memory placement on real multi-node kernels: the emulated NUMA machine of tests/vm/numavm.

Two boots, ``2s2n`` (2 sockets, 2 nodes, 4 CPUs) and ``2s4n`` (2 sockets, 4 nodes, 4 CPUs), each
running, at once:

- ``mem_check`` (tests/memory/mem_check.c, built here with ``pinlab cflags/ldflags --mem``; the
  guest sees this file system): every allocation policy, migration now to every node, next
  touch per page from threads on every node touching the same pages at once and disjoint ones,
  next touch of a whole region, system calls reading and writing armed pages, a thread moved
  with its attached data, the error codes and the cost hints, all checked against what the
  guest kernel reports (move_pages queries), with checksums before and after every move
  (tests/memory/mem_expect.py, the same expectations as on one node);
- ``pinlab memmap`` of a process holding 24 MiB under ``numactl --membind`` on the last node,
  against ``numastat -p`` of the same process, and against the mapping's policy and node;
- ``pinlab migrate PID --to 0 --from LAST`` of that process: the 24 MiB are on node 0 after;
- ``pinlab-twisted-stream --policy first-touch|next-touch|move-threads`` under ``pinlab run -s scatter``
  (one team per node): where each team's threads ran in each phase and where its data ended;
- ``pinlab run -s autonuma``: the program sees the kernel's NUMA balancing on, and it is off
  again after; the record says so;
- ``--mem weighted-interleave`` on this 6.1 kernel (no MPOL_WEIGHTED_INTERLEAVE): refused in one
  line, exit status 2, the program not run.

Automatic NUMA balancing is switched off in the guest for these runs so that only the API moves
pages.
"""
from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from tests.conftest import PINLAB
from tests.memory import mem_expect
from tests.vm.conftest import marked_sections

pytestmark = pytest.mark.vm

SHAPES = {"2s2n": {"nodes": 2, "sockets": 2, "cpus": 4}, "2s4n": {"nodes": 4, "sockets": 2, "cpus": 4}}
HOLD_MIB = 24

HOLDER = r"""
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void)
{
    size_t size = (size_t)%d << 20;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, size);
    printf("%%p\n", (void *)p);
    fflush(stdout);
    char c;
    return read(0, &c, 1) < 0;
}
""" % HOLD_MIB

SETUP = r"""
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
R=$(mktemp -d)
LAST=$(ls -d /sys/devices/system/node/node[0-9]* | sed 's/.*node//' | sort -n | tail -1)
export R LAST
"""

MEMMAP = r"""
mkfifo "$R/in"
numactl --membind="$LAST" {holder} < "$R/in" > "$R/addr" &
H=$!
exec 3>"$R/in"
i=0; until [ -s "$R/addr" ] || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
echo "@@addr@@"; cat "$R/addr"
echo "@@last@@"; echo "$LAST"
echo "@@memmap@@"; {pinlab} memmap $H --json
echo "@@numastat@@"; numastat -p $H
echo "@@migrate@@"; {pinlab} migrate $H --to 0 --from "$LAST"
echo "@@after_migrate@@"; {pinlab} memmap $H --json
exec 3>&-
wait $H
"""


AUTONUMA = r"""
echo 0 > /proc/sys/kernel/numa_balancing
echo "@@before@@"; cat /proc/sys/kernel/numa_balancing
echo "@@during@@"; {pinlab} run -q -s autonuma -n 1 --record "$R/autonuma.json" -- cat /proc/sys/kernel/numa_balancing
echo "@@after@@"; cat /proc/sys/kernel/numa_balancing
echo "@@record@@"; cat "$R/autonuma.json"
echo "@@weighted@@"; {pinlab} run -q --mem weighted-interleave:0,1@3,1 -- touch "$R/ran"; echo "rc $?"; ls "$R/ran" 2>&1; true
"""


TWISTED = r"""
for policy in first-touch next-touch move-threads; do
  echo "@@$(echo $policy | tr - _)@@"
  {pinlab} run -q -s scatter -n 2 -- "$({pinlab} workload path twisted-stream)" --teams 2 --threads-per-team 1 --size 4M --ntimes 3 \
      --json --policy $policy
done
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    where = tmp_path_factory.mktemp("vm-memory")
    holder_c = where / "holder.c"
    holder_c.write_text(HOLDER)
    subprocess.run(["cc", "-O1", "-o", str(where / "holder"), str(holder_c)], check=True)
    mem_check = mem_expect.build(str(PINLAB), where / "mem_check")
    return {"holder": str(where / "holder"), "mem_check": str(mem_check)}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def guest(request, numavm, pinlab_cmd, programs):
    commands = {
        "mem_check": f"PINLAB_MEM_COSTS=$R/costs.txt {shlex.quote(programs['mem_check'])}",
        "memmap": MEMMAP.format(holder=shlex.quote(programs["holder"]), pinlab=pinlab_cmd),
        "autonuma": AUTONUMA.format(pinlab=pinlab_cmd),
        "twisted": TWISTED.format(pinlab=pinlab_cmd),
    }
    results = numavm.batch([numavm.Group("memory", commands, setup=SETUP, parallel=False)], **SHAPES[request.param])
    return SHAPES[request.param], results


def _sections(text: str) -> dict[str, str]:
    return {k: "\n".join(v) for k, v in marked_sections(text).items()}


def test_the_memory_api_places_moves_and_locates_pages_as_promised(guest):
    shape, results = guest
    run = results["mem_check"].check("mem_check")
    mem_expect.assert_as_promised(mem_expect.parse(run.stdout), nodes=shape["nodes"])


def test_memmap_sees_a_bound_mapping_on_its_node_and_agrees_with_numastat(guest):
    shape, results = guest
    parts = _sections(results["memmap"].check("memmap of a bound process").stdout)
    last = int(parts["last"])
    assert last == shape["nodes"] - 1
    look = json.loads(parts["memmap"])
    start = int(parts["addr"], 16)
    mapping = next(m for m in look["mappings"] if int(m["start"], 16) == start)
    # The kernel may merge the mapping with a neighbour of the same policy: at least the 24 MiB, all on the node.
    assert mapping["kind"] == "anon" and mapping["policy"] == f"bind:{last}" and mapping["size"] >= HOLD_MIB << 20
    assert list(mapping["bytes_per_node"]) == [str(last)] and mapping["bytes_per_node"][str(last)] >= HOLD_MIB << 20
    assert look["nodes"] == list(range(shape["nodes"]))
    total = next(line for line in parts["numastat"].splitlines() if line.startswith("Total")).split()[1:-1]
    assert len(total) == shape["nodes"]
    for node, mb in enumerate(float(x) for x in total):
        assert abs(look["bytes_per_node"][str(node)] / 2**20 - mb) < 0.1, (node, mb, look["bytes_per_node"])


def test_autonuma_switches_the_balancing_on_for_the_run_and_off_after(guest):
    _, results = guest
    parts = _sections(results["autonuma"].check("autonuma run").stdout)
    assert parts["before"].strip() == "0" and parts["during"].strip() == "1" and parts["after"].strip() == "0"
    state = json.loads(parts["record"])["numa_balancing"]
    assert state == {"value": "1", "was": "0", "set_by_pinlab": True, "wanted": True}


def test_weighted_interleave_is_refused_on_a_kernel_without_it(guest):
    _, results = guest
    result = results["autonuma"]
    refused = _sections(result.stdout)["weighted"]
    assert "rc 2" in refused and "No such file" in refused, "the program ran although its policy is not possible here"
    assert "has no weighted interleave (MPOL_WEIGHTED_INTERLEAVE, Linux 6.9 or later" in result.stderr


def test_pinlab_migrate_moves_the_bound_mapping_to_the_node_it_is_told(guest):
    shape, results = guest
    parts = _sections(results["memmap"].check("memmap of a bound process").stdout)
    last = shape["nodes"] - 1
    before = parts["migrate"].split("; after ")[0]
    assert parts["migrate"].startswith("process ") and (f"before {last}: " in before or f", {last}: " in before), parts["migrate"]
    look = json.loads(parts["after_migrate"])
    start = int(parts["addr"], 16)
    mapping = next(m for m in look["mappings"] if int(m["start"], 16) <= start < int(m["start"], 16) + m["size"])
    assert mapping["bytes_per_node"].get("0", 0) >= HOLD_MIB << 20 and str(last) not in mapping["bytes_per_node"], mapping


def test_twisted_stream_policies_move_data_to_threads_or_threads_to_data(guest):
    shape, results = guest
    parts = _sections(results["twisted"].check("twisted-stream policies").stdout)
    runs = {name: json.loads(text) for name, text in parts.items()}
    for name, run in runs.items():
        assert run["parameters"]["policy"] == name.replace("_", "-") and run["valid"] is True, run
    def nodes(run, phase):
        return [team["node"] for team in run["results"]["phases"][phase]["teams"]]
    for run in runs.values():
        assert len(set(nodes(run, 0))) == 2, "scatter puts the two teams on two nodes (of two sockets) in phase 1"
    first = runs["first_touch"]
    assert first["results"]["data_node_after"] == nodes(first, 0), "first touch: the data stays where each team touched it"
    assert nodes(first, 1) == nodes(first, 0)
    moved_data = runs["next_touch"]
    phase2 = nodes(moved_data, 1)
    assert [moved_data["results"]["data_node_after"][(t + 1) % 2] for t in range(2)] == phase2, "next touch: data went to its phase-2 team"
    moved_threads = runs["move_threads"]
    before = nodes(moved_threads, 0)
    assert nodes(moved_threads, 1) == [before[(t + 1) % 2] for t in range(2)], "move-threads: team t went to team t+1's node"
    assert moved_threads["results"]["data_node_after"] == before, "move-threads: the data did not move"
