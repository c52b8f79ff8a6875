"""autopin by restarted runs (``--probe restart``): each probe is a run of its own, pinned on its
candidate from the program's first instruction; the program then runs once more, whole, on the choice.

Re-pinning a running program measures it where it was moved, not where it would have been
started: an OpenMP runtime sizes its spin-waiting, and a BLAS library its pool, from the CPUs it
sees at start, so a program moved onto two threads per CPU can be several times slower than the
same program started there (see the autopin guide). A program that can be started several times
(a start-up that is a small part of -i, nothing a killed run leaves half done) is measured here as
it will run: every probe starts it as ``pinlab run`` does, on the candidate's CPUs, lets it
initialise ``-i`` seconds, reads the metric at the ``--windows`` sub-window boundaries of ``-T``
seconds, and kills it and every process it started. Rounds, their order and the verdict are the
re-pinning controller's (:class:`pinlab.autopin.controller.Autopin`, :mod:`pinlab.autopin.decide`);
only where a probe runs differs. The probes' output is dropped (the kept run's is the program's);
a probe whose program ends by itself before its window is over, or whose measuring fails, stops
the probing, said with its status and the last line it wrote on stderr (or the failure), and the
kept run starts on the best candidate so far.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pinlab import heartbeat
from pinlab.autopin.controller import Autopin, Say, _stderr
from pinlab.autopin.log import Failure
from pinlab.autopin.metrics import choose_metric
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.preloading import StatisticsLoad
from pinlab.autopin.prepare import Outcome, check_log, check_power, heartbeat_seen, make_candidates
from pinlab.errors import UsageError
from pinlab.launch import plan_spec
from pinlab.launch.runner import ControllerBase, resolve_program
from pinlab.launch.runner import run as launch
from pinlab.measure.shared_files import shared_directory
from pinlab.topology import load_topology

#: Signals that stop a session between two runs as they stop a run (pinlab run forwards them to the program).
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def autopin_restarted(
    argv: Sequence[str], options: AutopinOptions, *, topology: Any = None, say: Say = _stderr, sample_ms: float | None = 100.0
) -> Outcome:
    """Probe each candidate in a run of its own, then run the program on the choice; the kept
    run's status and record are the outcome's. Stopped by a signal, no run is left and the
    outcome's status is 128 + its number."""
    if not argv:
        raise UsageError("no program given: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...]")
    check_log(options.log)
    resolve_program(argv[0], os.environ.get("PATH", os.defpath))  # 127 or 126 before any run, as pinlab run says them
    if options.metric not in (None, "auto", "heartbeat"):  # one this machine cannot count is refused now, not in a run
        choose_metric(options.metric, heartbeat_path=None, heartbeat_seen=True).close()
    topology = topology if topology is not None else load_topology("this")
    candidates = make_candidates(options, options.threads, topology)
    check_power(options, candidates)
    controller = Restarted(options, candidates, argv=argv, env=dict(os.environ), topology_name=getattr(topology, "name", "this"), say=say)
    if len(candidates) > 1:
        controller.statistics = StatisticsLoad(candidates, os.sched_getaffinity(0))
        controller.statistics.start()
    # A signal between two runs stops the session (during a run pinlab run takes it, and passes it on);
    # Python lets only the main thread set handlers, and elsewhere the caller's own stay.
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _stop) for s in _STOPPING} if main else {}
    try:
        controller.begin()
        if len(candidates) == 1:
            controller.say(f"only one candidate ({controller._label(0)}): nothing to choose")
            controller.current = 0
            return controller.kept_run(sample_ms)
        try:
            judgement = controller.search()
        except ProbeEnded as ended:
            controller.ended_probing(str(ended))
            if ended.interrupted:
                summary = controller.finish(exit_status=ended.exit_status, signal=ended.interrupted, interrupted=True)
                return Outcome(ended.exit_status, summary)
            judgement = None
        if judgement is not None:
            controller._choose(judgement)
        else:
            controller.current = controller.best_so_far if controller.best_so_far is not None else 0
        return controller.kept_run(sample_ms)
    except _Stopped as stopped:  # between two runs: none is left running
        summary = controller.finish(exit_status=128 + stopped.signum, signal=stopped.signum, interrupted=True)
        return Outcome(128 + stopped.signum, summary)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


class ProbeEnded(Exception):
    """A probe's run ended by itself, was stopped, or could not be measured, before its window was over."""

    def __init__(self, text: str, interrupted: int | None = None, exit_status: int | None = None) -> None:
        super().__init__(text)
        self.interrupted, self.exit_status = interrupted, exit_status


class _AcrossRuns:
    """What the verdict asks of the metric over every probe's run: the first run's name, unit and
    notice, and the first reason to distrust it (or to find nothing counted) that any run gave."""

    def __init__(self, first: Any) -> None:
        self.name, self.unit, self.notice = first.name, first.unit, first.notice
        self.runs: list[Any] = []

    def add(self, metric: Any) -> None:
        self.runs.append(metric)

    def nothing_seen(self) -> str | None:
        return next((why for m in self.runs if (why := m.nothing_seen())), None)

    def distrust(self) -> str | None:
        return next((why for m in self.runs if (why := m.distrust())), None)

    def close(self) -> None:
        pass  # each run's metric is closed when its run ends


class Restarted(Autopin):
    """The controller whose probes are runs of their own (:meth:`_measure` starts one and waits
    for it); :func:`autopin_restarted` drives it and then starts the kept run."""

    def __init__(self, options: AutopinOptions, candidates: Sequence[Any], *, argv: Sequence[str], env: dict[str, str], **kw: Any) -> None:
        super().__init__(options, candidates, mode="restart", argv=argv, metric_factory=self._metric_for, **kw)
        self.env = env
        self.threads = len(self.candidates[0].cpus)
        self.across: _AcrossRuns | None = None
        self.heartbeat_path: str | None = None  # the heartbeat file of the run going on
        self.initialised = True  # no run of the whole session initialises: each probe's does, and is said so when it ends early

    def begin(self) -> None:
        """The session starts: its clock, its log."""
        self.t0 = self.clock()
        self._open_log()

    def ended_probing(self, why: str) -> None:
        """A probe's run ended before its window did: say and log why; the probing is over."""
        self.say(f"stopped probing: {why}")
        if not self._start_logged:
            self._start_event()
        self._event(Failure(t=self._since(), text=why, error="ProbeEnded"))
        self.search_seconds = self.clock() - self._search_began
        self.probing_seconds += self.search_seconds
        self.probing = False

    def kept_run(self, sample_ms: float | None) -> Outcome:
        """The program run once more, whole, pinned on the current candidate (the choice) from its
        start, with its output; its rate printed every -T seconds."""
        chosen = self.candidates[self.current or 0]
        self.say(f"running the program on {self._label(self.current)} from its start")
        own = None
        env = dict(self.env)
        if not env.get("PINLAB_HEARTBEAT"):
            own = env["PINLAB_HEARTBEAT"] = heartbeat.create(shared_directory())
        self.heartbeat_path = env["PINLAB_HEARTBEAT"]
        keep = _KeptRun(self)
        try:
            spec = plan_spec(list(self.argv), cpus=list(chosen.cpus), threads=self.threads, env=env, sample_ms=sample_ms)
            spec.controller = keep
            record = launch(spec)
        finally:
            if own:
                heartbeat.remove(own)
            self.heartbeat_path = None
        if keep.metric is not None:
            keep.metric.close()
        if self.across is not None:
            self.metric = self.across
        summary = self.finish(exit_status=record.exit_status, signal=record.signal, interrupted=bool(record.interrupted))
        return Outcome(record.exit_status, summary, record)

    # ------------------------------------------------------------------ metric per run

    def _metric_for(self, pid: int) -> Any:
        """The metric on the run going on: chosen on the first probe's run as autopin chooses, then
        the same one on every other run (rates by different metrics do not compare)."""
        seen = heartbeat_seen(self.heartbeat_path)
        if self.across is None:
            metric = choose_metric(self.options.metric, heartbeat_path=self.heartbeat_path, heartbeat_seen=seen)
            self.across, self.metric = _AcrossRuns(metric), metric
            self.say(metric.notice)
            self._start_event()
        else:
            metric = choose_metric(self.across.name, heartbeat_path=self.heartbeat_path, heartbeat_seen=True)
        self.across.add(metric)
        return metric

    def _metric_changed(self) -> bool:
        return False  # each run's metric is the first run's

    def _repin(self, candidate: int) -> None:
        self.current = candidate  # no running program to move: the next run starts there

    # ------------------------------------------------------------------ one probe: one run

    def _measure(self, candidate: int, round_number: int) -> Iterator[float]:
        """Run the program pinned on ``candidate``; measure its window; kill it."""
        self.current = candidate
        probe = _ProbeRun(self, candidate, round_number)
        path = self.heartbeat_path = heartbeat.create(shared_directory())  # a run's own: a killed run's slots stay claimed
        env = dict(self.env, PINLAB_HEARTBEAT=path)
        errors = tempfile.TemporaryFile(prefix="pinlab-probe-")
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            spec = plan_spec(list(self.argv), cpus=list(self.candidates[candidate].cpus), threads=self.threads, env=env, sample_ms=None)
            spec.stdout, spec.stderr, spec.controller = null, errors.fileno(), probe
            record = launch(spec)
        except BaseException:
            errors.close()
            raise
        finally:
            os.close(null)
            _kill_known([*probe.family, *_marked(path)])  # orphans of a run that a signal or its own end stopped
            heartbeat.remove(path)
            self.heartbeat_path = None
        try:
            if self.window is not None:  # the run ended, or was stopped, during its window
                self._finish_window(self.window, partial=True)
                self.window = None
            if probe.metric is not None:
                probe.metric.close()
            if self.across is not None:
                self.metric = self.across  # what the verdict asks of the metric, over every run
            if probe.error is not None:
                raise ProbeEnded(f"measuring the run on {self._label(candidate)} failed: {probe.error}")
            if record.interrupted:
                raise ProbeEnded(
                    f"stopped by signal {record.interrupted} during the probe of {self._label(candidate)}", record.interrupted, record.exit_status
                )
            if not probe.done:
                status = f"signal {record.signal}" if record.signal else f"status {record.exit_status}"
                said = _last_line(errors)
                raise ProbeEnded(
                    f"the program ended by itself ({status}) {record.wall_seconds:.3g} s into its run on {self._label(candidate)}, before the "
                    f"probe (-i {self.options.init_seconds:g} s, then -T {self.options.interval:g} s) was over"
                    + (f"; its last words on stderr: {said}" if said else "")
                    + ": --probe restart needs a program that runs longer than that (or a shorter -i and -T)",
                    exit_status=record.exit_status,
                )
        finally:
            errors.close()
        return
        yield  # a generator, as the re-pinning controller's probes are: this one waits inside its run

    def search(self) -> Any:
        """Probe and judge, each probe a run (this blocks); the judgement, or ProbeEnded."""
        steps = self._search()
        while True:
            try:
                wake = next(steps)
            except StopIteration as done:
                return done.value
            time.sleep(max(0.0, wake - self.clock()))  # only the verdict's statistics still loading yield here


class _ProbeRun(ControllerBase):
    """Drives one probe's run from pinlab run's wait loop: -i seconds, then the window's readings,
    then the run killed with every process it started."""

    def __init__(self, parent: Restarted, candidate: int, round_number: int) -> None:
        self.parent, self.candidate, self.round = parent, candidate, round_number
        self.metric: Any = None
        self.done = False
        self.error: Exception | None = None  # what stopped the measuring of this run
        self.family: list[Any] = []  # the processes the run started, as seen at each step
        self._next = float("inf")
        self._steps: Iterator[float] | None = None

    def started(self, pid: int, events: str | None) -> None:
        parent = self.parent
        parent.pid, parent._events_path = pid, events
        self.began = parent.clock()
        self._steps = self._procedure(pid)
        self._next = self.began + parent.options.init_seconds

    def wake_at(self) -> float:
        return self._next

    def step(self) -> None:
        if self._steps is None:
            return
        self._seen(self.parent.pid)
        try:
            self._next = next(self._steps)
        except StopIteration:
            self._steps, self._next = None, float("inf")
        except ProcessLookupError:  # the run ended between two looks: the wait loop sees it
            self._steps, self._next = None, float("inf")
        except Exception as exc:  # noqa: BLE001 - the run is ended here, the session says why
            self.error = exc
            self._steps, self._next = None, float("inf")
            if self.parent.pid is not None:
                _kill_tree(self.parent.pid, self.family)

    def _seen(self, pid: int | None) -> None:
        """Keep the processes the run has started: a run stopped by a signal pinlab forwards
        leaves them orphans, which :meth:`Restarted._measure` then ends."""
        if pid is not None:
            known = {p.pid for p in self.family}
            self.family += [p for p in _family(pid) if p.pid not in known]

    def _procedure(self, pid: int) -> Iterator[float]:
        parent = self.parent
        self.metric = parent.metric = parent.metric_factory(pid)
        yield from parent._window(self.candidate, self.round, parent._since(self.began))
        self.done = True
        _kill_tree(pid, self.family)


class _KeptRun(ControllerBase):
    """Drives the kept run: -i seconds, then its rate every -T seconds (the controller's keep)."""

    def __init__(self, parent: Restarted) -> None:
        self.parent = parent
        self.metric: Any = None
        self._next = float("inf")
        self._steps: Iterator[float] | None = None

    def started(self, pid: int, events: str | None) -> None:
        parent = self.parent
        parent.pid, parent._events_path = pid, events
        self._steps = self._procedure(pid)
        self._next = parent.clock() + parent.options.init_seconds

    def wake_at(self) -> float:
        return self._next

    def step(self) -> None:
        if self._steps is None:
            return
        try:
            self._next = next(self._steps)
        except (StopIteration, ProcessLookupError):
            self._steps, self._next = None, float("inf")
        except Exception as exc:  # noqa: BLE001 - reporting the rate failing must never cost the program its run
            self.parent.say(f"stopped reporting the rate: {exc}; the program goes on")
            self._steps, self._next = None, float("inf")

    def _procedure(self, pid: int) -> Iterator[float]:
        self.metric = self.parent.metric = self.parent.metric_factory(pid)
        yield self.parent.clock()
        yield from self.parent._keep()


def _family(pid: int) -> list[Any]:
    """The processes ``pid`` started, and theirs (psutil processes, which know who they were)."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _kill_tree(pid: int, known: Sequence[Any] = ()) -> None:
    """SIGKILL to the program, every process it started, and those of ``known`` still running
    (seen earlier, since orphaned by a program that ended): a probe's run leaves nothing behind."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _kill_known([*known, *_family(pid)])


def _marked(heartbeat_path: str) -> list[Any]:
    """The processes whose environment names this run's own heartbeat file: the run's, also those
    orphaned before pinlab could see who started them."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get("PINLAB_HEARTBEAT") == heartbeat_path:
                found.append(process)
        except psutil.Error:
            pass
    return found


def _kill_known(processes: Sequence[Any]) -> None:
    """SIGKILL to each of ``processes`` that is still the process it was when seen."""
    import psutil

    for process in processes:
        try:
            if process.is_running():
                process.kill()
        except psutil.Error:
            pass


def _last_line(stream: Any) -> str:
    """The last non-empty line written to ``stream`` (a file), cut to 200 characters."""
    try:
        stream.seek(0)
        lines = [line.strip() for line in stream.read()[-4096:].decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""
