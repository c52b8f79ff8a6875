"""``pinlab tune --mem`` in the emulated NUMA machine (two nodes of two CPUs, 0-1 and 2-3), one boot.

- A tune of the bundled primes workload with two threads and three pinned placements (one node,
  both nodes, two threads on one CPU) races, beside them, the memory policies: the operating
  system's placement with its memory interleaved over both nodes, the two-node placement
  interleaved over its nodes, the one-node ones bound to theirs. Which wins is the emulation's
  business; what is checked is that every policy names the nodes of its own CPUs, and that the
  winner's settings and plan file say the winner's policy.
- Plan files carrying a memory policy (interleave, bind) are run with ``pinlab run --plan``: the
  program's own ``/proc/self/numa_maps`` shows the policy over the nodes of the plan's CPUs.
"""

from __future__ import annotations

import json

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.placement.plan import explicit_placement_json
from tests.vm.conftest import VM_TIMEOUT, Group, marked_sections

pytestmark = pytest.mark.vm

TUNE = r"""
cd "$R"
echo "@@tune@@"
{pinlab} tune -n 2 --mem --max-candidates 3 --min-runs 3 --max-runs 3 --warmup 0 --db t.db --name t -o plan.json --json -q -w 'primes:--limit 20000'
echo "rc $?"
echo "@@plan@@"; tr -d '\n' < plan.json; echo
"""


def node_of(cpu: int) -> int:
    return cpu // 2


@pytest.fixture(scope="module")
def guest(numavm, pinlab_cmd, tmp_path_factory):
    plans = tmp_path_factory.mktemp("vm-tune")
    spread, one = plans / "spread.json", plans / "one.json"
    spread.write_text(json.dumps({**explicit_placement_json(2, [0, 2]), "mem": "interleave"}))
    one.write_text(json.dumps({**explicit_placement_json(2, [2, 3]), "mem": "bind"}))
    maps = "-- sh -c 'cat /proc/self/numa_maps'"
    commands = {
        "tune": TUNE.format(pinlab=pinlab_cmd),
        "spread": f"{pinlab_cmd} run -q --plan {spread} {maps}",
        "one": f"{pinlab_cmd} run -q --plan {one} {maps}",
    }
    setup = "echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null\nR=$(mktemp -d)\nexport R\n"
    # one boot of about 3 minutes on a busy host (the tune races 8 placements 3 times each): VM_TIMEOUT (15 min) keeps it far inside
    return numavm.batch([Group("tune", commands, setup=setup, parallel=False)], nodes=2, sockets=2, cpus=4, timeout=VM_TIMEOUT)


def test_tune_mem_races_each_placement_s_memory_over_its_own_nodes(guest):
    parts = marked_sections(guest["tune"].check("the tune").stdout)
    assert parts["tune"][-1] == "rc 0", parts["tune"]
    answer = json.loads(parts["tune"][-2])
    policies = {}
    for entry in answer["placements"]:
        kind, _, nodes = entry["mem"].partition(":")
        used = {0, 1} if entry["cpus"] is None else {node_of(c) for c in entry["cpus"]}
        if kind != "first-touch":
            assert set(parse_cpulist(nodes)) == used, entry
            assert entry["label"].endswith(f"memory {entry['mem']}"), entry
        policies.setdefault(kind, []).append(entry)
    assert any(e["cpus"] is None for e in policies["interleave"]), policies  # the operating system's, interleaved over both nodes
    assert any(e["cpus"] and len({node_of(c) for c in e["cpus"]}) == 2 for e in policies["interleave"]), policies
    assert policies["bind"] and all(len({node_of(c) for c in e["cpus"]}) == 1 for e in policies["bind"]), policies
    assert answer["baseline"]["cpus"] is None and answer["baseline"]["mem"] == "first-touch"

    winner, plan = answer["winner"], json.loads(parts["plan"][-1])
    kind, _, nodes = winner["mem"].partition(":")
    if not answer["chosen"] or kind == "first-touch":
        assert (
            plan["mem"] is None and "--interleave" not in answer["settings"].get("numactl", "") and "--membind" not in json.dumps(answer["settings"])
        )
        return
    assert plan["mem"] == kind and plan["cpus"] == winner["cpus"]
    option = {"interleave": "--interleave", "bind": "--membind"}[kind]
    assert f"{option}={nodes} " in answer["settings"]["numactl"] and f"numactl {option}={nodes} " in answer["settings"]["srun"]
    assert answer["settings"]["pinlab"].startswith("pinlab run --plan plan.json")


@pytest.mark.parametrize("name, policy", [("spread", "interleave:0-1"), ("one", "bind:1")])
def test_a_plan_file_s_memory_policy_holds_over_the_nodes_of_its_cpus(guest, name, policy):
    """Every mapping of the program shows the task's policy (numa_maps' second field) where it has none of its own."""
    result = guest[name].check(f"pinlab run --plan ({name})")
    policies = {line.split()[1] for line in result.stdout.splitlines() if len(line.split()) > 1}
    assert policies == {policy}, result.stdout
