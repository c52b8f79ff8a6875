"""pinlab on a real multi-socket, multi-node Linux kernel: the emulated NUMA machine of tests/vm/numavm.

Two machine shapes, one boot each:

- ``2s2n``: 2 sockets, 2 NUMA nodes (one per socket), 4 CPUs;
- ``2s4n``: 2 sockets, 4 NUMA nodes (two per socket, SLIT 10/11/21), 4 CPUs.

In each boot pinlab runs in three conditions:

- ``plain``: all CPUs allowed;
- ``taskset``: under ``taskset -c 1-3`` (the affinity mask hides CPU 0);
- ``cgroup``: in a cgroup v2 child with ``cpuset.cpus=0,2-3`` and ``cpuset.mems=1``.

The expected answers come from the kernel, read in the same guest (``/sys/devices/system/node``,
``/sys/devices/system/cpu/cpuN/topology``, ``numactl --hardware``, ``/proc/self/status``), not
from constants, so the assertions say "pinlab agrees with Linux".
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.vm

SHAPES = {
    "2s2n": {"nodes": 2, "sockets": 2, "cpus": 4},
    "2s4n": {"nodes": 4, "sockets": 2, "cpus": 4},
}
TASKSET_CPUS = "1-3"
CGROUP_CPUS = "0,2-3"
CGROUP_MEMS = "1"
CGROUP = "/sys/fs/cgroup/pinlab-test"
CONDITIONS = ("plain", "taskset", "cgroup")

#: pinlab sub-commands run in every condition (name -> arguments); all with JSON output.
PINLAB_RUNS = {
    "topology": "topology -f json",
    "compact4": "place -s compact -n 4 -f json",
    "compact2": "place -s compact -n 2 -f json",
    "scatter2": "place -s scatter -n 2 -f json",
    "inter2": "place -s inter-socket -n 2 -f json",
    "intra2": "place -s intra-socket -n 2 -f json",
    "m1pair": "place -c M1:0-1 -f json",
    "m1": "place -c M1 -f json",
}

# Facts from the kernel, one "key value" per line.
KERNEL_FACTS = r"""
for d in /sys/devices/system/node/node[0-9]*; do
  n=${d##*node}
  echo "node $n cpulist $(cat $d/cpulist)"
  echo "node $n distance $(cat $d/distance)"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "cpu ${c##*cpu} package $(cat $c/topology/physical_package_id)"
done
echo "online $(cat /sys/devices/system/cpu/online)"
"""
STATUS = "grep -E '^(Cpus|Mems)_allowed_list:' /proc/self/status"
# Creates the cpuset cgroup; a command enters it with `echo $$ > .../cgroup.procs` (its own shell).
CGROUP_SETUP = f"""if grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control &&
  mkdir -p {CGROUP} &&
  echo {CGROUP_CPUS} > {CGROUP}/cpuset.cpus &&
  echo {CGROUP_MEMS} > {CGROUP}/cpuset.mems &&
  cat {CGROUP}/cpuset.cpus.effective {CGROUP}/cpuset.mems.effective
else
  echo no-cpuset-controller; false
fi"""
ENTER_CGROUP = f"echo $$ > {CGROUP}/cgroup.procs && "


# -- running the guests -----------------------------------------------------------------------
def _commands(numavm, pinlab: str) -> dict[str, str]:
    """Every command of one boot, by name; all run concurrently once the cgroup exists.

    Per condition: the kernel's view of the process (/proc/self/status) and all of PINLAB_RUNS
    in one Python process under that restriction (numavm.pinlab_many: pinlab.cli.main, what the
    console script calls; one interpreter start instead of eight, which matters under software
    emulation). Once, unrestricted: the installed `pinlab` executable itself (topology -f json).
    """
    prefix = {"plain": "", "taskset": f"taskset -c {TASKSET_CPUS} ", "cgroup": ENTER_CGROUP}
    commands = {"kernel": KERNEL_FACTS, "numactl": "numactl --hardware"}
    for condition, pre in prefix.items():
        commands[f"{condition}.status"] = pre + STATUS
        if condition == "plain":  # one real process is enough to prove the console script
            commands["plain.cli"] = f"{pinlab} topology -f json"
        runs = dict(PINLAB_RUNS, **({"explicit0": "place -c 0"} if condition == "taskset" else {}))
        commands[f"{condition}.pinlab"] = pre + numavm.pinlab_many(runs)
    return commands


@pytest.fixture(scope="module", params=sorted(SHAPES))
def guest(request, numavm, pinlab_cmd):
    """All results of one boot of a machine shape: ``{"shape", "results": {name: VMResult}, "kernel"}``."""
    shape = request.param
    group = numavm.Group("all", _commands(numavm, pinlab_cmd), setup=CGROUP_SETUP)
    results = numavm.batch([group], **SHAPES[shape])
    for condition in CONDITIONS:
        if condition == "cgroup" and results["all.setup"].returncode != 0:
            continue  # reported by the cgroup tests
        results.update(numavm.split_pinlab_many(results[f"{condition}.pinlab"], prefix=f"{condition}."))
    return {"shape": shape, "results": results, "kernel": _kernel(results)}


def _json(result, what: str):
    result.check(what)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{what}: not JSON ({exc}):\n{result.stdout}\n{result.stderr}")


def _cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _kernel(results) -> dict:
    """The kernel's view: node cpulists and distance rows, CPU -> package id, online CPUs."""
    facts = results["kernel"].check("reading /sys").stdout
    nodes: dict[int, set[int]] = {}
    distance: dict[int, list[int]] = {}
    package: dict[int, int] = {}
    online: set[int] = set()
    for line in facts.splitlines():
        words = line.split()
        if words[:1] == ["node"] and words[2] == "cpulist":
            nodes[int(words[1])] = _cpulist(words[3] if len(words) > 3 else "")
        elif words[:1] == ["node"] and words[2] == "distance":
            distance[int(words[1])] = [int(w) for w in words[3:]]
        elif words[:1] == ["cpu"]:
            package[int(words[1])] = int(words[3])
        elif words[:1] == ["online"]:
            online = _cpulist(words[1])
    node_of = {cpu: n for n, cpus in nodes.items() for cpu in cpus}
    return {"nodes": nodes, "distance": distance, "package": package, "online": online, "node_of": node_of}


def _status(results, condition: str) -> tuple[set[int], set[int]]:
    """Cpus_allowed_list and Mems_allowed_list of a process in that condition."""
    text = results[f"{condition}.status"].check(f"{condition}: /proc/self/status").stdout
    fields = dict(line.split(":", 1) for line in text.splitlines())
    return _cpulist(fields["Cpus_allowed_list"]), _cpulist(fields["Mems_allowed_list"])


def _walk(obj):
    yield obj
    for child in obj.get("memory", []) + obj.get("children", []):
        yield from _walk(child)


def _condition(guest, condition: str) -> dict:
    """What a test of one condition needs: results, kernel facts, allowed CPUs/nodes, pinlab's topology."""
    results = guest["results"]
    if condition == "cgroup":
        setup = results["all.setup"]
        if "no-cpuset-controller" in setup.stdout:
            pytest.skip("the guest kernel offers no cgroup v2 cpuset controller")
        setup.check("moving the shell into a cpuset cgroup")
    allowed, mems = _status(results, condition)
    topo = _json(results[f"{condition}.topology"], f"{condition}: pinlab topology -f json")
    objects = list(_walk(topo["root"]))
    pus = [o for o in objects if o["type"] == "PU"]  # tree (logical) order
    return {"results": results, "kernel": guest["kernel"], "allowed": allowed, "mems": mems, "topo": topo, "objects": objects, "pus": pus}


@pytest.fixture(params=CONDITIONS)
def cond(request, guest):
    data = _condition(guest, request.param)
    data["name"] = request.param
    data["shape"] = guest["shape"]
    return data


def _placement(cond, name: str):
    return _json(cond["results"][f"{cond['name']}.{name}"], f"{cond['name']}: pinlab {PINLAB_RUNS[name]}")


def _usage_error(cond, name: str, pattern: str) -> None:
    result = cond["results"][f"{cond['name']}.{name}"]
    assert result.returncode == 2, f"pinlab {PINLAB_RUNS[name]} should refuse (exit 2), got {result.returncode}: {result.stdout} {result.stderr}"
    assert result.stderr.startswith("pinlab: error:") and re.search(pattern, result.stderr), result.stderr
    assert "Traceback" not in result.stderr


def _allowed_units_in_order(cond) -> list[int]:
    """Allowed CPUs in pinlab's tree order (no SMT in these guests: one PU per core)."""
    return [pu["os_index"] for pu in cond["pus"] if pu["os_index"] in cond["allowed"]]


# -- the conditions themselves are what we meant ---------------------------------------------
def test_conditions_restrict_the_process(cond):
    expected = {"plain": cond["kernel"]["online"], "taskset": _cpulist(TASKSET_CPUS), "cgroup": _cpulist(CGROUP_CPUS)}[cond["name"]]
    assert cond["allowed"] == expected
    if cond["name"] == "cgroup":
        assert cond["mems"] == _cpulist(CGROUP_MEMS)
        assert cond["results"]["all.setup"].stdout.split() == [CGROUP_CPUS, CGROUP_MEMS]


# -- topology discovery ----------------------------------------------------------------------
def test_counts_match_the_kernel(cond):
    kernel, summary = cond["kernel"], cond["topo"]["summary"]
    shape = SHAPES[cond["shape"]]
    assert summary["packages"] == len(set(kernel["package"].values())) == shape["sockets"]
    assert summary["numa_nodes"] == len(kernel["nodes"]) == shape["nodes"]
    assert summary["pus"] == len(kernel["online"]) == shape["cpus"]
    assert summary["cores"] == shape["cpus"]
    # a restriction hides nothing from the tree (pinlab loads with --disallowed)
    assert _cpulist(cond["topo"]["root"]["cpus"]) == kernel["online"]


def test_console_script_agrees_with_the_library_driver(guest):
    """The installed `pinlab` executable prints the same topology JSON as pinlab.cli.main."""
    results = guest["results"]
    cli = _json(results["plain.cli"], "pinlab topology -f json (console script)")
    assert cli == _json(results["plain.topology"], "pinlab topology -f json (driver)")


def test_numa_node_cpus_match_sysfs(cond):
    nodes = [o for o in cond["objects"] if o["type"] == "NUMANode"]
    assert sorted(n["os_index"] for n in nodes) == sorted(cond["kernel"]["nodes"])
    for node in nodes:
        assert _cpulist(node["cpus"]) == cond["kernel"]["nodes"][node["os_index"]], f"node {node['os_index']}"


def test_every_pu_sits_in_the_kernels_package_and_node(cond):
    kernel = cond["kernel"]
    packages = [o for o in cond["objects"] if o["type"] == "Package"]
    for package in packages:
        for cpu in _cpulist(package["cpus"]):
            assert kernel["package"][cpu] == package["os_index"], f"CPU {cpu} in Package P#{package['os_index']}"
    for pu in cond["pus"]:
        assert pu["numa_nodes"] == [kernel["node_of"][pu["os_index"]]]


def test_distances_match_sysfs_and_numactl(cond):
    kernel, distances = cond["kernel"], cond["topo"]["distances"]
    assert distances is not None, "pinlab reports no NUMA distances on a NUMA machine"
    order = distances["nodes"]
    assert sorted(order) == sorted(kernel["nodes"])
    for i, a in enumerate(order):
        assert distances["matrix"][i] == [kernel["distance"][a][b] for b in order], f"row of node {a}"
    # numactl --hardware prints the same matrix
    text = cond["results"]["numactl"].check("numactl --hardware").stdout
    rows = {int(m.group(1)): [int(v) for v in m.group(2).split()] for m in re.finditer(r"^\s*(\d+):\s+([\d ]+)$", text, re.M)}
    for i, a in enumerate(order):
        assert distances["matrix"][i] == [rows[a][b] for b in order]
    for m in re.finditer(r"^node (\d+) cpus:(.*)$", text, re.M):
        assert {int(c) for c in m.group(2).split()} == kernel["nodes"][int(m.group(1))]


# -- allowed CPUs ------------------------------------------------------------------------------
def test_allowed_cpus_follow_the_process_restriction(cond):
    topo = cond["topo"]
    assert _cpulist(topo["allowed_cpus"]) == cond["allowed"]
    assert topo["summary"]["allowed_pus"] == len(cond["allowed"])
    for pu in cond["pus"]:
        assert pu["allowed"] is (pu["os_index"] in cond["allowed"]), f"PU P#{pu['os_index']}"
    for obj in cond["objects"]:
        if obj["type"] in ("Package", "Core"):
            assert obj["allowed"] is bool(_cpulist(obj["cpus"]) & cond["allowed"]), f"{obj['type']} L#{obj['logical_index']}"


def test_allowed_numa_nodes_follow_mems_allowed(cond):
    topo = cond["topo"]
    assert set(topo["allowed_numa_nodes"]) == cond["mems"]
    for node in (o for o in cond["objects"] if o["type"] == "NUMANode"):
        assert node["allowed"] is (node["os_index"] in cond["mems"]), f"NUMANode P#{node['os_index']}"


def test_explicit_disallowed_cpu_is_refused(guest):
    result = guest["results"]["taskset.explicit0"]  # pinlab place -c 0 under taskset -c 1-3
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "CPU 0 is not allowed" in result.stderr


# -- placements --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in PINLAB_RUNS if n != "topology"])
def test_placements_use_only_allowed_cpus_and_describe_them_truly(cond, name):
    result = cond["results"][f"{cond['name']}.{name}"]
    if result.returncode == 2:  # refusals are checked by the strategy tests; never a traceback
        assert result.stderr.startswith("pinlab: error:") and "Traceback" not in result.stderr, result.stderr
        return
    placement = _placement(cond, name)
    kernel = cond["kernel"]
    assert set(placement["cpus"]) <= cond["allowed"], f"{placement['cpus']} outside allowed {sorted(cond['allowed'])}"
    assert len(set(placement["cpus"])) == len(placement["cpus"])
    assert _cpulist(placement["allowed_cpus"]) == cond["allowed"]
    package_os = {o["logical_index"]: o["os_index"] for o in cond["objects"] if o["type"] == "Package"}
    for detail, cpu in zip(placement["threads_detail"], placement["cpus"]):
        assert detail["cpu"] == cpu
        assert package_os[detail["package"]] == kernel["package"][cpu], f"CPU {cpu}: package"
        assert detail["numa_nodes"] == [kernel["node_of"][cpu]], f"CPU {cpu}: NUMA node"


def test_compact(cond):
    units = _allowed_units_in_order(cond)
    package = cond["kernel"]["package"]
    if len(units) >= 4:
        assert _placement(cond, "compact4")["cpus"] == units[:4]
    else:
        _usage_error(cond, "compact4", rf"4 threads but only {len(units)} cores are available")
    cpus = _placement(cond, "compact2")["cpus"]
    assert cpus == units[:2]  # the first two allowed cores in tree order
    if cond["name"] == "plain":
        assert package[cpus[0]] == package[cpus[1]], "compact put 2 threads on different packages"


def _packages_with_room(cond, n: int = 1) -> list[int]:
    package = cond["kernel"]["package"]
    counts: dict[int, int] = {}
    for cpu in _allowed_units_in_order(cond):
        counts[package[cpu]] = counts.get(package[cpu], 0) + 1
    return [p for p, c in counts.items() if c >= n]


def test_scatter_two_threads_on_different_packages(cond):
    cpus = _placement(cond, "scatter2")["cpus"]
    package = cond["kernel"]["package"]
    assert len(_packages_with_room(cond)) == 2
    assert package[cpus[0]] != package[cpus[1]], f"scatter put {cpus} on one package"


def test_inter_socket_alternates_packages(cond):
    cpus = _placement(cond, "inter2")["cpus"]
    package = cond["kernel"]["package"]
    assert [package[c] for c in cpus] == sorted(_packages_with_room(cond))[:2]


def test_intra_socket_keeps_threads_on_one_package(cond):
    units = _allowed_units_in_order(cond)
    package = cond["kernel"]["package"]
    roomy = _packages_with_room(cond, 2)
    if not roomy:
        _usage_error(cond, "intra2", "in any one package")
        return
    cpus = _placement(cond, "intra2")["cpus"]
    first = roomy[0]  # the first package, in tree order, with two allowed cores
    assert cpus == [c for c in units if package[c] == first][:2]


def test_numa_domain_expression_gives_cpus_of_node_1(cond):
    node1 = [c for c in _allowed_units_in_order(cond) if c in cond["kernel"]["nodes"][1]]
    if len(node1) >= 2:
        assert _placement(cond, "m1pair")["cpus"] == node1[:2]
    elif node1:
        _usage_error(cond, "m1pair", r"index 1 is out of range, M1 has 1 allowed CPUs")
    else:
        _usage_error(cond, "m1pair", r"domain M1 has no CPU this process may use")
    if node1:
        assert _placement(cond, "m1")["cpus"] == node1
    else:
        _usage_error(cond, "m1", r"domain M1 has no CPU this process may use")
