"""Running a study: every configuration run many times, each run stored as it ends.

A configuration is (program, threads, placement, memory policy, co-runners). Runs go through
the launcher of ``pinlab run`` with the controlled environment on (no ASLR, clean environment
of constant size). ``random`` draws a new placement for every run, from the study's seed and
the run's position, so a study is reproducible and the placement of each run is stored.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from pinlab.errors import UsageError
from pinlab.launch import ProgramNotExecutable, ProgramNotFound, plan_spec
from pinlab.launch.openmp import disagreements
from pinlab.launch.runner import run as launch
from pinlab.measure.counters import parse_events, probe
from pinlab.measure.noise import WARNING, check
from pinlab.placement.strategies import UNPINNED
from pinlab.study.columns import fields_from_record
from pinlab.study.machine import machine_description, node_identity, this_topology
from pinlab.study.plan import (
    DEFAULT_SAMPLE_MS,
    StudyPlan,
    extract_metric,
    plan_from_parameters,
    study_placement,
)
from pinlab.study.race import race_round
from pinlab.study.schedule import next_round, run_seed, sample_period, schedule, scheduled_runs
from pinlab.study.store import Store, damaged_database
from pinlab.version import __version__
from pinlab.words import plural
from pinlab.workloads.corun import CoRunners


class StudyInterrupted(Exception):
    """The study was asked to stop (Ctrl-C, SIGTERM...); every finished run is stored."""

    def __init__(self, signum: int, stored: int, name: str) -> None:
        super().__init__(f"study {name} interrupted by signal {signum}; {stored} runs are stored; continue with --resume {name}")
        self.signum = signum


@functools.lru_cache(maxsize=8)
def _counters(names: tuple[str, ...]):
    """Which of the study's counters can be counted here (probed once per study)."""
    return probe(parse_events(",".join(names)))


#: Bytes of a failed run's stderr kept in the store.
STDERR_TAIL = 4000


def _output_file(name: str) -> int:
    """An anonymous in-memory file for a run's output (nothing to delete, nothing left by a kill -9)."""
    return os.memfd_create(f"pinlab-{name}", os.MFD_CLOEXEC)


def _read_output(fd: int, limit: int | None = None) -> str:
    """All of a run's output, or its last ``limit`` bytes."""
    size = os.lseek(fd, 0, os.SEEK_END)
    start = 0 if limit is None else max(0, size - limit)
    os.lseek(fd, start, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def execute_run(plan: StudyPlan, config: dict[str, Any], index: int, warmup: bool, sample_ms: float = DEFAULT_SAMPLE_MS) -> dict[str, Any]:
    """One run of one configuration; returns the store's run fields (never raises for a failing program).

    ``sample_ms``: how often pinlab samples where each thread runs (see :func:`~pinlab.study.schedule.sample_period`).
    A co-runner that ended before the run did (it crashed, or its options were wrong) makes the
    run failed: the program did not run next to the load the configuration says.
    """
    placement = config["placement"]
    planned = None
    if placement != "none":
        seed = run_seed(plan.seed, config["position"], index) if placement == "random" else None
        planned = study_placement(
            this_topology(), placement, config["threads"], seed=seed, cpu_kind=plan.cpu_kind, **plan._placement_options(placement)
        )
    spec = plan_spec(
        config["argv"],
        placement=planned,
        mem=config["mem"],
        no_aslr=True,
        clean_env=True,
        sample_ms=sample_ms,
    )
    if placement in UNPINNED:
        spec.threads = config["threads"]  # OMP_NUM_THREADS for the unpinned baseline
    spec.timeout = plan.timeout
    if plan.counters:
        spec.counters = _counters(tuple(plan.counters))
    out, err = _output_file("stdout"), _output_file("stderr")
    try:
        spec.stdout, spec.stderr = out, err
        coruns = []
        if config["corun"] != "none":
            for part in config["corun"].split("+"):
                kind, _, count = part.partition(":")
                coruns.append(CoRunners(kind, int(count)).start())
        corun_failure = None
        try:
            record = launch(spec)
            if record.interrupted is not None:
                return {"interrupted": record.interrupted}
        except (ProgramNotFound, ProgramNotExecutable) as exc:
            return {"status": "failed", "exit_status": 127 if isinstance(exc, ProgramNotFound) else 126, "stderr_tail": str(exc)}
        finally:
            for group in coruns:
                group.stop()
                corun_failure = corun_failure or group.failure()
        fields = fields_from_record(record.to_json())
        fields["record"]["node"] = node_identity()
        fields["status"] = "timeout" if record.timed_out else ("ok" if record.exit_status == 0 else "failed")
        if corun_failure and fields["status"] == "ok":
            fields["status"] = "failed"
            fields["stderr_tail"] = f"co-runner {corun_failure}: the run did not have the load {config['corun']} asks for"
        fields["metric"] = extract_metric(plan.metric, _read_output(out), record.wall_seconds)
        if fields["status"] == "ok" and fields["metric"] is None:
            fields["status"] = "failed"
            fields["stderr_tail"] = f"the metric {plan.metric!r} was not found in the program's output"
        if fields["status"] != "ok" and "stderr_tail" not in fields:
            fields["stderr_tail"] = _read_output(err, STDERR_TAIL)
        return fields
    finally:
        os.close(out)
        os.close(err)


def config_name(config: Mapping[str, Any], corun: bool = True) -> str:
    """A configuration as messages name it: ``stream compact x4`` (``with cpu:1`` when it has co-runners)."""
    name = f"{config['program']} {config['placement']} x{config['threads']}"
    return name if not corun or config["corun"] == "none" else f"{name} with {config['corun']}"


def failure_reason(fields: dict[str, Any]) -> str:
    """A failed run in one line: how it ended and the last line of what it said."""
    lines = [line.strip() for line in (fields.get("stderr_tail") or "").strip().splitlines() if line.strip()]
    said = lines[-1][:300] if lines else "(no output on stderr)"
    if fields["status"] == "timeout":
        return f"timed out: {said}"
    if fields.get("signal"):
        return f"killed by signal {fields['signal']} (exit status {fields.get('exit_status')}): {said}"
    if fields.get("exit_status") == 0:
        return said  # it ran, but something else failed (the metric was not in its output, a co-runner died)
    return f"exit status {fields.get('exit_status')}: {said}"


class StudyFailed(UsageError):
    """The study ended, but some configuration has no successful measured run: nothing to compare."""

    exit_status = 1


def settings_warnings(configs: list[dict[str, Any]], env: Mapping[str, str]) -> list[str]:
    """The user's OpenMP variables that disagree with the configurations' plans, each said once
    with the configurations it concerns (see :mod:`pinlab.launch.openmp`).

    The runs keep those variables (the controlled environment keeps ``OMP_*``, ``KMP_*`` and
    ``GOMP_*``), so a study with ``OMP_NUM_THREADS=4`` in its environment would compare placements
    of 2 threads that ran 4. Computed from the configurations alone, before any run, so the user
    hears of it at once; each run's record also holds the warnings of its own launch.
    """
    concerns: dict[str, list[str]] = {}
    for config in configs:
        for text in disagreements(env, config["threads"], pinned=config["placement"] not in UNPINNED):
            concerns.setdefault(text, []).append(config_name(config, corun=False))
    return [f"{'every configuration' if len(names) == len(configs) else ', '.join(names)}: {text}" for text, names in concerns.items()]


def run_study(
    plan: StudyPlan | None,
    db: str,
    *,
    resume: str | None = None,
    max_failures: int = 10,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
    only: list[tuple[int, int, bool]] | None = None,
) -> dict[str, Any]:
    """Run (or resume) a study, storing every run as soon as it ends; returns a short summary.

    The plan is validated first (:meth:`StudyPlan.validate`): nothing is stored or run for a plan
    that cannot run. Ctrl-C or a kill leaves every finished run stored; ``resume`` continues with
    the runs not stored yet (the database must exist). The first failure of each configuration is
    told through ``say`` as it happens (default: a line on stderr). Past ``max_failures`` failed
    runs the study stops with a UsageError; a study that ends with a configuration that has no
    successful measured run raises :class:`StudyFailed` (exit status 1). ``only``: run just these
    (configuration position, run index, warm-up?) in this order, the share of one node of a Slurm
    campaign (pinlab.study.slurm), instead of the plan's whole schedule.
    """
    if resume is None:
        if plan is None:
            raise TypeError("run_study needs a plan, or resume=NAME")
        plan.validate()
    if max_failures < 1:
        raise UsageError(f"--max-failures must be at least 1 (got {max_failures})")
    with Store.open(db, create=resume is None) as store, damaged_database(store.path):
        if resume is not None:
            study = store.study(resume)
            if study is None:
                names = ", ".join(s.name for s in store.studies()) or "none"
                raise UsageError(f"no study named {resume!r} in {db} (studies there: {names})")
            plan = plan_from_parameters(study.name, study.parameters, study.seed or 0, max_failures)
        else:
            if store.study(plan.name) is not None:
                raise UsageError(f"a study named {plan.name} already exists in {db}: choose another --name, or continue it with --resume {plan.name}")
            warnings = [f"{f.name}: {f.found}" for f in check() if f.status == WARNING]
            study = store.create_study(
                plan.name, plan.parameters(), plan.configs(), plan.seed, machine_description(), __version__, warnings, new=True
            )
        configs = store.configs(study.id)
        stored = store.run_rows(study.name)  # without the records
        done = {(r["config_id"], r["run_index"], r["warmup"]) for r in stored}
        failures = sum(1 for r in stored if r["status"] != "ok" and not r["warmup"])
        told = {r["config_id"] for r in stored if r["status"] != "ok"}  # failures already told in an earlier session
        warmups = [r for r in stored if r["warmup"]]
        total = len(only) if only is not None else scheduled_runs(plan, len(configs))
        bar = _progress(progress, total, len(stored), say)
        settings = settings_warnings(configs, os.environ)
        store.add_warnings(study.id, settings)  # shown by pinlab report; each run's record has its own
        for warning in settings:
            bar.say(f"pinlab: warning: {warning}")
        new_runs = 0
        periods: dict[int, float] = {}

        def one(c: int, r: int, w: bool, note: str = "") -> None:
            nonlocal failures, new_runs
            config = configs[c]
            runs_text = f" run {r + 1}" + (f"/{plan.runs}" if not plan.rounds_chosen else note)
            bar.describe(config_name(config, corun=False) + (" (warm-up)" if w else runs_text))
            if w:
                period = DEFAULT_SAMPLE_MS if plan.sample_ms == "auto" else float(plan.sample_ms)
            else:
                if c not in periods:
                    periods[c] = sample_period(plan, config, warmups)
                period = periods[c]
            try:
                fields = execute_run(plan, config, r, w, sample_ms=period)
            except KeyboardInterrupt:
                fields = {"interrupted": 2}
            if "interrupted" in fields:  # the program was stopped with the study: not a run to keep
                raise StudyInterrupted(fields["interrupted"], len(store.run_rows(study.name)), study.name)
            store.add_run(config["id"], r, w, **fields)
            new_runs += 1
            bar.advance()
            if w:
                warmups.append({"warmup": True, "wall_seconds": fields.get("wall_seconds"), "program": config["program"], "argv": config["argv"]})
            if fields["status"] != "ok" and config["id"] not in told:
                first = not told
                told.add(config["id"])
                bar.say(
                    f"pinlab: {'warm-up ' if w else ''}run {r + 1} of {config_name(config)} failed: {failure_reason(fields)}"
                    + (" (the study goes on; the first failure of each configuration is shown)" if first else "")
                )
            if fields["status"] != "ok" and not w:
                failures += 1
                if failures >= max_failures and not plan.racing:  # a race drops a placement whose first runs fail (study.race)
                    raise UsageError(
                        f"study {study.name} stopped after {plural(failures, 'failed run')} (last: {config['program']}, "
                        f"{failure_reason(fields)}); the runs are stored; fix the program and --resume {study.name}"
                    )

        try:
            for c, r, w in only if only is not None else schedule(plan, len(configs)):
                if (configs[c]["id"], r, w) not in done:
                    one(c, r, w)
            round_number = 0
            while plan.rounds_chosen and only is None:
                stored_runs = store.run_rows(study.name)  # without the records: only status, metric and time are needed
                batch = race_round(plan, configs, stored_runs) if plan.racing else next_round(plan, configs, stored_runs, round_number)
                if not batch:
                    break
                round_number += 1
                note = (
                    f" (race: {plural(len(batch), 'placement')} left)"
                    if plan.racing
                    else f" (adaptive: {plural(len(batch), 'configuration')} undecided)"
                )
                for c, r, w in batch:
                    one(c, r, w, note)
        finally:
            bar.close()
        store.finish(study.id)
        rows = store.run_rows(study.name)
        measured = [r for r in rows if not r["warmup"]]
        summary = {
            "study": study.name,
            "db": db,
            "runs": len(rows),
            "new_runs": new_runs,
            "failures": failures,
            "measured": len(measured),
            "configs": len(configs),
            "adaptive": plan.adaptive,
            "racing": plan.racing,
        }
        succeeded = {r["config_id"] for r in measured if r["status"] == "ok"}
        empty = [c for c in configs if c["id"] not in succeeded]
        if plan.racing and len(empty) < len(configs):
            empty = []  # a race drops a placement that cannot run, and chooses among the others
        if empty:
            first = next((r for r in rows if r["config_id"] == empty[0]["id"] and r["status"] != "ok"), None)
            names = ", ".join(config_name(c) for c in empty[:3])
            more = f" and {len(empty) - 3} more" if len(empty) > 3 else ""
            reason = f" (first failure: {failure_reason(first)})" if first else ""
            raise StudyFailed(
                f"study {study.name}: {plural(len(empty), 'configuration')} had no successful run: {names}{more}{reason}; "
                f"the {plural(len(rows), 'run')} are stored in {db}; fix the program and run a new study"
            )
        return summary


class _progress:
    """A rich progress bar (configuration, runs done, time left), or nothing when not wanted."""

    def __init__(self, enabled: bool, total: int, done: int, say: Callable[[str], None] | None = None) -> None:
        self.bar = None
        self._say = say
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=False)
            self.task = self.bar.add_task("starting", total=total, completed=done)
            self.bar.start()

    def describe(self, text: str) -> None:
        if self.bar:
            self.bar.update(self.task, description=text)

    def say(self, text: str) -> None:
        """A line for the user, printed above the bar (or through the caller's ``say``)."""
        if self._say is not None:
            self._say(text)
        elif self.bar:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
