"""The probing controller: the autopin algorithm ([klug2008autopin], section 3) as a sequence of timed steps.

The algorithm is written as one generator (:meth:`Autopin._procedure`) that yields the monotonic
time at which it wants to go on; whoever waits for the program (``pinlab run``'s wait loop in
launch mode, :func:`attach` with ``--pid``) resumes it then. So nothing here sleeps or needs a
thread of its own, and the program's signals and exit status stay ``pinlab run``'s.

1. Let the program initialise ``i`` seconds (its threads are born on the first candidate).
2. For each candidate: re-pin the workers (and with ``--migrate-pages process`` move the pages
   to the candidate's nodes), warm up ``w`` seconds from the end of the migration (not for the
   first candidate, already in place), then read the metric at the start and at the end of each
   of ``windows`` sub-windows of ``t`` / ``windows`` seconds: a rate per worker thread over the
   whole window (the paper's r_avg) and one per sub-window (the samples of the verdict).
3. Judge (:mod:`pinlab.autopin.decide`); with ``--rounds N`` measure every candidate N times,
   with ``--rounds auto`` again only those not settled, up to ``--max-rounds``.
4. Re-pin to the best and keep it; every ``t`` log and print the rate. With ``--monitor``, a rate
   more than ``--threshold`` percent below the reference for ``--patience`` intervals in a row
   starts a new search (a new phase of the program). The reference is the chosen candidate's rate
   in probing, raised to the lowest of the last ``--patience`` intervals whenever all are higher:
   probing can understate the rate a placement keeps (the program still warming up, pinlab's own
   start-up competing for the CPUs), and a drop back to the probed rate is then a new phase too.

Workers are the main thread and the threads the program created as workers, in creation order
(helpers such as the OpenMP runtime's excluded), as :mod:`pinlab.live` finds them; worker k runs on
the candidate's CPU k (round-robin past its end). A worker that appears during probing gets the
candidate being probed (the preload library reads the live plan; pinlab re-pins any worker it
finds elsewhere at its next reading); one that ends is dropped from the measurement.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from pinlab import live
from pinlab.autopin.decide import Judgement, judge, rate
from pinlab.autopin.log import (
    Candidate,
    Choice,
    Failure,
    MetricChange,
    Migration,
    MigrationAccessed,
    MigrationAttached,
    Probe,
    Rate,
    Recheck,
    Reprobe,
    RunnerUp,
    Start,
    Summary,
    event_line,
)
from pinlab.autopin.metrics import rates
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.preloading import StatisticsLoad
from pinlab.cpuset import format_cpulist
from pinlab.launch.runner import ControllerBase
from pinlab.measure import linux
from pinlab.memory.attached import read_attachments
from pinlab.memory.follow import Follow
from pinlab.memory.migrate import migrate_pages

Say = Callable[[str], None]


def _stderr(line: str) -> None:
    print(f"autopin: {line}", file=sys.stderr, flush=True)


@dataclass
class Window:
    """One probing window of one candidate: the readings at its sub-window boundaries."""

    candidate: int
    round: int
    repinned_at: float | None
    readings: list[Any] = field(default_factory=list)  # pinlab.autopin.metrics.Reading
    workers: list[int] = field(default_factory=list)  # worker counts at each reading


class Autopin(ControllerBase):
    """autopin on one program: call :meth:`started` with its pid, then :meth:`step` at :meth:`wake_at`."""

    def __init__(
        self,
        options: AutopinOptions,
        candidates: Sequence[Any],
        *,
        mode: str,
        argv: Sequence[str] | None = None,
        metric_factory: Callable[[int], Any],
        live_plan: Any = None,
        topology_name: str = "this",
        say: Say = _stderr,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not candidates:
            raise ValueError("autopin needs at least one candidate")
        self.options, self.candidates, self.mode, self.argv = options, list(candidates), mode, list(argv or [])
        self.metric_factory, self.live_plan, self.topology_name, self.clock = metric_factory, live_plan, topology_name, clock
        self.say = _unfailing(say)
        self.metric: Any = None
        self.pid: int | None = None
        self.t0 = clock()
        self._next = self.t0
        self._steps: Iterator[float] | None = None
        self._log: IO[str] | None = None
        self.current: int | None = None  # the candidate the workers are on
        self.runner_up: int | None = None  # the last search's runner-up, re-checked with --monitor
        self.samples: dict[int, list[float]] = {}
        self.seconds: dict[int, list[float]] = {}  # the sub-windows' lengths, in the order of samples
        self.probing = False
        self.probing_seconds = 0.0  # every search's probing, for the summary
        self.search_seconds = 0.0  # the last search's, for its choice
        self.choices: list[int] = []
        self.best_so_far: int | None = None
        self.window: Window | None = None
        self.original_masks: dict[int, frozenset[int]] = {}
        self.finished = False
        self.initialised = False  # the -i seconds are over
        self._start_logged = False
        self._node_of: dict[int, int] | None = None
        self.attachments: Any = None  # where the program publishes its attached regions (--migrate-pages attached)
        self.tracker: Any = None  # the page tracer's live counts (--migrate-pages accessed; pinlab.memory.accessed)
        self.statistics: StatisticsLoad | None = None  # where the verdict's statistics load, for the summary
        # With the metric chosen automatically: whether the program beats now (it may start after -i).
        self.heartbeat_later: Callable[[], bool] | None = None
        self._events_path: str | None = None
        self._told_wrap = False
        self._search_began = self.t0
        self.rounds_done = 0
        self.reference = 0.0

    # ------------------------------------------------------------------ driving

    def started(self, pid: int, events: str | None = None) -> None:
        """The program runs (launch mode: called by pinlab run's wait loop)."""
        self.pid = pid
        self.t0 = self.clock()
        # The verdict needs scipy, whose first import takes seconds on a loaded machine: loaded now
        # (pinlab.autopin.preloading), not after the probing while the program runs on the last
        # candidate. A program autopin starts has it loading already.
        if self.statistics is None and len(self.candidates) > 1:
            self.statistics = StatisticsLoad(self.candidates, os.sched_getaffinity(0))
            self.statistics.start()
        self.current = 0 if self.mode == "launch" else None
        self._open_log()
        self._events_path = events
        self._steps = self._procedure()
        self.step()  # runs to the first yield: the wait for the initialisation

    def _open_log(self) -> None:
        """The log, when one is asked for (one that cannot be opened is given up, said once)."""
        if self.options.log:
            try:
                self._log = open(self.options.log, "w", encoding="utf-8", buffering=1)
            except OSError as exc:
                self._drop_log(exc)

    def wake_at(self) -> float:
        return self._next if self._steps is not None and not self.finished else math.inf

    def step(self) -> None:
        """Go on with the procedure up to its next wait; whatever fails stops the probing, not the program."""
        if self._steps is None or self.finished:
            return
        try:
            self._next = self._steps.send(None)
        except StopIteration:
            self.stop()
        except ProcessLookupError:  # the program ended between two looks: the wait notices
            self.stop()
        except Exception as exc:  # noqa: BLE001 - autopin failing must never cost the program its run
            self.say(f"stopped probing: {exc}; the program goes on where it is")
            if not self._start_logged:  # failed before the metric was chosen: the log still begins with what ran
                self._start_event()
            self._event(Failure(t=self._since(), text=str(exc), error=type(exc).__name__))
            self.stop()

    def stop(self) -> None:
        """No more steps: the program runs on where it is; :meth:`finish` still writes the summary."""
        self._steps = None
        self._next = math.inf

    # ------------------------------------------------------------------ the algorithm

    def _procedure(self) -> Iterator[float]:
        opts = self.options
        if self.mode == "attach":
            self.original_masks = {t.tid: t.mask for t in self._threads()}
        yield self.t0 + opts.init_seconds
        self.initialised = True
        self.metric = self.metric_factory(self.pid)
        self.say(self.metric.notice)
        self._start_event()
        while True:
            judgement = yield from self._search()
            if self._choose(judgement):
                yield self.clock() + opts.warmup_seconds  # moved to the choice: warm up before measuring it
            yield from self._keep()

    def _start_event(self, t: float | None = None) -> None:
        """What runs and how; after the initialisation, when the metric is chosen (without one when
        the run ended before: then at ``t`` 0)."""
        opts = self.options
        self._start_logged = True
        metric = self.metric
        self._event(
            Start(
                t=self._since() if t is None else t,
                mode=self.mode,
                argv=tuple(self.argv) if self.argv else None,
                pid=None if self.mode == "restart" else self.pid,  # restarted: a run per probe, none of them "the" program
                threads=len(self.candidates[0].cpus),
                metric=metric.name if metric else None,
                metric_unit=metric.unit if metric else None,
                metric_notice=metric.notice if metric else None,
                topology=self.topology_name,
                params={
                    "init": opts.init_seconds,
                    "warmup": opts.warmup_seconds,
                    "interval": opts.interval,
                    "windows": opts.windows,
                    "rounds": opts.rounds,
                    "max_rounds": opts.max_rounds,
                    "alpha": opts.alpha,
                    "tolerance": opts.tolerance,
                    "migrate_pages": opts.migrate_pages,
                    "monitor": opts.monitor,
                    "threshold": opts.monitor_threshold,
                    "patience": opts.monitor_patience,
                    "recheck": opts.monitor_recheck,
                    "probe": opts.probe,
                },
                candidates=tuple(Candidate(index=i, name=c.name, cpus=tuple(c.cpus)) for i, c in enumerate(self.candidates)),
            )
        )

    def _search(self) -> Iterator[float]:
        """Probe the candidates (rounds as asked) and return the judgement."""
        self.probing, began = True, self.clock()
        self._search_began = began
        if len(self.candidates) == 1:
            self.say(f"only one candidate ({self._label(0)}): nothing to choose, measuring it once")
        judgement: Judgement | None = None
        while judgement is None:  # None: the metric changed under the rounds, which start again
            judgement = yield from self._rounds()
        self.probing = False
        self.search_seconds = self.clock() - began
        self.probing_seconds += self.search_seconds
        return judgement

    def _rounds(self) -> Iterator[float]:
        """The rounds of one search and their judgement; None when the metric changed meanwhile."""
        opts = self.options
        self.samples = {i: [] for i in range(len(self.candidates))}
        self.seconds = {i: [] for i in range(len(self.candidates))}
        to_measure = list(range(len(self.candidates)))
        judgement: Judgement | None = None
        previous: list[int] = []
        for round_number in range(1, opts.round_limit + 1):
            # The first round begins where the workers already are (one re-pin fewer); each later
            # one runs the one before backwards (A B C, C B A, A B C...), so it too begins where the
            # workers are, and a load that drifts steadily over the rounds weighs alike on every
            # candidate's mean instead of favouring those measured at the better end.
            if previous:
                order = [c for c in reversed(previous) if c in to_measure]
            else:
                order = sorted(to_measure, key=lambda c: (c != self.current, c))
            previous = order
            for candidate in order:
                yield from self._measure(candidate, round_number)
                if self._metric_changed():
                    return None
            self.rounds_done = round_number
            while len(self.candidates) > 1 and self.statistics is not None and self.statistics.loading():
                yield self.clock() + 0.02  # scipy still loading: keep the wait loop going meanwhile
            looks = opts.round_limit if opts.adaptive else 1
            judgement = judge(
                self.samples,
                {i: c.name for i, c in enumerate(self.candidates)},
                opts.alpha,
                opts.tolerance,
                looks=looks,
                no_work_why=self.metric.nothing_seen(),
                look=round_number,
                seconds=self.seconds,
                distrust=self.metric.distrust(),
                beats_interval=opts.interval if self.metric.name == "heartbeat" else None,
            )
            if len(self.candidates) == 1:
                break
            if opts.adaptive:
                to_measure = judgement.unsettled(range(len(self.candidates)))
                if not to_measure:
                    break
                if round_number < opts.round_limit:
                    self.say(f"round {round_number}: {len(to_measure) - 1} candidates not settled yet against the best, measuring them again")
                else:
                    self.say(f"still not settled after {round_number} rounds (--max-rounds): choosing on the means")
        assert judgement is not None
        return judgement

    def _metric_changed(self) -> bool:
        """Whether the program has begun beating since task-clock was chosen for want of beats at
        the end of ``-i`` (a pool that starts late, an initialisation longer than ``-i``): the
        metric is then the heartbeat from here on, said and logged, and the caller searches anew."""
        if self.heartbeat_later is None or self.metric is None or self.metric.name != "task-clock" or not self.heartbeat_later():
            return False
        metric = self.metric_factory(self.pid)
        if metric.name != "heartbeat":  # the counters opened meanwhile, say: keep what was chosen
            metric.close()
            return False
        previous, self.metric, self.heartbeat_later = self.metric, metric, None
        previous.close()
        t = self._since()
        self.say(
            f"the program began beating through PINLAB_HEARTBEAT after the initialisation: measuring by the heartbeat "
            f"from t = {t:.3g} s, and searching again (what task-clock measured does not compare with it)"
        )
        self._event(MetricChange(t=t, metric=metric.name, metric_unit=metric.unit, metric_notice=metric.notice, previous=previous.name))
        return True

    def _measure(self, candidate: int, round_number: int) -> Iterator[float]:
        opts = self.options
        repinned_at = None
        if candidate != self.current:
            repinned_at = self._since()
            self._repin(candidate)
            # _repin returns once the pages have moved (--migrate-pages process): the warm-up
            # counts from then, so the window does not measure the program refilling remote caches.
            yield self.clock() + opts.warmup_seconds
        yield from self._window(candidate, round_number, repinned_at)

    def _window(self, candidate: int, round_number: int, repinned_at: float | None) -> Iterator[float]:
        """One window on ``candidate`` where the workers are now: the metric read at its
        sub-window boundaries, then its probe event (a window the program's end cuts short is
        finished by :meth:`finish`, from ``self.window``)."""
        opts = self.options
        self.window = window = Window(candidate, round_number, repinned_at)
        self._read(window)
        step = opts.interval / opts.windows
        start = self.clock()
        for k in range(1, opts.windows + 1):
            yield start + k * step
            self._read(window)
        self._finish_window(window)
        self.window = None

    def _finish_window(self, window: Window, partial: bool = False) -> None:
        readings = window.readings
        if len(readings) < 2:
            return
        per_thread, whole = rates(readings[0], readings[-1], max(1, min(window.workers)))
        # A sub-window where no worker was seen at both ends (all ended, or new) has no rate.
        measured = [(rates(a, b, max(1, n))[1], b.time - a.time) for a, b, n in zip(readings, readings[1:], window.workers[1:])]
        subs = [r for r, _ in measured if math.isfinite(r)]
        lengths = [round(d, 6) for r, d in measured if math.isfinite(r)]
        # The window's rate as the verdict weighs it (see pinlab.autopin.decide.rate): printed,
        # logged and judged alike.
        mean = rate(subs, lengths) if subs else whole
        self.samples.setdefault(window.candidate, []).extend(subs)
        self.seconds.setdefault(window.candidate, []).extend(lengths)
        if not partial:
            self.best_so_far = max(self.samples, key=lambda c: self._rate(c) if self.samples[c] else -math.inf)
        cand = self.candidates[window.candidate]
        self._event(
            Probe(
                t=self._since(),
                candidate=window.candidate,
                name=cand.name,
                cpus=tuple(cand.cpus),
                round=window.round,
                repinned_at=window.repinned_at,
                start=self._since(readings[0].time),
                end=self._since(readings[-1].time),
                rates={str(tid): rate for tid, rate in per_thread.items()},
                mean=mean,
                windows=tuple(subs),
                window_seconds=tuple(lengths),
                threads=len(per_thread) or min(window.workers),
                partial=partial,
            )
        )
        spread = f", ±{_spread(subs):.1%} over {len(subs)} sub-windows" if len(subs) > 1 else ""
        self.say(
            f"[{window.candidate + 1}/{len(self.candidates)}] {self._label(window.candidate)}: "
            f"{_number(mean)} {self.metric.unit}/s per thread{spread}{' (partial window)' if partial else ''}"
        )

    def _choose(self, judgement: Judgement) -> bool:
        """Re-pin to the best and log the choice; whether the threads moved."""
        best = judgement.best
        moved = best != self.current
        if moved:
            self._repin(best)
        self.choices.append(best)
        cand = self.candidates[best]
        chosen_rate = self._rate(best)
        runner = None
        if judgement.runner_up is not None:
            other = self.candidates[judgement.runner_up]
            runner = RunnerUp(candidate=judgement.runner_up, name=other.name, cpus=tuple(other.cpus), rate=self._rate(judgement.runner_up))
        self._event(
            Choice(
                t=self._since(),
                candidate=best,
                name=cand.name,
                cpus=tuple(cand.cpus),
                rate=chosen_rate,
                runner_up=runner,
                p_value=judgement.p_value,
                effect=judgement.effect,
                decided=judgement.decided,
                equivalent=tuple(judgement.equivalent),
                within_tolerance=tuple(judgement.within_tolerance),
                verdict=judgement.verdict,
                rounds=self.rounds_done,
                probing_seconds=round(self.search_seconds, 6),
            )
        )
        self.say(f"chose {self._label(best)}: {judgement.verdict}")
        self.reference = chosen_rate
        self.runner_up = judgement.runner_up
        return moved

    def _rate(self, candidate: int) -> float:
        """The candidate's rate in this search, as the verdict weighs it."""
        return rate(self.samples[candidate], self.seconds.get(candidate))

    def _keep(self) -> Iterator[float]:
        """Stay on the choice; every interval, the rate; with --monitor, re-probe on a lasting drop,
        or when the runner-up, measured every ``--recheck`` intervals, has become better."""
        opts = self.options
        low, since_recheck = 0, 0
        recent: deque[float] = deque(maxlen=opts.monitor_patience)  # the last intervals' rates, for a lasting rise
        rechecked: tuple[int, float] | None = None  # the runner-up and its rate, when it beat the choice just before
        while True:
            if (
                opts.monitor
                and opts.monitor_recheck
                and since_recheck >= opts.monitor_recheck
                and self.runner_up is not None
                and len(recent) == recent.maxlen
            ):
                since_recheck, kept = 0, _mean(list(recent))
                runner_rate = yield from self._recheck(self.runner_up, kept)
                if math.isfinite(runner_rate) and runner_rate > kept * (1 + opts.monitor_threshold / 100):
                    rechecked = (self.runner_up, runner_rate)  # confirmed, or not, by the interval back on the choice
            since_recheck += 1
            before, _ = self._reading()
            start = self.clock()
            yield start + opts.interval
            after, workers = self._reading()
            rate = rates(before, after, max(1, workers))[1]
            if opts.monitor and math.isfinite(rate):
                recent.append(rate)
                if len(recent) == recent.maxlen and min(recent) > self.reference:
                    self.reference = min(recent)  # a lasting rise: the level held since, to keep
            self._event(
                Rate(
                    t=self._since(),
                    start=self._since(before.time),
                    end=self._since(after.time),
                    rate=rate,
                    candidate=self.current,
                    reference=self.reference if opts.monitor else None,
                )
            )
            self.say(f"rate {_number(rate)} {self.metric.unit}/s per thread on {self._label(self.current)}")
            if self._metric_changed():
                return  # the choice was made on task-clock: search again by the heartbeat
            if not opts.monitor or not math.isfinite(rate):
                rechecked = None
                continue
            if rechecked is not None:
                runner, runner_rate = rechecked
                rechecked = None
                if runner_rate > rate * (1 + opts.monitor_threshold / 100):
                    why = (
                        f"the runner-up {self._label(runner)} measured {_number(runner_rate)} {self.metric.unit}/s per thread, more than "
                        f"{opts.monitor_threshold:g}% above the choice's rate just before and just after ({_number(rate)} after): a new phase"
                    )
                    self._event(Reprobe(t=self._since(), why=why, rate=rate, reference=self.reference, intervals=0))
                    self.say(f"re-probing: {why}")
                    return
            low = low + 1 if rate < self.reference * (1 - opts.monitor_threshold / 100) else 0
            if low >= opts.monitor_patience:
                why = (
                    f"the rate stayed more than {opts.monitor_threshold:g}% below the rate kept since the choice for {low} intervals "
                    f"({_number(rate)} against {_number(self.reference)} {self.metric.unit}/s per thread): a new phase"
                )
                self._event(Reprobe(t=self._since(), why=why, rate=rate, reference=self.reference, intervals=low))
                self.say(f"re-probing: {why}")
                return

    def _recheck(self, runner: int, against: float) -> Iterator[float]:
        """The runner-up measured once (warm-up, then one interval), the workers back on the
        choice and warmed up again: its rate (NaN when no worker was measured)."""
        opts = self.options
        chosen = self.current
        repinned_at = self._since()
        self._repin(runner)
        yield self.clock() + opts.warmup_seconds
        before, _ = self._reading()
        yield self.clock() + opts.interval
        after, workers = self._reading()
        runner_rate = rates(before, after, max(1, workers))[1]
        cand = self.candidates[runner]
        self._event(
            Recheck(
                t=self._since(),
                candidate=runner,
                name=cand.name,
                cpus=tuple(cand.cpus),
                repinned_at=repinned_at,
                start=self._since(before.time),
                end=self._since(after.time),
                rate=runner_rate,
                against=against,
            )
        )
        self.say(
            f"re-check of the runner-up: {_number(runner_rate)} {self.metric.unit}/s per thread on {self._label(runner)}, the choice {_number(against)}"
        )
        if chosen is not None:
            self._repin(chosen)
        yield self.clock() + opts.warmup_seconds
        return runner_rate

    # ------------------------------------------------------------------ threads and pages

    def _threads(self) -> list[Any]:
        return live.process_threads(self.pid, events=self._events_path) if self._events_path else live.process_threads(self.pid)

    def _workers(self) -> list[Any]:
        """The workers now, in creation order, each with its slot (its position without a ring)."""
        found = live.workers(self._threads())
        size = len(self.candidates[0].cpus)
        if len(found) > size and not self._told_wrap:
            self._told_wrap = True
            self.say(f"the program has {len(found)} workers and the candidates {size} CPUs: worker k runs on the candidate's CPU k mod {size}")
        return found

    def _slot(self, position: int, thread: Any) -> int:
        return thread.slot if thread.slot is not None else position

    def _repin(self, candidate: int) -> None:
        cpus = self.candidates[candidate].cpus
        previous = self.current
        if self.live_plan is not None:
            self.live_plan.write(list(cpus))
        workers = self._workers()
        cpu_of = {t.tid: cpus[self._slot(i, t) % len(cpus)] for i, t in enumerate(workers)}
        live.pin_threads({tid: [cpu] for tid, cpu in cpu_of.items()}, pid=self.pid)
        self.current = candidate
        if previous == candidate:
            return
        mode = self.options.migrate_pages
        if mode == "process":
            self._migrate(candidate)
        elif mode == "attached":
            # every worker's data, also of those that stayed on their node: a page already there
            # costs the kernel a look, and one an earlier move left behind gets another chance
            self._move_attached(cpu_of)
        elif mode == "accessed":
            self._move_accessed(cpu_of)

    def _conform(self, workers: list[Any]) -> None:
        """Re-pin workers found off the current candidate (created under the previous plan)."""
        if self.current is None:
            return
        cpus = self.candidates[self.current].cpus
        stray = {}
        for i, t in enumerate(workers):
            want = cpus[self._slot(i, t) % len(cpus)]
            if t.mask != frozenset({want}):
                stray[t.tid] = [want]
        if stray:
            live.pin_threads(stray, pid=self.pid)

    def _node_of_cpu(self, cpu: int) -> int:
        """The NUMA node of ``cpu`` (the machine's node map, read once)."""
        if self._node_of is None:
            self._node_of = linux.node_of_cpus()
        return self._node_of.get(cpu, 0)

    def _nodes(self, candidate: int) -> set[int]:
        return {self._node_of_cpu(cpu) for cpu in self.candidates[candidate].cpus}

    def _migrate(self, candidate: int) -> None:
        new = self._nodes(candidate)
        before = live.pages_per_node(self.pid)
        old = {n for n, pages in before.items() if pages and n not in new}
        if not old:
            return
        began = self.clock()
        try:
            left = migrate_pages(self.pid, sorted(old), sorted(new))
        except OSError as exc:
            self.say(f"cannot move the pages to nodes {format_cpulist(new)}: {exc.strerror or exc}")
            return
        seconds = self.clock() - began
        after = live.pages_per_node(self.pid)
        self._event(
            Migration(
                t=self._since(),
                from_nodes=sorted(old),
                to_nodes=sorted(new),
                pages_before={str(k): v for k, v in before.items()},
                pages_after={str(k): v for k, v in after.items()},
                not_moved=left,
                seconds=round(seconds, 6),
            )
        )
        self.say(f"moved pages from nodes {format_cpulist(old)} to {format_cpulist(new)} in {seconds:.3g} s")

    def _follow(self, cpu_of: dict[int, int]) -> Follow:
        """The move of each re-pinned worker's data to its new CPU's node (the memory layer's, shared with --balance)."""
        return Follow(self.pid, {tid: self._node_of_cpu(cpu) for tid, cpu in cpu_of.items()})

    @staticmethod
    def _left(follow: Follow, what: str) -> str:
        """The end of a move's line: how many pages stayed, and why."""
        if not follow.pages_left:
            return ""
        errors = follow.errors()
        return f"; {follow.pages_left}{' ' + what if what else ''} could not move" + (f" ({errors})" if errors else "")

    def _move_attached(self, cpu_of: dict[int, int]) -> None:
        """Each re-pinned worker's attached regions (libpinlab-mem) to its new CPU's node."""
        if self.attachments is None:
            return
        began = self.clock()
        follow = self._follow(cpu_of)
        follow.attached(read_attachments(self.attachments))
        if follow.program_ended:
            return  # the program ended: its data with it
        if follow.regions:
            seconds = self.clock() - began
            self._event(
                MigrationAttached(
                    t=self._since(),
                    regions=follow.regions,
                    bytes=follow.attached_bytes,
                    pages_on_node=follow.pages_moved,
                    not_moved=follow.pages_left,
                    seconds=round(seconds, 6),
                )
            )
            self.say(
                f"moved {follow.regions} attached regions ({follow.attached_bytes / 2**20:.1f} MiB) with their threads in {seconds:.3g} s"
                + self._left(follow, "pages")
            )

    def _move_accessed(self, cpu_of: dict[int, int]) -> None:
        """The pages each re-pinned worker touched first in most of the page tracer's rounds, to
        its new CPU's node."""
        if self.tracker is None:
            return
        began = self.clock()
        follow = self._follow(cpu_of)
        follow.accessed(self.tracker, cpu_of)
        if follow.program_ended:
            return  # the program ended: its data with it
        found = follow.accessed_pages
        if found:
            seconds = self.clock() - began
            self._event(
                MigrationAccessed(
                    t=self._since(), pages=found, pages_on_node=follow.pages_moved, not_moved=follow.pages_left, seconds=round(seconds, 6)
                )
            )
            self.say(f"moved the {found} pages the workers mostly accessed with them in {seconds:.3g} s" + self._left(follow, ""))

    def _reading(self) -> tuple[Any, int]:
        """The metric now over the workers now (those found off the candidate re-pinned first), and their number."""
        workers = self._workers()
        self._conform(workers)
        return self.metric.read([t.tid for t in workers]), len(workers)

    def _read(self, window: Window) -> None:
        reading, workers = self._reading()
        window.readings.append(reading)
        window.workers.append(workers)

    # ------------------------------------------------------------------ the end

    def finish(self, exit_status: int | None = None, signal: int | None = None, interrupted: bool = False, restored: bool = False) -> dict[str, Any]:
        """The program ended (or autopin was stopped): log what was measured and the summary."""
        ended_during_init = not self.initialised and self.pid is not None
        if not self._start_logged:
            # Nothing measured: the start event was never written; the summary needs it before it.
            self._start_event(t=0.0)
        if ended_during_init:
            wall, init = self.clock() - self.t0, self.options.init_seconds
            if interrupted:
                self.say(f"stopped after {wall:.3g} s, during the initialisation (-i {init:g} s): nothing was measured")
            else:
                self.say(
                    f"the program ended after {wall:.3g} s, during the initialisation (-i {init:g} s): nothing was measured; "
                    f"give a shorter -i for a program this short"
                )
        ended_during_probing = self.probing
        if self.window is not None and self.metric is not None:
            self._finish_window(self.window, partial=True)
            self.window = None
        final = None
        if self.current is not None:
            cand = self.candidates[self.current]
            final = {"candidate": self.current, "name": cand.name, "cpus": list(cand.cpus)}
        summary = {
            "exit_status": exit_status,
            "signal": signal,
            "wall_seconds": round(self.clock() - self.t0, 6),
            "probing_seconds": round(self.probing_seconds + (self.clock() - self._search_began if self.probing else 0.0), 6),
            "choices": len(self.choices),
            "final": final,
            "ended_during_init": ended_during_init,
            "ended_during_probing": ended_during_probing,
            "interrupted": interrupted,
            "restored": restored,
            "statistics": self.statistics.to_json() if self.statistics is not None else None,
        }
        self._event(Summary(t=self._since(), **summary))
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except OSError as exc:  # the summary still in the buffer when the disk filled
                self._drop_log(exc)
        if self.metric is not None:
            self.metric.close()
        self.finished = True
        return summary

    # ------------------------------------------------------------------ output

    def _since(self, when: float | None = None) -> float:
        return round((self.clock() if when is None else when) - self.t0, 6)

    def _event(self, event: Any) -> None:
        """Write one event (a dataclass of pinlab.autopin.log) as a line of the log, if there is one."""
        if self._log is None:
            return
        try:
            self._log.write(event_line(event) + "\n")
        except OSError as exc:
            self._drop_log(exc)

    def _drop_log(self, exc: OSError) -> None:
        """The log cannot be written (a full disk): stop logging and say so; the probing and the
        program go on, and the events written so far stay in the file."""
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except OSError:
                pass  # the line that did not fit: what close() tries to write once more
        self.say(
            f"cannot write the log {self.options.log}: {exc.strerror or exc}; logging stopped there, "
            "the events before it are in the file, and the program goes on"
        )

    def _label(self, candidate: int | None) -> str:
        if candidate is None:
            return "the program's own masks"
        cand = self.candidates[candidate]
        cpus = ",".join(map(str, cand.cpus))
        return cand.name if cand.name == f"CPUs {cpus}" else f"{cand.name} (CPUs {cpus})"


def _unfailing(say: Say) -> Say:
    """``say``, except that a progress line that cannot be written (stderr on a full disk, a closed
    terminal) is dropped: it must not stop the probing, let alone the program."""

    def said(line: str) -> None:
        try:
            say(line)
        except OSError:
            pass

    return said


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _spread(values: Sequence[float]) -> float:
    """Half the range of the sub-window rates, relative to their mean."""
    mean = _mean(values)
    return (max(values) - min(values)) / 2 / mean if mean > 0 else 0.0


def _number(value: float) -> str:
    return f"{value:.4g}"
