"""autopin on a program it starts (:func:`autopin_program`) or on one already running (:func:`autopin_attached`).

Everything the user gave is checked before the program starts or the target is touched: the
options (:class:`~pinlab.autopin.options.AutopinOptions`), the candidates (allowed CPUs, one per
thread) and the metric's name. The choice among the available metrics (hardware counter,
heartbeat, task-clock) is made after the initialisation time, when pinlab can tell whether the
program reports a heartbeat.
"""

from __future__ import annotations

import os
import signal as signals
import time
from collections.abc import Callable, Sequence
from typing import Any

from pinlab import heartbeat, live
from pinlab.autopin.claim import claim
from pinlab.autopin.controller import Autopin, Say, _stderr
from pinlab.autopin.liveplan import LivePlan
from pinlab.autopin.metrics import choose_metric
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.preloading import StatisticsLoad
from pinlab.autopin.prepare import Outcome, check_log, check_power, heartbeat_seen, make_candidates
from pinlab.autopin.restart import autopin_restarted
from pinlab.errors import UsageError
from pinlab.heartbeat import path_of_process
from pinlab.launch import plan_spec
from pinlab.launch.runner import FORWARDED
from pinlab.launch.runner import run as launch
from pinlab.measure.shared_files import shared_directory
from pinlab.memory.accessed import PageTracker
from pinlab.memory.attached import AttachTable, table_of_process
from pinlab.topology import load_topology


def check_target(argv: Sequence[str] | None, pid: int | None, restore: bool, topology: str | None = None) -> None:
    """autopin probes one program: one it starts (``argv``) or one running (``pid``); another
    machine's topology is for previewing candidates only."""
    if topology is not None:
        raise UsageError("--topology previews the candidates of another machine: it goes with --dry-run")
    if pid is not None and argv:
        raise UsageError("give a program to start or --pid PID of one running, not both")
    if pid is None and not argv:
        raise UsageError("no program given: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...], or --pid PID")
    if restore and pid is None:
        raise UsageError("--restore applies to --pid (a program autopin started ends with it)")


def autopin(argv: Sequence[str] | None = None, pid: int | None = None, options: AutopinOptions | None = None, *, say: Say = _stderr) -> Outcome:
    """Probe placements on a program it starts (``argv``) or on one running (``pid``) and keep the best.

    The Python API of ``pinlab autopin``: it refuses what the command refuses, with the same
    messages, before anything runs."""
    options = options or AutopinOptions()
    check_target(argv, pid, options.restore)
    if pid is not None:
        if options.restarts:
            raise UsageError(
                "--probe restart starts the program anew for each probe, which a program already running cannot be: "
                "use --probe repin with --pid, or start it under pinlab autopin"
            )
        return autopin_attached(pid, options, say=say)
    if options.restarts:
        return autopin_restarted(list(argv or ()), options, say=say)
    return autopin_program(list(argv or ()), options, say=say)


def _beats_later(options: AutopinOptions, path: str | None) -> Callable[[], bool] | None:
    """With the metric left to autopin, how to tell that the program has begun beating (None: the
    metric was asked for, or there is no heartbeat file to watch)."""
    if options.metric not in (None, "auto") or not path:
        return None
    return lambda: heartbeat_seen(path)


class _Launched(Autopin):
    """autopin in launch mode: also closes pinlab's copy of the stdout pipe once the program has it."""

    pipe_write_end: int | None = None
    held: Any = None  # the claim on the program (pinlab.autopin.claim)

    def started(self, pid: int, events: str | None = None) -> None:
        if self.pipe_write_end is not None:
            os.close(self.pipe_write_end)
            self.pipe_write_end = None
        try:
            self.held = claim(pid)
        except UsageError as exc:  # another autopin attached in the instant since the start
            self.say(f"{exc}; this one leaves the program alone")
            return
        super().started(pid, events)

    def release(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None


def autopin_program(
    argv: Sequence[str],
    options: AutopinOptions,
    *,
    topology: Any = None,
    say: Say = _stderr,
    sample_ms: float | None = 100.0,
    launch_options: dict[str, Any] | None = None,
) -> Outcome:
    """Start the program on the first candidate and probe the others while it runs."""
    if not argv:
        raise UsageError("no program given: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...]")
    check_log(options.log)
    if topology is None:
        topology = load_topology("this")
    candidates = make_candidates(options, options.threads, topology)
    check_power(options, candidates)
    statistics = StatisticsLoad(candidates, os.sched_getaffinity(0)) if len(candidates) > 1 else None
    if statistics is not None:
        statistics.start()  # the verdict's: beside the program on CPUs no candidate uses, else before it starts
    threads = len(candidates[0].cpus)
    env = dict(os.environ)
    directory = shared_directory()
    heartbeat_path = env.get("PINLAB_HEARTBEAT")
    own_heartbeat = None
    if not heartbeat_path:
        own_heartbeat = heartbeat_path = heartbeat.create(directory)
        env["PINLAB_HEARTBEAT"] = heartbeat_path
    stdout_metric = None
    if options.metric and options.metric.startswith("stdout:"):
        stdout_metric = choose_metric(options.metric, heartbeat_path=heartbeat_path, heartbeat_seen=False)
    elif options.metric not in (None, "auto"):
        choose_metric(options.metric, heartbeat_path=heartbeat_path, heartbeat_seen=True).close()  # refuse a bad name now

    def metric_factory(pid: int) -> Any:
        if stdout_metric is not None:
            return stdout_metric
        return choose_metric(options.metric, heartbeat_path=heartbeat_path, heartbeat_seen=heartbeat_seen(heartbeat_path))

    live_plan = LivePlan(list(candidates[0].cpus), directory)
    table = tracker = controller = None
    try:
        env["PINLAB_LIVE_PLAN"] = live_plan.path
        if options.migrate_pages == "attached":
            table = AttachTable()
            env.update(table.env())
        elif options.migrate_pages == "accessed":
            tracker = PageTracker()
            env = tracker.env(env)
        spec = plan_spec(list(argv), cpus=list(candidates[0].cpus), threads=threads, env=env, sample_ms=sample_ms, **(launch_options or {}))
        controller = _Launched(
            options,
            candidates,
            mode="launch",
            argv=argv,
            metric_factory=metric_factory,
            live_plan=live_plan,
            topology_name=getattr(topology, "name", "this"),
            say=say,
        )
        controller.attachments = table.path if table is not None else None
        controller.tracker = tracker
        controller.statistics = statistics
        controller.heartbeat_later = _beats_later(options, heartbeat_path)
        if stdout_metric is not None:
            read_end, write_end = os.pipe()
            spec.stdout = write_end
            controller.pipe_write_end = write_end
            # The copying thread must never take the signals pinlab forwards to the program (a
            # Ctrl-C landing there would end pinlab): it starts with them blocked, and keeps that.

            old_mask = signals.pthread_sigmask(signals.SIG_BLOCK, FORWARDED)
            try:
                tee = stdout_metric.tee(read_end, 1)
            finally:
                signals.pthread_sigmask(signals.SIG_SETMASK, old_mask)
        spec.controller = controller
        try:
            record = launch(spec)
        finally:
            if controller.pipe_write_end is not None:  # the program never started
                os.close(controller.pipe_write_end)
        if stdout_metric is not None:
            tee.join()  # every line the program wrote is counted and passed on
        summary = controller.finish(exit_status=record.exit_status, signal=record.signal, interrupted=bool(record.interrupted))
        return Outcome(record.exit_status, summary, record)
    finally:
        if controller is not None:
            controller.release()
        live_plan.close()
        if table is not None:
            table.close()
        if tracker is not None:
            tracker.close()
        if own_heartbeat:
            heartbeat.remove(own_heartbeat)


def autopin_attached(
    pid: int, options: AutopinOptions, *, topology: Any = None, say: Say = _stderr, stop: Callable[[], bool] | None = None
) -> Outcome:
    """Probe the candidates on a program already running; never kill it.

    On Ctrl-C (KeyboardInterrupt) the workers stay on the best candidate measured so far, or get
    their masks back with ``options.restore`` or when no candidate was measured yet. ``stop`` (tests) ends the session when it returns True.
    """
    check_log(options.log)
    live.check_process(pid)
    if topology is None:
        topology = load_topology("this")
    # Explicit candidates give the thread count themselves; the others take the workers running now.
    explicit = options.candidates not in (None, "auto") and not options.strategies
    running = len(live.workers(live.process_threads(pid)))
    threads = options.threads or (None if explicit else running)
    candidates = make_candidates(options, threads, topology)
    check_power(options, candidates)
    if options.threads is None and running > len(candidates[0].cpus):
        raise UsageError(
            f"process {pid} has {running} worker threads but the candidates {len(candidates[0].cpus)} CPUs: "
            f"list {running} CPUs per candidate, or give -n {len(candidates[0].cpus)} to let the workers share them round-robin"
        )

    heartbeat_path = path_of_process(pid)
    if options.metric and options.metric.startswith("stdout:"):
        raise UsageError("--metric stdout:REGEX needs the program's output: it works when autopin starts the program, not with --pid")
    if options.metric not in (None, "auto"):
        choose_metric(options.metric, heartbeat_path=heartbeat_path, heartbeat_seen=True).close()

    def metric_factory(_: int) -> Any:
        return choose_metric(options.metric, heartbeat_path=heartbeat_path, heartbeat_seen=heartbeat_seen(heartbeat_path))

    attachments = None
    if options.migrate_pages == "accessed":
        raise UsageError(
            "--migrate-pages accessed needs the page tracer loaded as the program starts: it works when autopin starts "
            "the program, not with --pid; use --migrate-pages process"
        )
    if options.migrate_pages == "attached":
        attachments = table_of_process(pid)
        if attachments is None:
            raise UsageError(
                f"--migrate-pages attached reads the data a program attached to its threads, which only a program started "
                f"with PINLAB_MEM_ATTACH publishes (pinlab autopin or pinlab run --balance start it so); process {pid} was not: "
                "use --migrate-pages process"
            )
    # Claimed before any thread is touched, and held to the end: a second autopin on the program is refused.
    held = claim(pid)
    try:
        controller = Autopin(
            options, candidates, mode="attach", metric_factory=metric_factory, topology_name=getattr(topology, "name", "this"), say=say
        )
        controller.attachments = attachments
        controller.heartbeat_later = _beats_later(options, heartbeat_path)

        # Ctrl-C, and the SIGTERM or SIGHUP of `timeout` or a closed terminal, all end the session the
        # same way: the program keeps running, on the best candidate so far (or its own masks).
        def _interrupt(signum, frame):
            for repeated in previous:  # once is enough: a repeat (timeout signals the group too) must not cut the leaving short
                signals.signal(repeated, signals.SIG_IGN)
            raise KeyboardInterrupt

        previous = {s: signals.signal(s, _interrupt) for s in (signals.SIGTERM, signals.SIGHUP)}
        interrupted = restored = False
        try:
            controller.started(pid)
            while live.alive(pid) and not (stop and stop()):
                wait = controller.wake_at() - time.monotonic()
                if wait > 0:
                    time.sleep(min(wait, 0.2))
                    continue
                controller.step()
        except KeyboardInterrupt:
            interrupted = True
        try:
            if interrupted or (stop and stop()):
                restored = _leave(controller, pid, options.restore, say)
        except KeyboardInterrupt:
            interrupted = True
        try:
            return Outcome(None, controller.finish(interrupted=interrupted, restored=restored))  # the program's status is its parent's to see
        finally:
            for signum, handler in previous.items():
                signals.signal(signum, handler)
    finally:
        held.release()


def _leave(controller: Autopin, pid: int, restore: bool, say: Say) -> bool:
    """Stopped before the program ended: restore the masks, or stay on the best pinning so far."""
    if not live.alive(pid):
        return False
    # Stopped before any candidate was measured: the one being probed is no better known than the
    # program's own masks (and may crowd its threads onto one CPU), so they get those back.
    unmeasured = controller.best_so_far is None and controller.current is not None
    if restore or unmeasured:
        # Threads that were there get their own masks back; threads created since get the mask
        # the main thread had (what they would have inherited).
        default = controller.original_masks.get(pid)
        masks = {t.tid: controller.original_masks.get(t.tid, default) for t in live.process_threads(pid)}
        done = live.pin_threads({tid: mask for tid, mask in masks.items() if mask}, pid=pid)
        why = "" if restore else " (no candidate was measured yet)"
        say(f"restored the masks of {sum(done.values())} threads{why}")
        controller.current = None
        return True
    # Re-pin even when the best is the current one: a stop in the middle of a re-pin may have
    # left some threads behind.
    best = controller.best_so_far if controller.best_so_far is not None else controller.current
    if best is not None:
        controller._repin(best)
        say(f"left the threads on {controller._label(best)}")
    return False


__all__ = ["Outcome", "autopin", "autopin_attached", "autopin_program"]
