"""``pinlab run`` on a real multi-socket, multi-node Linux kernel: the emulated NUMA machine of tests/vm/numavm.

Two machine shapes, one boot each (all commands of a boot run concurrently in one guest):

- ``2s2n``: 2 sockets, 2 NUMA nodes (one per socket), 4 CPUs;
- ``2s4n``: 2 sockets, 4 NUMA nodes (two per socket), 4 CPUs.

What is proved, against the guest kernel's own answers (sysfs, ``/proc/self/numa_maps``,
``get_mempolicy`` as seen by the program itself):

- pinning across sockets: ``pinlab run -c LIST -- pinlab-threads-probe --threads 3`` with LIST
  alternating the packages (computed in the guest from sysfs): every thread starts on its plan
  CPU, with a one-CPU mask, from its first instruction; the ``--record`` file says the same;
- the OpenMP probes (libgomp and LLVM libomp) under ``-s scatter -n 4`` and ``-s compact -n 2``:
  OpenMP thread i runs on CPU i of the plan ``pinlab place`` prints in the same guest;
- every memory policy for real: the policy the kernel shows in numa_maps (``bind:1``,
  ``interleave:0-1``, ``prefer:1``, ``local``, ``default``), 64 MiB touched under ``bind:1`` by a
  thread running on node 0 all land on node 1, and the record's ``pages_per_node`` sees them;
- ``--mem follow``: each thread's own policy is MPOL_BIND to its CPU's node;
- ``--nested inherit``: threads created by workers stay in their creator's NUMA node.

Python starts are slow under software emulation, so the guest runs few Python processes: the
``pinlab place`` runs and the numa_maps policy runs go through one driver process
(``pinlab.cli.main``, what the console script calls, with the program's output on file
descriptors 1 and 2 redirected per run); the pinning runs use the installed console script.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest

from pinlab.cpuset import parse_cpulist
from pinlab.native import native_path

pytestmark = pytest.mark.vm

SHAPES = {
    "2s2n": {"nodes": 2, "sockets": 2, "cpus": 4},
    "2s4n": {"nodes": 4, "sockets": 2, "cpus": 4},
}
RECORD_MARK = "@@PINLAB-RECORD@@"
MPOL_BIND = 2
ALLOC_MIB = 64
ALLOC_PAGES = ALLOC_MIB * 1024 // 4  # in 4 KiB pages, the unit of numa_maps' N<node>= counts

#: --mem values run on `sh -c 'cat /proc/self/numa_maps'` (name -> value; None = no --mem).
POLICIES = {
    "bind1": "bind:1",
    "interleave_all": "interleave:all",
    "interleave01": "interleave:0,1",
    "preferred1": "preferred:1",
    "local": "local",
    "first_touch": None,
    "first_touch_named": "first-touch",
}

# Facts from the kernel, one "key value" per line.
KERNEL_FACTS = r"""
for d in /sys/devices/system/node/node[0-9]*; do
  echo "node ${d##*node} cpulist $(cat $d/cpulist)"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "cpu ${c##*cpu} package $(cat $c/topology/physical_package_id)"
done
"""

# Run in the guest's main shell before the commands: CPU lists chosen from the guest's own
# topology, exported to every command, and printed so the test can check them.
#   ACROSS        all CPUs, alternating packages: 1st CPU of package 0, 1st of package 1, 2nd of 0, ...
#   N0, N1        the first CPU of node 0 and of node 1
#   ONE_PER_NODE  the first CPU of every node, in node order
#   R             a directory for the --record files
SETUP = r"""
first_cpu() { sed 's/[,-].*//' /sys/devices/system/node/node$1/cpulist; }
ACROSS=$(for c in /sys/devices/system/cpu/cpu[0-9]*; do echo "$(cat $c/topology/physical_package_id) ${c##*cpu}"; done \
  | sort -n -k1,1 -k2,2 | awk '{r[$1]++; print r[$1], $1, $2}' | sort -n -k1,1 -k2,2 | awk '{printf "%s%s", (NR>1 ? "," : ""), $3}')
N0=$(first_cpu 0)
N1=$(first_cpu 1)
ONE_PER_NODE=$(for d in /sys/devices/system/node/node[0-9]*; do first_cpu ${d##*node}; done | paste -sd, -)
R=$(mktemp -d)
export ACROSS N0 N1 ONE_PER_NODE R
echo "across $ACROSS"
echo "n0 $N0"
echo "n1 $N1"
echo "one_per_node $ONE_PER_NODE"
"""

# Touches ALLOC_MIB MiB allocated with the C library's malloc (never freed, so the pages are
# still there when the preload library counts them at exit) and prints its own numa_maps.
ALLOCATE = (
    "import ctypes; libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; "
    f"p = libc.malloc({ALLOC_MIB} << 20); ctypes.memset(p, 1, {ALLOC_MIB} << 20); "
    "print(open('/proc/self/numa_maps').read(), end='')"
)

# Runs `pinlab ARGS` for every {name: ARGS} in one Python process through pinlab.cli.main, with
# file descriptors 1 and 2 redirected to files for each run (so the launched program's own output
# is captured too), and prints {name: {stdout, stderr, returncode}} as JSON.
_FD_DRIVER = r"""
import json, os, shlex, sys, tempfile, traceback
from pinlab.cli import main
results, where = {}, tempfile.mkdtemp()
for name, args in json.loads(sys.argv[1]).items():
    paths = [os.path.join(where, name + ext) for ext in (".out", ".err")]
    sys.stdout.flush(); sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    for fd, path in zip((1, 2), paths):
        new = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(new, fd)
        os.close(new)
    try:
        try:
            rc = main(shlex.split(args))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            rc = 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
    out, err = (open(p, encoding="utf-8", errors="replace").read() for p in paths)
    results[name] = {"stdout": out, "stderr": err, "returncode": rc}
json.dump(results, sys.stdout)
"""


def _fd_driver(runs: dict[str, str]) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(_FD_DRIVER)} {shlex.quote(json.dumps(runs))}"


def _with_record(pinlab: str, name: str, options: str, program: str) -> str:
    """`pinlab run --record` then the record itself after a marker line; the command's status is pinlab's."""
    return f'{pinlab} run --record "$R/{name}.json" {options} -- {program}; rc=$?; echo {RECORD_MARK}; cat "$R/{name}.json"; exit $rc'


def _commands(pinlab: str) -> dict[str, str]:
    threads_probe = shlex.quote(str(native_path("pinlab-threads-probe")))
    gomp = shlex.quote(str(native_path("pinlab-probe")))
    llvm = shlex.quote(str(native_path("pinlab-probe-llvm")))
    driven = {
        "place_scatter4": "place -s scatter -n 4 -f list",
        "place_compact2": "place -s compact -n 2 -f list",
    }
    for name, value in POLICIES.items():
        mem = f"--mem {value} " if value else ""
        driven[f"mem_{name}"] = f"run -q {mem}-- /bin/sh -c 'cat /proc/self/numa_maps'"
    commands = {
        "kernel": KERNEL_FACTS,
        "driven": _fd_driver(driven),
        "across": _with_record(pinlab, "across", '-c "$ACROSS"', f"{threads_probe} --threads 3"),
        "bind_pages": _with_record(pinlab, "bind_pages", '-c "$N0" --mem bind:1', f"python3 -c {shlex.quote(ALLOCATE)}"),
        "follow": f'{pinlab} run -c "$N0,$N1" --mem follow -- {threads_probe} --threads 1 --mempolicy',
        "nested": f'{pinlab} run -c "$ONE_PER_NODE" --nested inherit -- {threads_probe} --threads 2 --nested 2',
    }
    for runtime, probe in (("gomp", gomp), ("llvm", llvm)):
        for strategy, n in (("scatter", 4), ("compact", 2)):
            name = f"{runtime}_{strategy}{n}"
            commands[name] = _with_record(pinlab, name, f"-s {strategy} -n {n}", probe)
    return commands


@pytest.fixture(scope="module", params=sorted(SHAPES))
def guest(request, numavm, pinlab_cmd):
    """All results of one boot: ``{"shape", "results": {name: VMResult}, "kernel", "chosen"}``."""
    shape = request.param
    group = numavm.Group("all", _commands(pinlab_cmd), setup=SETUP)
    results = numavm.batch([group], **SHAPES[shape])
    results.update(numavm.split_pinlab_many(results["driven"], prefix="driven."))
    setup = results["all.setup"].check("choosing CPUs from the guest's sysfs").stdout
    chosen = {}
    for line in setup.splitlines():
        key, _, value = line.partition(" ")
        chosen[key] = [int(c) for c in value.split(",") if c]
    return {"shape": shape, "results": results, "kernel": _kernel(results), "chosen": chosen}


# -- parsing ---------------------------------------------------------------------------------
def _cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part and part != "-":
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _ranges(values) -> str:
    """0,1,2,3 -> "0-3", as the kernel writes node lists in numa_maps."""
    values, parts = sorted(values), []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def _kernel(results) -> dict:
    """Node cpulists and CPU -> package, CPU -> node, as the guest's sysfs says."""
    nodes: dict[int, set[int]] = {}
    package: dict[int, int] = {}
    for line in results["kernel"].check("reading /sys").stdout.splitlines():
        words = line.split()
        if words[:1] == ["node"]:
            nodes[int(words[1])] = _cpulist(words[3] if len(words) > 3 else "")
        elif words[:1] == ["cpu"]:
            package[int(words[1])] = int(words[3])
    node_of = {cpu: n for n, cpus in nodes.items() for cpu in cpus}
    return {"nodes": nodes, "package": package, "node_of": node_of}


def _split_record(result, what: str) -> tuple[str, dict]:
    """The program's output and the parsed --record file of a _with_record command."""
    result.check(what)
    out, mark, record = result.stdout.partition(RECORD_MARK + "\n")
    assert mark, f"{what}: no record printed\n{result.stdout}\n{result.stderr}"
    try:
        return out, json.loads(record)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{what}: the record is not JSON ({exc}):\n{record}")


def _probe_lines(text: str) -> dict[int, dict[str, str]]:
    """``thread=<i> key=value ...`` lines by thread number."""
    lines = {}
    for line in text.splitlines():
        if line.startswith("thread="):
            fields = dict(word.split("=", 1) for word in line.split())
            lines[int(fields["thread"])] = fields
    return lines


def _numa_maps(text: str) -> list[dict]:
    """numa_maps lines: address, policy, and the N<node>= page counts (plus anon= etc.)."""
    maps = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or not re.fullmatch(r"[0-9a-f]+", words[0]):
            continue
        fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        nodes = {int(k[1:]): int(v) for k, v in fields.items() if re.fullmatch(r"N\d+", k)}
        maps.append({"address": words[0], "policy": words[1], "fields": fields, "nodes": nodes, "line": line})
    return maps


def _driven(guest, name: str):
    return guest["results"][f"driven.{name}"]


def _plan(guest, name: str) -> list[int]:
    result = _driven(guest, name).check(f"pinlab {name}")
    return [int(c) for c in result.stdout.strip().split(",")]


def _started_where_planned(line: dict, i: int, plan: list[int]) -> bool:
    """A probe line at a thread's first instruction: a worker on its plan CPU alone; the main
    thread (i = 0) on all the plan's CPUs (it is narrowed to its own at its first create)."""
    if i == 0:
        return _cpulist(line["mask"]) == set(plan) and int(line["cpu"]) in plan
    cpu = plan[i % len(plan)]
    return (int(line["cpu"]), line["mask"]) == (cpu, str(cpu))


def _check_record_threads(record: dict, plan: list[int], what: str) -> None:
    """The record's main thread and workers: roles, slots, planned CPUs, masks at start."""
    assert record["exit_status"] == 0, what
    pinned = [t for t in record["threads"] if t["role"] in ("main", "worker")]
    assert [t["role"] for t in pinned] == ["main"] + ["worker"] * (len(plan) - 1), f"{what}: {record['threads']}"
    assert [t["slot"] for t in pinned] == list(range(len(plan))), what
    assert [t["planned_cpu"] for t in pinned] == plan, what
    for t in pinned:
        if t["role"] == "main" and len(set(plan)) > 1:
            # the main thread starts on all the plan's CPUs, narrowed to its own at its first create
            assert t["mask_at_start"] == t["planned_start_mask"] and set(parse_cpulist(t["mask_at_start"])) == set(plan), f"{what}: thread {t}"
            assert t["cpu_at_start"] in plan and t["narrowed_to"] == t["planned_cpu"], f"{what}: thread {t}"
        else:
            assert t["mask_at_start"] == str(t["planned_cpu"]), f"{what}: thread {t}"
            assert t["cpu_at_start"] == t["planned_cpu"], f"{what}: thread {t}"
        assert t["pinned_as_planned"] is True, f"{what}: thread {t}"
    others = [t for t in record["threads"] if t not in pinned]
    assert all(t["role"] == "helper" for t in others), f"{what}: unexpected threads {others}"


# -- the chosen CPUs are what we meant ---------------------------------------------------------
def test_chosen_cpus_follow_the_guest_topology(guest):
    kernel, chosen = guest["kernel"], guest["chosen"]
    shape = SHAPES[guest["shape"]]
    assert len(kernel["nodes"]) == shape["nodes"] and len(set(kernel["package"].values())) == shape["sockets"]
    across = chosen["across"]
    assert sorted(across) == sorted(kernel["package"])
    packages = [kernel["package"][c] for c in across]
    assert packages[0] != packages[1], f"{across} does not alternate packages ({packages})"
    assert kernel["node_of"][chosen["n0"][0]] == 0 and kernel["node_of"][chosen["n1"][0]] == 1
    assert [kernel["node_of"][c] for c in chosen["one_per_node"]] == sorted(kernel["nodes"])


# -- pinning -------------------------------------------------------------------------------------
def test_threads_pinned_across_sockets_from_their_first_instruction(guest):
    kernel, plan = guest["kernel"], guest["chosen"]["across"]
    out, record = _split_record(guest["results"]["across"], "pinlab run -c ACROSS -- pinlab-threads-probe --threads 3")
    lines = _probe_lines(out)
    assert sorted(lines) == [0, 1, 2, 3], out
    for i, cpu in enumerate(plan):
        assert _started_where_planned(lines[i], i, plan), f"thread {i} started on CPU {lines[i]['cpu']} mask {lines[i]['mask']}, plan {plan}"
    assert {kernel["package"][int(lines[i]["cpu"])] for i in lines if i > 0} | {kernel["package"][plan[0]]} == set(kernel["package"].values())
    _check_record_threads(record, plan, "record of the cross-socket run")
    # the record's threads are the probe's threads (same kernel thread ids)
    by_tid = {t["tid"]: t for t in record["threads"]}
    for i, line in lines.items():
        assert by_tid[int(line["tid"])]["planned_cpu"] == plan[i]
        assert by_tid[int(line["tid"])]["index"] == i


@pytest.mark.parametrize("runtime", ["gomp", "llvm"])
@pytest.mark.parametrize("strategy,n", [("scatter", 4), ("compact", 2)])
def test_openmp_thread_i_on_plan_cpu_i(guest, runtime, strategy, n):
    kernel = guest["kernel"]
    plan = _plan(guest, f"place_{strategy}{n}")
    assert len(plan) == n
    packages = {kernel["package"][c] for c in plan}
    if strategy == "scatter":
        assert packages == set(kernel["package"].values()), f"scatter plan {plan} does not use both packages"
    else:
        assert len(packages) == 1, f"compact plan {plan} spans packages"
    what = f"pinlab run -s {strategy} -n {n} -- pinlab-probe ({runtime})"
    out, record = _split_record(guest["results"][f"{runtime}_{strategy}{n}"], what)
    lines = _probe_lines(out)
    assert sorted(lines) == list(range(n)), out
    for i, cpu in enumerate(plan):
        assert (int(lines[i]["cpu"]), lines[i]["mask"]) == (cpu, str(cpu)), f"{what}: OpenMP thread {i}: {lines[i]}, plan {plan}"
    assert record["plan"]["cpus"] == plan and record["plan"]["strategy"] == strategy
    _check_record_threads(record, plan, f"record of {what}")


# -- memory policies ---------------------------------------------------------------------------
def _expected_policy(guest, value: str | None) -> str:
    nodes = sorted(guest["kernel"]["nodes"])
    return {
        "bind:1": "bind:1",
        "interleave:all": f"interleave:{_ranges(nodes)}",
        "interleave:0,1": "interleave:0-1",
        "preferred:1": "prefer:1",
        "local": "local",
        None: "default",
        "first-touch": "default",
    }[value]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_memory_policy_is_the_kernels(guest, name):
    value = POLICIES[name]
    result = _driven(guest, f"mem_{name}").check(f"pinlab run --mem {value} -- sh -c 'cat /proc/self/numa_maps'")
    maps = _numa_maps(result.stdout)
    assert maps, f"no numa_maps lines:\n{result.stdout}"
    expected = _expected_policy(guest, value)
    wrong = [m["line"] for m in maps if m["policy"] != expected]
    assert not wrong, f"--mem {value}: expected policy {expected!r} on every mapping, got:\n" + "\n".join(wrong)


def test_bind_puts_every_touched_page_on_the_node(guest):
    kernel, cpu = guest["kernel"], guest["chosen"]["n0"][0]
    assert kernel["node_of"][cpu] == 0  # the program runs on node 0: first touch would put pages there
    out, record = _split_record(guest["results"]["bind_pages"], "pinlab run -c N0 --mem bind:1 -- python3 (allocates)")
    maps = _numa_maps(out)
    assert maps and all(m["policy"] == "bind:1" for m in maps), out
    big = [m for m in maps if sum(m["nodes"].values()) >= ALLOC_PAGES and "anon" in m["fields"]]
    assert big, f"no mapping with the {ALLOC_MIB} MiB the program touched:\n{out}"
    for mapping in big:
        assert set(mapping["nodes"]) == {1}, f"pages of the bound allocation outside node 1: {mapping['line']}"
    # the record counts the pages per node at exit (the allocation is never freed)
    assert record["exit_status"] == 0
    pages = record["pages_per_node"]
    assert pages is not None, "no pages_per_node in the record of a program that exited normally"
    assert pages.get("1", 0) >= ALLOC_PAGES, pages
    main = [t for t in record["threads"] if t["role"] == "main"]
    assert len(main) == 1 and main[0]["mask_at_start"] == str(cpu) and main[0]["cpu_at_start"] == cpu


def test_follow_binds_each_thread_to_its_cpus_node(guest):
    kernel, chosen = guest["kernel"], guest["chosen"]
    plan = chosen["n0"] + chosen["n1"]
    result = guest["results"]["follow"].check("pinlab run --mem follow -- pinlab-threads-probe --mempolicy")
    lines = _probe_lines(result.stdout)
    assert sorted(lines) == [0, 1], result.stdout
    for i, cpu in enumerate(plan):
        node = kernel["node_of"][cpu]
        assert _started_where_planned(lines[i], i, plan), lines[i]
        assert int(lines[i]["policy"]) == MPOL_BIND, f"thread {i}: policy {lines[i]['policy']}, expected MPOL_BIND"
        assert lines[i]["nodes"] == str(node), f"thread {i} on CPU {cpu}: memory nodes {lines[i]['nodes']}, expected {node}"
    assert [lines[i]["nodes"] for i in (0, 1)] == ["0", "1"]


def test_nested_threads_stay_in_their_creators_node(guest):
    kernel, plan = guest["kernel"], guest["chosen"]["one_per_node"]
    result = guest["results"]["nested"].check("pinlab run --nested inherit -- pinlab-threads-probe --threads 2 --nested 2")
    lines = _probe_lines(result.stdout)
    assert sorted(lines) == list(range(1 + 2 + 2 * 2)), result.stdout
    for i in (0, 1, 2):  # main and its two workers: plan slots 0, 1, 2 (wrapping)
        assert _started_where_planned(lines[i], i, plan), lines[i]
    for i, line in lines.items():
        parent = int(line["parent"])
        if parent < 1:
            continue
        creator_node = kernel["node_of"][int(lines[parent]["cpu"])]
        node_cpus = kernel["nodes"][creator_node]
        mask = _cpulist(line["mask"])
        assert len(mask) == 1, f"nested thread {i} is not pinned to one CPU: {line}"
        assert mask <= node_cpus and int(line["cpu"]) in node_cpus, (
            f"nested thread {i} (created by thread {parent} on node {creator_node}, CPUs {_ranges(node_cpus)}) "
            f"started on CPU {line['cpu']} with mask {line['mask']}"
        )
