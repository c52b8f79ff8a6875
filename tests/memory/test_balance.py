"""pinlab run --balance: which node steals which threads (on synthetic nodes), and a real program
whose idle CPU steals from an overloaded one; the published attachment table, read from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pinlab.errors import UsageError
from pinlab.launch import plan_spec
from pinlab.launch.runner import run
from pinlab.measure import linux
from pinlab.memory.accessed import majority_pages
from pinlab.memory.attached import AttachTable, read_attachments
from pinlab.memory.balance import BUSY_SHARE, Balancer, Steal, members_by_node, plan_steals
from tests.conftest import PINLAB
from tests.memory import mem_expect

MiB = 1 << 20


def thread(tid, cpu, index):
    return SimpleNamespace(tid=tid, mask=frozenset({cpu}), index=index)


def test_an_idle_node_takes_half_the_busy_threads_of_the_overloaded_node_last_created_first():
    nodes = {0: [0, 1], 1: [2, 3]}
    threads = [thread(100 + i, i % 2, i) for i in range(6)]  # six busy threads on node 0's two CPUs
    members = members_by_node(nodes, threads)
    assert [t.tid for t in members[0]] == [100, 101, 102, 103, 104, 105] and members[1] == []
    plans = plan_steals(nodes, members, {t.tid: 1.0 for t in threads}, {}, [1])
    assert len(plans) == 1
    assert (plans[0].victim, plans[0].thief) == (0, 1)
    # half of six is three, but node 1 has two CPUs: the last two created
    assert [t.tid for t in plans[0].threads] == [104, 105]


def test_nothing_is_stolen_from_a_node_with_no_more_busy_threads_than_cpus():
    nodes = {0: [0, 1], 1: [2, 3]}
    threads = [thread(1, 0, 0), thread(2, 1, 1), thread(3, 1, 2)]
    use = {1: 1.0, 2: 1.0, 3: BUSY_SHARE / 2}  # the third one mostly waits: two busy on two CPUs
    assert plan_steals(nodes, members_by_node(nodes, threads), use, {}, [1]) == []


def test_of_several_overloaded_nodes_the_one_with_least_attached_data_is_robbed_then_the_busiest():
    nodes = {0: [0], 1: [1], 2: [2], 3: [3]}
    threads = [thread(10, 0, 0), thread(11, 0, 1), thread(20, 1, 2), thread(21, 1, 3), thread(22, 1, 4), thread(30, 3, 5)]
    use = {t.tid: 1.0 for t in threads}
    members = members_by_node(nodes, threads)
    heavy_first = {10: 64 * MiB, 11: 64 * MiB, 20: 4 * MiB, 21: 4 * MiB}
    plan = plan_steals(nodes, members, use, heavy_first, [2])[0]
    assert plan.victim == 1 and [t.tid for t in plan.threads] == [22] and "least attached data (8.0 MiB)" in plan.why
    # no data anywhere: node 1 has the most busy threads waiting
    assert plan_steals(nodes, members, use, {}, [2])[0].victim == 1
    # two idle nodes in one look: the second one robs the other overloaded node, not the same one again
    two = plan_steals({**nodes, 4: [4]}, {**members, 4: []}, use, heavy_first, [2, 4])
    assert [(p.victim, p.thief) for p in two] == [(1, 2), (0, 4)]


def test_threads_free_to_run_on_several_nodes_belong_to_none():
    nodes = {0: [0, 1], 1: [2, 3]}
    free = SimpleNamespace(tid=5, mask=frozenset({1, 2}), index=0)
    elsewhere = SimpleNamespace(tid=6, mask=frozenset({9}), index=1)
    assert members_by_node(nodes, [free, elsewhere]) == {0: [], 1: []}


@pytest.fixture(scope="module")
def balance_check(tmp_path_factory):
    return str(mem_expect.build(str(PINLAB), tmp_path_factory.mktemp("balance") / "balance_check", mem_expect.SOURCE.with_name("balance_check.c")))


def two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to play two nodes")
    return cpus[0], cpus[1]


@pytest.mark.parametrize("attach", [False, True], ids=["threads-only", "attached"])
def test_an_idle_cpu_group_steals_a_thread_of_the_overloaded_one(balance_check, monkeypatch, capfd, attach):
    """Two CPUs play two nodes: four workers share the first, one short worker has the second;
    once it has ended, the second steals the last-created busy worker, with its data's record."""
    a, b = two_cpus()
    monkeypatch.setattr(linux, "numa_nodes", lambda: {0: frozenset({a}), 1: frozenset({b})})
    argv = [balance_check, *([] if attach else ["--no-attach"]), "1.2:4", "1.2:4", "1.2:4", "1.2:4", "0.1:2"]
    spec = plan_spec(argv, cpus=[a, a, a, a, a, b], oversubscribe=True, balance=0.1)
    record = run(spec)
    workers = {w["worker"]: w for w in mem_expect.parse(capfd.readouterr().out)}
    assert record.exit_status == 0 and all(w["ok"] for w in workers.values()), workers
    assert record.options["balance"] == 0.1 and record.balance, record.balance
    first = record.balance[0]
    assert (first["from_node"], first["to_node"]) == (0, 1)
    assert first["tids"] == [workers[3]["tid"]] and first["cpus"] == [b], (first, workers)
    # Later steals may follow, either way (on a busy machine the workers' pace varies: the first CPU
    # may fall idle and steal back). Each long worker ends on the CPU of the last steal that took it,
    # or where it was planned. A steal decided in the last moments may come as the worker passes its
    # last barrier and reads its CPU (the last worker is still counted busy): such a worker may be
    # read on either CPU.
    cpu_of_node = {0: a, 1: b}
    last_steal = {tid: steal for steal in record.balance for tid in steal["tids"]}
    assert first["at"] < record.wall_seconds - 1.0  # the first steal comes long before the end
    for i, w in workers.items():
        steal = last_steal.get(w["tid"])
        if i < 4 and (steal is None or steal["at"] < record.wall_seconds - 1.0):
            expected = a if steal is None else cpu_of_node[steal["to_node"]]
            assert w["end_cpu"] == expected, (i, record.wall_seconds, record.balance, workers)
    assert first["at"] > 0.1 and "4 busy threads on 1 CPU" in first["why"]
    if attach:
        # 4 MiB attached; "node 1" is a CPU of this machine's only node: the pages cannot go there
        # and the record says so instead of claiming a move
        assert first["attached_bytes"] == 4 * MiB
        assert first["pages_moved"] + first["pages_left"] == 4 * MiB // os.sysconf("SC_PAGE_SIZE")
    else:
        assert first["attached_bytes"] == 0 and first["pages_moved"] == first["pages_left"] == 0


def test_one_node_balances_nothing_and_says_so(balance_check, capfd):
    a, _ = two_cpus() if len(os.sched_getaffinity(0)) > 1 else (min(os.sched_getaffinity(0)), None)
    nodes = linux.numa_nodes()
    node_of_a = next(n for n, cpus in nodes.items() if a in cpus)
    record = run(plan_spec([balance_check, "0.1:1"], cpus=sorted(nodes[node_of_a] & os.sched_getaffinity(0)), balance=True))
    assert record.exit_status == 0 and record.balance == []
    assert "--balance had nothing to do: the placement uses one NUMA node" in record.warnings


def test_balance_needs_pinned_threads_and_a_sane_interval():
    for unpinned in ({}, {"strategy": "none", "threads": 1}, {"strategy": "autonuma", "threads": 1}):
        with pytest.raises(UsageError, match="--balance moves pinned threads between NUMA nodes: it needs a pinned placement"):
            plan_spec(["true"], balance=True, **unpinned)
    with pytest.raises(UsageError, match="--balance-interval must be between 0.01 and 3600 seconds"):
        plan_spec(["true"], strategy="compact", threads=1, balance=0.0)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--balance", "--", "true"], "--balance moves pinned threads between NUMA nodes: it needs a pinned placement"),
        (
            ["--balance-interval", "1", "-s", "compact", "-n", "1", "--", "true"],
            "--balance-interval sets how often --balance looks: give --balance too",
        ),
        (
            ["--balance", "--balance-interval", "-1", "-s", "compact", "-n", "1", "--", "true"],
            "--balance-interval must be between 0.01 and 3600 seconds",
        ),
    ],
)
def test_bad_balance_options_are_one_line_and_exit_2(args, message):
    out = subprocess.run([str(PINLAB), "run", *args], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == f"pinlab: error: {message}" + out.stderr.strip().split(message, 1)[1]
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_the_attachment_table_follows_the_programs_regions(balance_check, tmp_path):
    """A program's regions and attachments, read from outside while it runs, then gone after pm_free."""
    with AttachTable(str(tmp_path)) as table:
        program = subprocess.Popen([balance_check, "0.6:3", "0.6:5"], env={**os.environ, **table.env()}, stdout=subprocess.PIPE, text=True)
        try:
            seen = []
            for _ in range(200):
                seen = table.read()
                if len(seen) == 2:
                    break
                time.sleep(0.01)
            assert table.claimed_by() == program.pid
            assert sorted(a.size for a in seen) == [3 * MiB, 5 * MiB] and all(a.tid not in (0, program.pid) for a in seen)
            tids = {a.tid for a in seen}
            assert len(tids) == 2 and all(os.path.exists(f"/proc/{program.pid}/task/{tid}") for tid in tids)
        finally:
            out, _ = program.communicate(timeout=60)
        reported = {json.loads(line)["tid"] for line in out.splitlines()}
        assert reported == tids
        assert read_attachments(table.path) == []  # pm_free unpublished both
    assert not table.path.exists()


def test_a_table_claimed_by_one_process_is_left_alone_by_the_next(balance_check, tmp_path):
    with AttachTable(str(tmp_path)) as table:
        env = {**os.environ, **table.env()}
        first = subprocess.run([balance_check, "0.05:1"], env=env, capture_output=True, text=True)
        claimed = table.claimed_by()
        second = subprocess.run([balance_check, "0.05:1"], env=env, capture_output=True, text=True)
        assert first.returncode == second.returncode == 0
        assert claimed > 0 and table.claimed_by() == claimed


def test_a_page_belongs_to_the_thread_that_touched_it_first_in_most_rounds():
    page = os.sysconf("SC_PAGE_SIZE")
    tids = np.array([7, 8, 7, 8, 9, 7])
    pages = np.array([100, 100, 101, 101, 102, 103])
    counts = np.array([3, 1, 2, 2, 5, 1])
    held = majority_pages(tids, pages, counts, [7, 8, 9, 10])
    # page 100: 3 of 4 rounds to 7; page 101: a tie, nobody's; page 102: 9's alone; 103: 7's alone
    assert held == {7: [100 * page, 103 * page], 8: [], 9: [102 * page], 10: []}
    assert majority_pages(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64), [7]) == {7: []}


def test_without_attached_data_the_page_tracer_finds_what_a_stolen_thread_accessed(balance_check, monkeypatch, capfd):
    """--balance-data accessed: the program attaches nothing; the tracer saw the stolen worker's 4 MiB
    as its own, and those are the pages the steal tries to move (to a "node" this one-node machine does not
    have: the record says they could not move)."""
    a, b = two_cpus()
    monkeypatch.setattr(linux, "numa_nodes", lambda: {0: frozenset({a}), 1: frozenset({b})})
    argv = [balance_check, "--no-attach", "1.2:4", "1.2:4", "1.2:4", "1.2:4", "0.1:2"]
    record = run(plan_spec(argv, cpus=[a, a, a, a, a, b], oversubscribe=True, balance=0.1, balance_data="accessed"))
    workers = {w["worker"]: w for w in mem_expect.parse(capfd.readouterr().out)}
    assert record.exit_status == 0 and all(w["ok"] for w in workers.values()), (workers, record.warnings)
    assert record.options["balance_data"] == "accessed"
    first = record.balance[0]
    # the steal takes the last created of the threads busy at its look: worker 3, unless the
    # tracer's faults had it waiting then (seen under load 16: worker 2 went); each has 4 MiB
    assert len(first["tids"]) == 1 and first["tids"][0] in {workers[i]["tid"] for i in range(4)} and first["attached_bytes"] == 0, first
    chunk = 4 * MiB // os.sysconf("SC_PAGE_SIZE")
    assert 0.9 * chunk <= first["accessed_pages"] <= chunk, first
    assert first["pages_moved"] + first["pages_left"] == first["accessed_pages"]


def test_balance_data_needs_balance_and_a_known_word():
    with pytest.raises(UsageError, match="--balance-data says what moves with the threads --balance steals: give --balance too"):
        plan_spec(["true"], strategy="compact", threads=1, balance_data="accessed")
    with pytest.raises(UsageError, match="unknown --balance-data 'everything': use attached or accessed"):
        plan_spec(["true"], strategy="compact", threads=1, balance=True, balance_data="everything")


def test_the_page_tracer_pauses_its_rounds_when_asked_and_counts_while_the_program_runs(balance_check, tmp_path):
    """The live counts grow while the program runs; a pause is answered within a few periods (the
    tracer gives every page its access back), and a tracer that is gone leaves the answer False."""
    from pinlab.memory.accessed import PageTracker

    with PageTracker(period_ms=5) as tracker:
        env = tracker.env(dict(os.environ))
        program = subprocess.Popen([balance_check, "--no-attach", "1.5:4"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            seen = 0
            for _ in range(300):
                tids, pages, counts = tracker.counts()
                seen = len(set(pages.tolist()))
                if seen >= 512:
                    break
                time.sleep(0.01)
            assert seen >= 512, seen  # half of the worker's 4 MiB seen while it runs
            with tracker.paused() as answered:
                assert answered
            with tracker.paused() as again:
                assert again
        finally:
            out, _ = program.communicate(timeout=60)
        assert program.returncode == 0 and json.loads(out.splitlines()[-1])["ok"] is True
        with tracker.paused(timeout=0.2) as answered:
            assert answered is False


def test_a_program_that_ends_while_its_data_moves_leaves_nothing_behind():
    """The program may end during a steal's move (seen in the emulated NUMA machine, where moving
    16 MiB takes longer than the workers had left): the rest of its data went with it, so none
    is called left behind, and the line says why the move stopped."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = int(child.stdout)
    balancer = Balancer(nodes={0: [0], 1: [1]})
    balancer.pid = gone
    steal = Steal(at=1.0, from_node=0, to_node=1, tids=[7], cpus=[1], attached_bytes=MiB, why="4 busy threads on 1 CPU")
    balancer._move_data(steal, [SimpleNamespace(tid=7, start=0x10000000, size=MiB)])
    assert steal.program_ended and steal.pages_moved == steal.pages_left == 0 and steal.errors == {}
    assert steal.to_json()["program_ended"] is True
    assert steal.text().endswith("moved their 1.0 MiB of attached data (0 pages on node 1; the program ended meanwhile)")


def _pages(count):
    """``count`` pages of this process, written, and their page-aligned addresses."""
    import mmap

    buffer = mmap.mmap(-1, count * mmap.PAGESIZE)
    buffer.write(b"x" * len(buffer))
    import ctypes

    start = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    return buffer, start


def test_a_steal_counts_per_thread_and_per_call_what_the_kernel_moved_and_what_it_refused(monkeypatch):
    """One stolen thread's move is refused by the kernel (EFAULT for its whole call), the other's
    goes through: the steal does not claim the refused pages, it names them, per thread."""
    from pinlab.memory import migrate

    buffer, start = _pages(8)
    page = os.sysconf("SC_PAGE_SIZE")
    real = migrate.move_pages

    def refusing(pid, address, size, node, attempts=3, why=None):
        if address >= start + 4 * page:
            raise OSError(14, "Bad address")
        return real(pid, address, size, node, attempts, why)

    monkeypatch.setattr(migrate, "move_pages", refusing)
    node = min(linux.numa_nodes())
    balancer = Balancer(nodes={node: [0], node + 1: [1]})
    balancer.pid = os.getpid()
    steal = Steal(at=1.0, from_node=node + 1, to_node=node, tids=[11, 12], cpus=[0, 0], attached_bytes=8 * page, why="test")
    balancer._move_data(steal, [SimpleNamespace(tid=11, start=start, size=4 * page), SimpleNamespace(tid=12, start=start + 4 * page, size=4 * page)])
    assert steal.per_thread == {11: {"pages_moved": 4, "pages_left": 0}, 12: {"pages_moved": 0, "pages_left": 4}}
    assert (steal.pages_moved, steal.pages_left, steal.errors) == (4, 4, {"EFAULT": 4})
    assert "moved part of their" in steal.text() and "4 could not move: 4 EFAULT" in steal.text()
    assert steal.to_json()["per_thread"] == {"11": {"pages_moved": 4, "pages_left": 0}, "12": {"pages_moved": 0, "pages_left": 4}}
    buffer.close()


def test_a_page_the_kernel_will_not_find_though_it_is_there_is_left_not_ignored(monkeypatch):
    """Before Linux 6.5 move_pages answers EFAULT for a page mapped PROT_NONE (next touch, the
    page tracer): such a page is there (its page table says so) and did not move."""
    from collections import Counter

    from pinlab.memory import migrate

    buffer, start = _pages(4)
    page = os.sysconf("SC_PAGE_SIZE")
    untouched = __import__("mmap").mmap(-1, 2 * page)
    blank = __import__("ctypes").addressof(__import__("ctypes").c_char.from_buffer(untouched))
    answers = {start + i * page: -14 for i in range(2)}  # what a 6.1 kernel answers for two resident PROT_NONE pages
    answers.update({blank: -14, blank + page: -2})  # and for pages never touched

    def kernel(pid, addresses, node):
        return [answers.get(a, node) for a in addresses]

    class Libc:
        @staticmethod
        def syscall(number, pid, count, pages, nodes, status, flags):
            for i, answer in enumerate(kernel(pid.value, [pages[i] for i in range(count.value)], nodes[0] if nodes else None)):
                status[i] = answer if nodes or answer < 0 else 0
            return 0

    monkeypatch.setattr(migrate, "_syscall", lambda name, numbers: (Libc, 0))
    why = Counter()
    addresses = [start + i * page for i in range(4)] + [blank, blank + page]
    assert migrate.move_page_list(os.getpid(), addresses, 0, why=why) == (2, 2)
    assert why == {"EFAULT": 2}, "the two resident pages are left with the kernel's reason; the untouched ones count nowhere"
    buffer.close()
    untouched.close()


def test_a_steal_moves_its_data_beside_the_wait_loop_which_goes_on(monkeypatch):
    """The move of a steal's data runs in a thread of pinlab's: the look that steals returns at
    once (the wait loop goes on sampling), the record waits for the move's own counts."""
    import threading

    from pinlab.memory import migrate
    from pinlab.memory.balance import StealPlan

    release, moved = threading.Event(), threading.Event()

    def slow(pid, address, size, node, attempts=3, why=None):
        release.wait(300)
        moved.set()
        return size // os.sysconf("SC_PAGE_SIZE"), 0

    monkeypatch.setattr(migrate, "move_pages", slow)
    stop = threading.Event()
    victim = threading.Thread(target=stop.wait)
    victim.start()
    cpu = min(os.sched_getaffinity(0))
    said = []
    balancer = Balancer(nodes={0: [cpu], 1: [cpu]}, say=said.append)
    balancer.pid, balancer.started_at = os.getpid(), time.monotonic()
    plan = StealPlan(victim=0, thief=1, threads=[SimpleNamespace(tid=victim.native_id, index=1)], why="test")
    balancer._steal(plan, [SimpleNamespace(tid=victim.native_id, start=0x10000000, size=MiB)], {victim.native_id: MiB})
    assert not moved.is_set() and len(balancer.steals) == 1 and said == [], "the look returned while the data was moving"
    assert os.sched_getaffinity(victim.native_id) == {cpu}, "the thread is already on its thief's CPU"
    release.set()
    assert balancer.steals[0].to_json()["pages_moved"] == MiB // os.sysconf("SC_PAGE_SIZE")
    assert said and said[0].startswith("--balance: node 1 idle")
    stop.set()
    victim.join()


def test_the_summary_does_not_call_pinlabs_own_steals_off_plan():
    from pinlab.launch.record import RunRecord, ThreadRecord

    record = RunRecord(argv=["prog"], plan={"strategy": "explicit"}, options={}, started_at=0.0)
    record.threads = [ThreadRecord(tid=1, pid=1, planned_cpu=0, mask_at_start="0"), ThreadRecord(tid=2, pid=1, planned_cpu=0, mask_at_start="1")]
    assert "1 NOT on its planned CPU" in record.summary() and "left its planned CPU" in record.summary()
    record.balance = [{"tids": [2]}]
    text = record.summary()
    assert "NOT on" not in text and "1 moved by --balance's steals" in text and "left its planned CPU" not in text, text


def test_a_threads_demand_is_over_the_time_between_its_own_reads_not_the_looks(monkeypatch):
    """Two threads that want a whole CPU each, read 0.05 s apart in one look (pinlab descheduled
    between the reads, as on a busy machine) and back to back in the next: each still wants one
    CPU. Timed by one clock reading per look, the first read thread came out at half a CPU (not
    busy) and the other at one and a half."""
    from pinlab.memory import balance

    clock = [100.0]
    demand = {7: 0.0, 8: 0.0}

    def read(pid, tid, cpu_seconds):
        clock[0] += 0.05 if (tid == 7 and looks[0] == 1) else 0.0  # a pause after the first read of the first look
        demand[tid] = clock[0] - 100.0  # a thread that always runs or waits: demand grows with the clock
        return demand[tid]

    looks = [0]
    threads = [
        SimpleNamespace(tid=7, mask=frozenset({0}), index=1, cpu_seconds=0.0),
        SimpleNamespace(tid=8, mask=frozenset({0}), index=2, cpu_seconds=0.0),
    ]
    monkeypatch.setattr(balance, "process_threads", lambda pid, events: threads)
    monkeypatch.setattr(balance, "demand_seconds", read)
    monkeypatch.setattr(balance.time, "monotonic", lambda: clock[0])
    seen = []
    monkeypatch.setattr(balance, "plan_steals", lambda nodes, members, use, attached, thieves: seen.append(dict(use)) or [])
    balancer = Balancer(nodes={0: [0], 1: [1]})
    balancer.pid = 1
    balancer.idle_looks = {1: 5}  # node 1 idle already: every look plans
    for look in range(3):
        looks[0] = look
        balancer.step()
        clock[0] += 0.1
    assert seen[-2:] and all(abs(use[7] - 1.0) < 1e-9 and abs(use[8] - 1.0) < 1e-9 for use in seen[-2:]), seen


def _looks(monkeypatch, states: dict[int, str], last_states: dict[int, str] | None = None, waiting: tuple[int, ...] = (102,)) -> list[list[int]]:
    """Four looks 0.1 s apart at threads 100-102 pinned on node 0's CPU and 200 on node 1's, in
    ``states`` (``last_states`` at the fourth look). Threads 100 and 101 run all along; the
    ``waiting`` ones show no demand (they waited, which schedstat adds only when they run), and
    200 none (idle). Returns the tids each steal took."""
    from pinlab.memory import balance

    clock = [0.0]
    look = [0]
    tids = [100, 101, 102, 200]

    def threads(pid, events):
        now = last_states if (last_states is not None and look[0] == 3) else states
        return [
            SimpleNamespace(tid=t, mask=frozenset({0 if t < 200 else 1}), index=t - 99 if t < 200 else 4, cpu_seconds=0.0, state=now[t]) for t in tids
        ]

    monkeypatch.setattr(balance, "process_threads", threads)
    monkeypatch.setattr(balance, "demand_seconds", lambda pid, tid, cpu: clock[0] if tid in (100, 101) and tid not in waiting else 0.0)
    monkeypatch.setattr(balance.time, "monotonic", lambda: clock[0])
    balancer = Balancer(nodes={0: [0], 1: [1]})
    balancer.pid = 1
    taken: list[list[int]] = []
    monkeypatch.setattr(balancer, "_steal", lambda plan, regions, attached: taken.append([t.tid for t in plan.threads]))
    for look[0] in range(4):
        balancer.step()
        clock[0] += 0.1
    return taken


def test_a_thread_runnable_at_two_looks_in_a_row_is_busy_whatever_its_figure(monkeypatch):
    """The kernel adds a thread's wait for a CPU to its schedstat when it next runs: on a busy
    machine a runnable thread can show almost no demand. Runnable at two looks in a row, it
    counts as wanting a CPU; runnable at one look only, its figure decides."""
    running = {100: "R", 101: "R", 102: "R", 200: "S"}
    assert _looks(monkeypatch, running) == [[102]]  # the last created busy thread: 102 counts
    once = {100: "R", 101: "R", 102: "S", 200: "S"}
    assert _looks(monkeypatch, once, last_states=running) == [[101]]  # 102 runnable at the last look only
    busy_thief = {100: "R", 101: "R", 102: "R", 200: "R"}
    assert _looks(monkeypatch, busy_thief, waiting=(102, 200)) == []  # node 1's thread wants its CPU: not idle
