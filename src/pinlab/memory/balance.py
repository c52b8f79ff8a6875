"""``pinlab run --balance``: an idle NUMA node steals threads, and their data, from a busy one.

The work-stealing of ForestGOMP's *Memory* scheduler ([broquedis2010forestgomp], sections 4.1.2 and 5.5), done
from outside the program. pinlab watches the pinned threads of the running program (the time
each one ran or waited for a CPU, from /proc's schedstat, every ``interval`` seconds). A node is
*idle* when its threads together wanted less than a quarter of a CPU over two looks in a row
(its team finished, its threads sleep or have exited); a node is *overloaded* when more of its
threads are busy (wanting half a CPU or more) than it has CPUs. When a node is idle and some
nodes are overloaded, the idle node steals half of the busy threads of one overloaded node (at
most one per CPU it has), pins them one per CPU on itself, and moves the data attached to them
(libpinlab-mem's ``pm_attach``, published to pinlab through :mod:`pinlab.memory.attached`) with
``move_pages(2)``, so that the stolen threads keep accessing local memory.

For a program that does not use the API, ``--balance-data accessed`` has the page tracer
(:mod:`pinlab.memory.accessed`) count which thread touches which page while it runs: a stolen
thread then takes along the pages it touched first in most rounds.

Which node is robbed: as in [broquedis2010forestgomp], the one whose busy threads have the least attached data
(moving memory is what costs), then the one with the most work left, which from outside is the
most busy threads waiting for a CPU (ForestGOMP used workload hints from the application;
pinlab has none). Threads with no attached data move alone (unless ``--balance-data accessed``):
for a program that does not use the memory API, --balance moves threads only and says so.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pinlab.measure import linux
from pinlab.measure.threads import process_threads
from pinlab.memory.accessed import PageTracker
from pinlab.memory.attached import AttachTable
from pinlab.memory.follow import Follow
from pinlab.words import plural

INTERVAL = 0.25  # seconds between two looks at the threads, unless --balance-interval says otherwise
IDLE_CPUS = 0.25  # a node whose threads want less than this many CPUs is idle
BUSY_SHARE = 0.5  # a thread that wants at least this share of a CPU (running or waiting) is busy
IDLE_LOOKS = 2  # looks in a row a node must be idle before it steals


@dataclass
class Steal:
    """One steal: when, which threads went from which node to which CPUs, and their data."""

    at: float  # seconds since the program started
    from_node: int
    to_node: int
    tids: list[int]
    cpus: list[int]
    attached_bytes: int
    pages_moved: int = 0
    pages_left: int = 0
    why: str = ""
    accessed_pages: int = 0  # --balance-data accessed: pages the threads without attached data mostly accessed
    errors: dict[str, int] = field(default_factory=dict)  # why pages were left: errno name (or "node N") -> pages
    program_ended: bool = False  # the program ended while the data was moving: the rest went with it
    per_thread: dict[int, dict[str, int]] = field(default_factory=dict)  # tid -> its pages_moved and pages_left
    moving: threading.Thread | None = field(default=None, repr=False, compare=False)  # the move, beside the wait loop

    #: Seconds the record waits for a move still running when the run ends (the program has ended
    #: then, so the kernel stops it at once; this only bounds a move the kernel hangs on).
    WAIT = 60.0

    def finished(self) -> bool:
        """Waits for the move of the steal's data (it runs beside the wait loop, which goes on
        sampling meanwhile); False when it is still running after WAIT seconds."""
        if self.moving is not None:
            self.moving.join(self.WAIT)
            return not self.moving.is_alive()
        return True

    def to_json(self) -> dict:
        done = self.finished()
        return {
            "at": round(self.at, 3),
            "from_node": self.from_node,
            "to_node": self.to_node,
            "tids": self.tids,
            "cpus": self.cpus,
            "attached_bytes": self.attached_bytes,
            "accessed_pages": self.accessed_pages,
            "pages_moved": self.pages_moved,
            "pages_left": self.pages_left,
            "errors": self.errors,
            "program_ended": self.program_ended,
            "per_thread": {str(tid): counts for tid, counts in self.per_thread.items()},
            **({} if done else {"still_moving": True}),
            "why": self.why,
        }

    def text(self) -> str:
        what = []
        if self.attached_bytes:
            what.append(f"their {self.attached_bytes / 2**20:.1f} MiB of attached data")
        if self.accessed_pages:
            what.append(f"the {self.accessed_pages} pages they mostly accessed")
        left = ", ".join(f"{n} {reason}" for reason, n in sorted(self.errors.items()))
        data = (
            f"moved {'part of ' if self.pages_left else ''}{' and '.join(what)} ({self.pages_moved} pages on node {self.to_node}"
            + (f"; {self.pages_left} could not move{': ' + left if left else ''}" if self.pages_left else "")
            + ("; the program ended meanwhile)" if self.program_ended else ")")
            if what
            else "no data attached to them (threads only)"
        )
        return (
            f"--balance: node {self.to_node} idle at {self.at:.2f} s: stole {plural(len(self.tids), 'thread')} of node {self.from_node} "
            f"({self.why}), now on {'CPU' if len(self.cpus) == 1 else 'CPUs'} {','.join(map(str, self.cpus))}; {data}"
        )


@dataclass
class Balancer:
    """The stealing of --balance, looked at from the wait loop through :class:`BalanceController`.

    ``nodes`` maps each NUMA node to the CPUs the program may use on it; ``table`` is the
    attachment table the program publishes in (None: no attached data is moved); ``tracker``, the
    page tracer's counts (None: the pages of threads without attached data stay); ``say`` prints
    a line.
    """

    nodes: dict[int, list[int]]
    interval: float = INTERVAL
    table: object | None = None
    tracker: object | None = None  # a pinlab.memory.accessed.PageTracker (--balance-data accessed)
    say: Callable[[str], None] | None = None
    steals: list[Steal] = field(default_factory=list)
    pid: int | None = field(default=None, init=False)
    events: str | None = field(default=None, init=False)
    started_at: float = field(default=0.0, init=False)
    next_look: float = field(default=0.0, init=False)
    last: dict[int, tuple[float, float]] = field(default_factory=dict, init=False)  # tid -> (cpu seconds, when)
    idle_looks: dict[int, int] = field(default_factory=dict, init=False)
    runnable_before: set[int] = field(default_factory=set, init=False)  # tids runnable at the last look

    def started(self, pid: int, events: str | None) -> None:
        self.pid, self.events = pid, events
        self.started_at = time.monotonic()
        self.next_look = self.started_at + self.interval

    def wake_at(self) -> float:
        return self.next_look if len(self.nodes) > 1 else float("inf")  # one node: nothing to balance

    def step(self) -> None:
        self.next_look = time.monotonic() + self.interval

        threads = process_threads(self.pid, self.events)
        runnable = {t.tid for t in threads if getattr(t, "state", None) == "R"}
        steady, self.runnable_before = runnable & self.runnable_before, runnable
        use: dict[int, float] = {}
        for t in threads:
            before = self.last.get(t.tid)
            # Each thread's figure with the time it was read: on a busy machine this process can
            # wait tens of milliseconds between two threads' reads, which one time for the whole
            # look would count as demand the later threads did not have (or the earlier ones lost).
            demand = demand_seconds(self.pid, t.tid, t.cpu_seconds)
            self.last[t.tid] = (demand, time.monotonic())
            if before is not None and self.last[t.tid][1] > before[1]:
                use[t.tid] = (demand - before[0]) / (self.last[t.tid][1] - before[1])
        for tid in steady:
            # Runnable at this look and the last: it wanted a CPU all along, whatever its figure
            # says. The kernel adds a thread's wait for a CPU to its schedstat only once it runs
            # again, so on a busy machine a thread that waited most of an interval shows little.
            use[tid] = max(use.get(tid, 0.0), 1.0)
        members = members_by_node(self.nodes, threads)
        for node, ts in members.items():
            # a thread seen for the first time has no figure yet: its node is not called idle
            idle = all(t.tid in use for t in ts) and sum(use[t.tid] for t in ts) < IDLE_CPUS
            self.idle_looks[node] = self.idle_looks.get(node, 0) + 1 if idle else 0
        thieves = [node for node in sorted(self.nodes) if self.idle_looks[node] >= IDLE_LOOKS]
        if not thieves:
            return
        regions = self.table.read() if self.table is not None else []
        attached: dict[int, int] = {}  # tid -> bytes attached to it
        for region in regions:
            if region.tid:
                attached[region.tid] = attached.get(region.tid, 0) + region.size
        for plan in plan_steals(self.nodes, members, use, attached, thieves):
            self._steal(plan, regions, attached)
            self.idle_looks[plan.thief] = 0

    def _steal(self, plan: StealPlan, regions: list, attached: dict[int, int]) -> None:
        """Pin the plan's threads one per CPU on the thief's node, then move their data there
        beside the wait loop (a thread of pinlab's), which goes on sampling meanwhile; the line
        is said once the move has ended."""
        thief = plan.thief
        steal = Steal(at=time.monotonic() - self.started_at, from_node=plan.victim, to_node=thief, tids=[], cpus=[], attached_bytes=0, why=plan.why)
        cpus = self.nodes[thief]
        for i, t in enumerate(plan.threads):
            cpu = cpus[i % len(cpus)]
            try:
                os.sched_setaffinity(t.tid, {cpu})
            except OSError:
                continue  # it ended meanwhile
            steal.tids.append(t.tid)
            steal.cpus.append(cpu)
            steal.attached_bytes += attached.get(t.tid, 0)
        if steal.tids:
            mine = [r for r in regions if r.tid in steal.tids]

            def move() -> None:
                self._move_data(steal, mine)
                if self.say:
                    self.say(steal.text())

            steal.moving = threading.Thread(target=move, name=f"pinlab-balance-move-{len(self.steals)}", daemon=True)
            self.steals.append(steal)
            steal.moving.start()

    def _move_data(self, steal: Steal, regions: list) -> None:
        """Move the stolen threads' attached ``regions``, then (--balance-data accessed) the pages
        that those without attached data mostly accessed, to the thief's node. The program may
        end meanwhile: what had moved is counted, the rest is not called left behind."""
        follow = Follow(self.pid, {tid: steal.to_node for tid in steal.tids})
        follow.attached(regions)
        if self.tracker is not None:
            owners = {r.tid for r in regions}
            follow.accessed(self.tracker, [tid for tid in steal.tids if tid not in owners])
        steal.pages_moved, steal.pages_left, steal.accessed_pages = follow.pages_moved, follow.pages_left, follow.accessed_pages
        steal.per_thread, steal.errors, steal.program_ended = follow.per_thread, dict(follow.why), follow.program_ended


def demand_seconds(pid: int, tid: int, cpu_seconds: float) -> float:
    """Seconds thread ``tid`` ran or waited for a CPU (``/proc/.../schedstat``): its demand, which
    its CPU time alone hides when threads share a CPU (four busy threads on one CPU each get a
    quarter of it). Without schedstat, its CPU time."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            ran, waited = f.read().split()[:2]
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return cpu_seconds


@dataclass
class StealPlan:
    """What one idle node takes: ``threads`` (LiveThreads) of node ``victim``, and why."""

    victim: int
    thief: int
    threads: list
    why: str


def members_by_node(nodes: dict[int, list[int]], threads: list) -> dict[int, list]:
    """The threads pinned inside each node (a mask within its CPUs); threads free to run on
    several nodes belong to none (the kernel balances them)."""
    node_of_cpu = linux.node_of_cpus(nodes)
    members: dict[int, list] = {node: [] for node in nodes}
    for t in threads:
        homes = {node_of_cpu.get(cpu) for cpu in t.mask}
        if len(homes) == 1 and None not in homes:
            members[homes.pop()].append(t)
    return members


def plan_steals(
    nodes: dict[int, list[int]], members: dict[int, list], use: dict[int, float], attached: dict[int, int], thieves: list[int]
) -> list[StealPlan]:
    """The steals of one look. Each idle node of ``thieves`` (in order) takes half of the busy
    threads (``use`` of at least BUSY_SHARE) of an overloaded node (more busy threads than CPUs),
    at most one per CPU it has, the last created first: from the node whose busy threads have the
    least ``attached`` data, then the most busy threads, then the lowest number. A node robbed in
    this look is not robbed again before the next (its figures are stale)."""
    busy = {node: [t for t in ts if use.get(t.tid, 0.0) >= BUSY_SHARE] for node, ts in members.items()}
    plans = []
    robbed: set[int] = set()
    for thief in thieves:
        overloaded = [n for n in sorted(nodes) if n != thief and n not in robbed and len(busy[n]) > len(nodes[n])]
        if not overloaded:
            continue
        weight = {n: sum(attached.get(t.tid, 0) for t in busy[n]) for n in overloaded}
        victim = min(overloaded, key=lambda n: (weight[n], -len(busy[n]), n))
        ordered = sorted(busy[victim], key=lambda t: (t.index is None, t.index or 0, t.tid))
        taken = ordered[len(ordered) - min(len(ordered) // 2, len(nodes[thief])) :]
        why = f"{plural(len(busy[victim]), 'busy thread')} on {plural(len(nodes[victim]), 'CPU')}"
        if len(overloaded) > 1:
            why += f"; of {len(overloaded)} overloaded nodes, the least attached data ({weight[victim] / 2**20:.1f} MiB)"
        plans.append(StealPlan(victim, thief, taken, why))
        robbed.add(victim)
    return plans


class BalanceController:
    """``--balance`` as the controller the runner is handed (see pinlab.launch.runner.Controller).

    Just before the program starts it opens what the program publishes to (the attachment table;
    with ``data="accessed"`` the page tracer too) and finds the plan's CPUs on each NUMA node; the
    :class:`Balancer` then steals from the wait loop; at the end the steals go into the run record
    and the table and tracer are closed. Nothing is opened before the run, so a request built and
    never run holds nothing.
    """

    def __init__(self, cpus: Sequence[int], interval: float, data: str = "attached") -> None:
        self.cpus, self.interval, self.data = list(cpus), interval, data
        self.table: Any = None  # a pinlab.memory.attached.AttachTable while the program runs
        self.tracker: Any = None  # a pinlab.memory.accessed.PageTracker (data="accessed")
        self.balancer: Balancer | None = None

    def before_start(self, env: dict[str, str], program: str, blocker: str | None, warnings: list[str]) -> dict[str, str]:
        self.table = AttachTable()
        env = {**env, **self.table.env()}
        if self.data == "accessed":
            if blocker is not None:
                warnings.append(f"--balance-data accessed: {program} is {blocker}, so the page tracer cannot be loaded; only attached data moves")
            else:
                self.tracker = PageTracker()
                env = self.tracker.env(env)
        nodes = {node: sorted(set(self.cpus) & cpus) for node, cpus in linux.numa_nodes().items()}
        self.balancer = Balancer({node: cpus for node, cpus in nodes.items() if cpus}, interval=self.interval, table=self.table, tracker=self.tracker)
        return env

    def started(self, pid: int, events: str | None) -> None:
        if self.balancer is not None:
            self.balancer.started(pid, events)

    def wake_at(self) -> float:
        return self.balancer.wake_at() if self.balancer is not None else math.inf

    def step(self) -> None:
        if self.balancer is not None:
            self.balancer.step()

    def after_run(self, record) -> None:
        """The steals into ``record.balance`` (and a warning when there was one node), then the
        table and tracer closed."""
        try:
            if self.balancer is not None:
                record.balance = [steal.to_json() for steal in self.balancer.steals]
                if len(self.balancer.nodes) < 2:
                    record.warnings.append("--balance had nothing to do: the placement uses one NUMA node")
        finally:
            for held in (self.table, self.tracker):
                if held is not None:
                    held.close()
            self.table = self.tracker = None
