"""``pinlab autopin --migrate-pages`` on a real 2-node kernel: the emulated NUMA machine of tests/vm/numavm.

One boot of the ``2s2n`` guest (2 sockets, 2 NUMA nodes, 4 CPUs) per run. In the guest, A is the first
CPU of node 0 and B the first of node 1 (from sysfs). ``spinner --mem 64`` (tests/autopin/spinner.c,
compiled here; the guest sees this file system) first touches 64 MiB on its main thread, which
autopin starts on A, the first candidate: the pages are on node 0. A ``sh`` busy loop pinned to A
takes half of that CPU, so autopin chooses B (as tests/autopin proves on this machine; when the
host, busy with the rest of the suite, starves the guest so that the co-runner takes nothing and
the probes cannot tell A from B, A may be kept, and the pages must then be on A's node). The metric is
``task-clock``: the guest's own share of CPU time halves on A whatever the load on the host, while
the work a thread does per second (the heartbeat) also depends on how the host shares its CPUs
among the guest's virtual CPUs.

The guest kernel may place a few pages of a node-0 thread's first touch on node 1 (fallback when
node 0 is short of free pages; its 1 GiB also holds the guest's page cache): the checks on the
64 MiB mapping ask for at least 99 % of its pages on the expected node.

Two runs, one after the other:

- ``--migrate-pages process``: after the re-pin to B the log has a ``migrate`` event from node 0
  to node 1 whose page counts (the kernel's numa_maps before and after) show the 64 MiB moved;
  the warm-up of B is counted from the end of the migration; while the program runs on its
  choice, the kernel's ``/proc/PID/numa_maps`` shows the 64 MiB on the chosen CPU's node;
- ``--migrate-pages off``: no ``migrate`` event, and the 64 MiB stay on node 0 wherever the
  thread runs;
- ``--migrate-pages attached`` (spinner also allocates 16 MiB with libpinlab-mem, attached to its
  main thread): after the re-pin to B a ``migrate_attached`` event moved those 16 MiB, and while
  the program runs on B they are on node 1 and the 64 MiB it did not attach still on node 0.

The guest's automatic NUMA balancing is switched off first so that only pinlab moves pages
(spinner never reads its memory again, so the balancer would not move it anyway; this removes
the doubt).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import PINLAB
from tests.memory import mem_expect
from tests.vm.conftest import marked_sections

pytestmark = pytest.mark.vm

SHAPE = {"nodes": 2, "sockets": 2, "cpus": 4}
MEM_MIB = 64
MEM_PAGES = MEM_MIB * 1024 // 4  # numa_maps' N<node>= counts are 4 KiB pages (huge pages counted in them)
WARMUP, INTERVAL = 0.3, 0.6
#: spinner must have touched its 64 MiB on A before the probing moves it: 1.6 s to 5 s in the guest
#: beside the co-runner (software emulation, host load), and 97% of it after 15 s in a make test-busy
#: run with the rest of the suite beside it, so a longer initialisation than on a real machine. It
#: costs little: the choice waits anyway for the verdict's import of scipy (below).
INIT = 30.0
#: Share of the 64 MiB mapping's pages that must be on the expected node (see the module's docstring).
MOST = 0.99
#: An upper bound on spinner's run: the guest ends it (SIGTERM) once the kernel's view of it on its
#: choice is read. Under software emulation the choice comes about a minute after the start: the
#: verdict's first import of scipy (pinlab.stats) alone takes 30 s or more in the guest.
SECONDS = 400
MODES = ("process", "off", "attached")
#: --migrate-pages attached: spinner also allocates this many MiB with libpinlab-mem, attached to its
#: main thread; only those move with it.
ATTACHED_MIB = 16

SETUP = r"""
first_cpu() { sed 's/[,-].*//' /sys/devices/system/node/node$1/cpulist; }
A=$(first_cpu 0)
B=$(first_cpu 1)
R=$(mktemp -d)
export A B R
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
echo "a $A"
echo "b $B"
echo "numa_balancing $(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)"
"""

# One autopin run with a co-runner on A. When the log shows the choice, the kernel's view of the
# program (numa_maps, the main thread's affinity and last CPU) is taken while it still runs.
# Sections of the output are separated by "@@<name>@@" lines.
RUN = r"""
taskset -c "$A" sh -c 'while :; do :; done' &
CO=$!
LOG=$R/{mode}.jsonl
{pinlab} autopin -C "$A;$B" --migrate-pages {mode} --metric task-clock -i {init} -W {warmup} -T {interval} --log "$LOG" \
    -- {spinner} --threads 1 --seconds {seconds} --mem {mem} {extra} >"$R/{mode}.out" 2>"$R/{mode}.err" &
AP=$!
i=0
until grep -q '"event": "start"' "$LOG" 2>/dev/null || [ $i -ge 1500 ]; do sleep 0.2; i=$((i + 1)); done
PID=$(sed -n 's/^{{"event": "start".*"pid": \([0-9]*\).*/\1/p' "$LOG")
echo "@@numa_maps_at_start@@"; cat "/proc/$PID/numa_maps"
until grep -q '"event": "choice"' "$LOG" 2>/dev/null || [ $i -ge 1500 ]; do sleep 0.2; i=$((i + 1)); done
echo "@@pid@@"; echo "$PID"
echo "@@affinity@@"; grep Cpus_allowed_list "/proc/$PID/status"
echo "@@cpu@@"; awk '{{print $39}}' "/proc/$PID/stat"
echo "@@numa_maps@@"; cat "/proc/$PID/numa_maps"
kill -TERM "$PID"
wait $AP
RC=$?
kill $CO
echo "@@rc@@"; echo $RC
echo "@@stdout@@"; cat "$R/{mode}.out"
echo "@@stderr@@"; cat "$R/{mode}.err"
echo "@@log@@"; cat "$LOG"
"""


@pytest.fixture(scope="module")
def spinner(tmp_path_factory) -> str:
    """tests/autopin/spinner.c built here, in a directory the guest sees (its root is ours, read-only)."""
    out = tmp_path_factory.mktemp("vm-spinner") / "spinner"
    source = Path(__file__).resolve().parent.parent / "autopin" / "spinner.c"
    mem_expect.build(str(PINLAB), out, source)  # with libpinlab-mem, for --attached
    return str(out)


@pytest.fixture(scope="module")
def guest(numavm, pinlab_cmd, spinner):
    """One boot a run (the three in one boot took 320 s on a quiet host, 662 s on a busy one, of
    the 900 s timeout): ``{"chosen": {a, b, ...}, "runs": {mode: parsed run}}``."""
    commands = {
        mode: RUN.format(
            mode=mode,
            pinlab=pinlab_cmd,
            spinner=shlex.quote(spinner),
            init=INIT,
            warmup=WARMUP,
            interval=INTERVAL,
            seconds=SECONDS,
            mem=MEM_MIB,
            extra=f"--attached {ATTACHED_MIB}" if mode == "attached" else "",
        )
        for mode in MODES
    }
    results = {}
    for mode in MODES:
        results.update(numavm.batch([numavm.Group(f"autopin_{mode}", {mode: commands[mode]}, setup=SETUP, parallel=False)], **SHAPE))
    chosen = {}
    for line in results[f"autopin_{MODES[0]}.setup"].check("choosing CPUs from the guest's sysfs").stdout.splitlines():
        key, _, value = line.partition(" ")
        chosen[key] = value
    return {"chosen": chosen, "runs": {mode: _parse_run(results[mode].check(f"autopin --migrate-pages {mode}").stdout) for mode in MODES}}


# -- parsing ---------------------------------------------------------------------------------
def _parse_run(text: str) -> dict:
    sections = marked_sections(text)
    joined = {k: "\n".join(v) for k, v in sections.items()}
    log = [json.loads(line) for line in sections.get("log", []) if line.strip()]
    return {**joined, "events": log, "text": text}


def _of(run: dict, kind: str) -> list[dict]:
    return [e for e in run["events"] if e["event"] == kind]


def _big_mappings(numa_maps: str) -> list[dict[int, int]]:
    """Pages per node of each anonymous mapping holding most of the MiB spinner touched (pages
    the kernel is moving at the moment numa_maps is read are counted on no node: a look taken
    while autopin moved them saw 15873 of 16384)."""
    found = []
    for line in numa_maps.splitlines():
        words = line.split()
        if not words or not re.fullmatch(r"[0-9a-f]+", words[0]) or "anon=" not in line:
            continue
        nodes = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"\bN(\d+)=(\d+)", line)}
        if sum(nodes.values()) >= MEM_PAGES * 3 // 4:
            found.append(nodes)
    return found


def _cpu_ab(guest) -> tuple[int, int]:
    return int(guest["chosen"]["a"]), int(guest["chosen"]["b"])


def _ended_by_the_test(run: dict, what: str) -> None:
    """spinner ran past the choice until the guest sent it SIGTERM; autopin ended with its status."""
    summary = _of(run, "summary")
    assert summary, f"{what}: no summary in the log\n{run['text']}"
    assert not summary[0]["ended_during_probing"], f"{what}: spinner ended before the choice; raise SECONDS\n{run['text']}"
    assert summary[0]["signal"] == 15 and run.get("rc") == str(128 + 15), f"{what}: {summary}, exit status {run.get('rc')}\n{run['text']}"


def _mostly_on(nodes: dict[int, int], node: int) -> bool:
    return nodes.get(node, 0) >= MOST * sum(nodes.values())


def _touched_on_node_0(run: dict, what: str) -> None:
    """When the probing began, the kernel showed spinner's 64 MiB touched, on node 0."""
    assert _of(run, "start")[0]["metric"] == "task-clock"
    big = _big_mappings(run["numa_maps_at_start"])
    assert big, f"{what}: spinner had not touched its {MEM_MIB} MiB within -i {INIT}\n{run['numa_maps_at_start']}"
    if all(_mostly_on(nodes, 0) for nodes in big):
        return
    # Under load the guest may read numa_maps only after autopin has moved the thread to B and
    # begun moving its pages (--migrate-pages process; seen in a full-suite run): the move's own
    # count of where the process's pages were is then the view at the start.
    # (the count is of the whole process: its libraries' pages may be anywhere; the 64 MiB's worth must be on node 0)
    moves = _of(run, "migrate")
    before = {int(k): v for k, v in moves[0]["pages_before"].items()} if moves else {}
    assert before.get(0, 0) >= MOST * (MEM_MIB << 20) // os.sysconf("SC_PAGE_SIZE"), (
        f"{what}: at the start the {MEM_MIB} MiB are not on node 0: {big} (moves: {moves})"
    )


def _chosen_node(guest, run: dict, what: str) -> int:
    """The node of the CPU autopin left the thread on: B's (1), as the co-runner on A makes it;
    or A's (0) only when the probes could not tell A and B apart (a co-runner that got no CPU
    time while the host, busy with the rest of the suite, starved the guest), never decided."""
    a, b = _cpu_ab(guest)
    choice = _of(run, "choice")
    assert choice, f"{what}: no choice in the log\n{run['text']}"
    cpus = choice[0]["cpus"]
    if cpus != [b]:
        assert cpus == [a] and not choice[0]["decided"], f"{what}: chose {cpus}, not B = {b} (the co-runner loads A = {a})\n{run['text']}"
    cpu = cpus[0]
    # the kernel's view when numa_maps was read: the main thread may run on the choice only, and last ran there
    assert run["affinity"].split() == ["Cpus_allowed_list:", str(cpu)], run["text"]
    assert run["cpu"].strip() == str(cpu), run["text"]
    return 0 if cpu == a else 1


# -- the tests -------------------------------------------------------------------------------
def test_guest_cpus_are_on_two_nodes(guest):
    a, b = _cpu_ab(guest)
    assert a != b
    assert guest["chosen"]["numa_balancing"] in ("0", "absent"), guest["chosen"]


def test_pages_follow_the_thread_to_node_1(guest):
    run = guest["runs"]["process"]
    what = "autopin --migrate-pages process"
    _ended_by_the_test(run, what)
    _touched_on_node_0(run, what)
    a, b = _cpu_ab(guest)
    start = _of(run, "start")[0]
    assert start["params"]["migrate_pages"] == "process"
    probes = _of(run, "probe")
    assert [p["cpus"] for p in probes[:2]] == [[a], [b]], run["text"]
    probe_b = probes[1]
    moves = _of(run, "migrate")
    chosen = _chosen_node(guest, run, what)
    # one migration, to B; back to A's node as well when A was kept
    assert len(moves) == (1 if chosen == 1 else 2), f"{what}: {len(moves)} migrations\n{run['text']}"
    if chosen == 0:
        assert (moves[1]["from_nodes"], moves[1]["to_nodes"]) == ([1], [0]), moves
    move = moves[0]
    assert (move["from_nodes"], move["to_nodes"]) == ([0], [1])
    before = {int(n): p for n, p in move["pages_before"].items()}
    after = {int(n): p for n, p in move["pages_after"].items()}
    assert before.get(0, 0) >= MOST * MEM_PAGES and before[0] > sum(p for n, p in before.items() if n != 0), move
    assert after.get(1, 0) >= MEM_PAGES and after.get(1, 0) > after.get(0, 0), move
    assert before[0] - after.get(0, 0) >= MOST * MEM_PAGES, f"fewer than {MEM_MIB} MiB left node 0: {move}"
    assert move["seconds"] > 0 and move["not_moved"] >= 0
    # order: re-pin to B, then the migration, then the warm-up of w seconds, then B's window
    assert probes[0]["end"] <= probe_b["repinned_at"] <= move["t"] - move["seconds"] + 1e-5, (probes[0], move, probe_b)
    assert probe_b["start"] - move["t"] >= WARMUP - 1e-5, (
        f"B's window began {probe_b['start'] - move['t']:.3f} s after the migration ended, warm-up {WARMUP}"
    )
    big = _big_mappings(run["numa_maps"])
    assert big, f"no mapping with {MEM_MIB} MiB in the program's numa_maps\n{run['numa_maps']}"
    for nodes in big:
        assert _mostly_on(nodes, chosen), f"the {MEM_MIB} MiB are not on node {chosen} while the program runs there: {nodes}"
    assert "moved pages from nodes 0 to 1" in run["stderr"], run["stderr"]


def _run_without_process_moves(guest, mode: str) -> tuple[dict, str]:
    """The run of ``--migrate-pages mode``, checked as far as every such run goes: ended by the
    test, touched on node 0, no whole-process migration."""
    run = guest["runs"][mode]
    what = f"autopin --migrate-pages {mode}"
    _ended_by_the_test(run, what)
    _touched_on_node_0(run, what)
    assert _of(run, "start")[0]["params"]["migrate_pages"] == mode
    assert not _of(run, "migrate"), run["text"]
    return run, what


def test_without_migration_the_pages_stay_on_node_0(guest):
    run, what = _run_without_process_moves(guest, "off")
    _chosen_node(guest, run, what)
    big = _big_mappings(run["numa_maps"])
    assert big, f"no mapping with {MEM_MIB} MiB in the program's numa_maps\n{run['numa_maps']}"
    for nodes in big:
        assert _mostly_on(nodes, 0), f"without --migrate-pages the {MEM_MIB} MiB moved off node 0: {nodes}"


def test_attached_data_follows_its_thread_and_nothing_else_moves(guest):
    run, what = _run_without_process_moves(guest, "attached")
    moves = _of(run, "migrate_attached")
    assert moves, f"{what}: no migrate_attached event\n{run['text']}"
    pages = ATTACHED_MIB * 1024 // 4
    first = moves[0]
    assert first["regions"] == 1 and first["bytes"] == ATTACHED_MIB << 20 and first["pages_on_node"] >= MOST * pages, first
    chosen = _chosen_node(guest, run, what)
    address = re.search(r"spinner attached=0x([0-9a-f]+)", run["stdout"])
    assert address, run["stdout"]
    line = next((x for x in run["numa_maps"].splitlines() if x.split()[:1] == [address.group(1)]), None)
    assert line is not None, f"the attached region is not in numa_maps\n{run['numa_maps']}"
    nodes = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"\bN(\d+)=(\d+)", line)}
    assert _mostly_on(nodes, chosen), f"the attached {ATTACHED_MIB} MiB did not follow the thread to node {chosen}: {nodes}"
    big = _big_mappings(run["numa_maps"])
    assert big and all(_mostly_on(n, 0) for n in big), f"the {MEM_MIB} MiB that were not attached moved: {big}"
    assert f"moved 1 attached regions ({ATTACHED_MIB}.0 MiB) with their threads" in run["stderr"], run["stderr"]
