"""Planning and running a study: every configuration run many times, each run stored as it ends.

A configuration is (program, threads, placement, memory policy, co-runners). Runs go through
the launcher of ``pinlab run`` with the controlled environment on (no ASLR, clean environment
of constant size). ``random`` draws a new placement for every run, from the study's seed and
the run's position, so a study is reproducible and the placement of each run is stored.
"""
from __future__ import annotations

import functools
import hashlib
import os
import random
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pinlab.errors import UsageError

ORDERS = ("interleaved", "blocked", "shuffled")


class StudyInterrupted(Exception):
    """The study was asked to stop (Ctrl-C, SIGTERM...); every finished run is stored."""

    def __init__(self, signum: int, stored: int, name: str) -> None:
        super().__init__(f"study {name} interrupted by signal {signum}; {stored} runs are stored; continue with --resume {name}")
        self.signum = signum
METRIC_HELP = "time (wall seconds), json:KEY (a number in the program's JSON output, KEY dotted) or a regular expression with one group"


@dataclass
class Program:
    """A program of the study: its argv, and a short name for tables."""

    name: str
    argv: list[str]


#: Runs per configuration of an adaptive study before its comparisons are first tested: the
#: Shapiro-Wilk test has little power below about 10 values.
MIN_RUNS = 10
#: The fixed number of runs the seeds use, which an adaptive study is compared with.
FIXED_RUNS = 35


@dataclass
class StudyPlan:
    """A study: ``runs`` per configuration, or ``runs="auto"`` for an adaptive study that adds runs
    until every comparison with the baseline is decided at risk ``alpha`` (between ``min_runs``
    and ``max_runs`` per configuration)."""

    name: str
    programs: list[Program]
    strategies: list[str]
    threads: list[int]
    runs: int | str
    order: str = "interleaved"
    warmup: int = 1
    mem: list[str] = field(default_factory=lambda: ["first-touch"])
    coruns: list[str] = field(default_factory=lambda: ["none"])
    metric: str = "time"
    timeout: float | None = None
    max_failures: int = 10
    seed: int = 0
    counters: list[str] = field(default_factory=list)
    max_runs: int = 100
    min_runs: int = MIN_RUNS
    alpha: float = 0.05
    baseline: str = "none"

    @property
    def adaptive(self) -> bool:
        return self.runs == "auto"

    def parameters(self) -> dict[str, Any]:
        """What defines the study (a resumed study must match it). Keys are only added for the
        features a study uses, so older studies keep matching their stored parameters."""
        parameters = {"programs": [[p.name, p.argv] for p in self.programs], "strategies": self.strategies, "threads": self.threads,
                      "runs": self.runs, "order": self.order, "warmup": self.warmup, "mem": self.mem, "coruns": self.coruns,
                      "metric": self.metric, "timeout": self.timeout}
        if self.counters:
            parameters["counters"] = self.counters
        if self.adaptive:
            parameters.update(max_runs=self.max_runs, min_runs=self.min_runs, alpha=self.alpha, baseline=self.baseline)
        return parameters

    def configs(self) -> list[dict[str, Any]]:
        return [{"program": p.name, "argv": p.argv, "threads": n, "placement": s, "mem": m, "corun": c}
                for p in self.programs for n in self.threads for s in self.strategies for m in self.mem for c in self.coruns]


def parse_program(text: str) -> Program:
    """``stream`` / ``stream:--size 10M`` (a built-in workload with its options) or a command line."""
    from pinlab.workloads import WORKLOADS, workload_path

    head, _, options = text.partition(":")
    if head in WORKLOADS:
        # Always with --json: the output is captured, and the JSON holds every figure (json:KEY metrics).
        return Program(name=head, argv=[workload_path(head), "--json", *shlex.split(options)])
    argv = shlex.split(text)
    if not argv:
        raise UsageError("empty program: give a workload name (stream, mb, primes...) or a command line")
    return Program(name=os.path.basename(argv[0]), argv=argv)


def parse_coruns(text: str) -> str:
    """``none`` or ``KIND:COUNT[,KIND:COUNT...]`` (cpu, sleep, memory), checked now."""
    from pinlab.workloads.corun import KINDS

    if text == "none":
        return text
    for part in text.split("+"):
        kind, _, count = part.partition(":")
        if kind not in KINDS or not count.isdigit() or int(count) < 1:
            raise UsageError(f"malformed co-runner configuration {text!r}: use none or KIND:COUNT (KIND one of {', '.join(KINDS)}), e.g. cpu:1 or sleep:2+cpu:1")
    return text


def check_metric(metric: str) -> None:
    if metric == "time" or metric.startswith("json:"):
        return
    try:
        pattern = re.compile(metric)
    except re.error as exc:
        raise UsageError(f"--metric {metric!r} is not a regular expression ({exc}); use {METRIC_HELP}") from None
    if pattern.groups != 1:
        raise UsageError(f"--metric {metric!r} must have exactly one group (the number), e.g. 'Triad: ([0-9.]+)'")


def extract_metric(metric: str, stdout: str, wall: float) -> float | None:
    """The run's value of the study's metric (None when the output does not contain it)."""
    if metric == "time":
        return wall
    if metric.startswith("json:"):
        import json

        try:
            value: Any = json.loads(stdout)
            for key in metric[5:].split("."):
                value = value[int(key)] if isinstance(value, list) else value[key]
            return float(value)
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    m = re.search(metric, stdout)
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def run_seed(study_seed: int, position: int, index: int) -> int:
    """The seed of one run's random placement: a function of the study seed and the run's place only."""
    digest = hashlib.sha256(f"{study_seed}:{position}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def schedule(plan: StudyPlan, n_configs: int) -> list[tuple[int, int, bool]]:
    """(config position, run index, warm-up?) in the order the runs happen.

    Warm-up runs come first (one round over the configurations), then the measured runs:
    interleaved (one run of each configuration in turn, so drift spreads evenly), blocked (all
    runs of a configuration together) or shuffled (a random order from the study's seed).
    """
    warm = [(c, r, True) for r in range(plan.warmup) for c in range(n_configs)]
    if plan.adaptive:
        return warm  # the measured runs are chosen round by round (see next_round)
    if plan.order == "blocked":
        measured = [(c, r, False) for c in range(n_configs) for r in range(plan.runs)]
    else:
        measured = [(c, r, False) for r in range(plan.runs) for c in range(n_configs)]
        if plan.order == "shuffled":
            random.Random(plan.seed).shuffle(measured)
    return warm + measured


def machine_description() -> dict[str, Any]:
    """Where the study ran: topology summary, kernel, CPU model, governor, tool version."""
    import platform

    from pinlab.measure.noise import governor

    described: dict[str, Any] = {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine()}
    try:
        from pinlab.topology import load_topology
        from pinlab.topology.render import topology_to_json

        topo = load_topology("this")
        described["topology"] = topology_to_json(topo)["summary"]
        described["cpu_model"] = next((p.infos.get("CPUModel") for p in topo.packages if p.infos.get("CPUModel")), None)
        described["topology_xml"] = topo.xml
    except UsageError as exc:
        described["topology_error"] = str(exc)
    described["governor"] = governor(__import__("pathlib").Path("/")).found
    return described


@functools.lru_cache(maxsize=8)
def _counters(names: tuple[str, ...]):
    """Which of the study's counters can be counted here (probed once per study)."""
    from pinlab.measure.counters import parse_events, probe

    return probe(parse_events(",".join(names)))


@functools.lru_cache(maxsize=1)
def _this_topology():
    """This machine's topology, read once per study (hwloc takes tens of milliseconds)."""
    from pinlab.topology import load_topology

    return load_topology("this")


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


def execute_run(plan: StudyPlan, config: dict[str, Any], index: int, warmup: bool) -> dict[str, Any]:
    """One run of one configuration; returns the store's run fields (never raises for a failing program)."""
    from pinlab.launch import ProgramNotExecutable, ProgramNotFound, plan_spec
    from pinlab.launch.runner import run as launch
    from pinlab.study.store import fields_from_record
    from pinlab.workloads.corun import CoRunners

    placement = config["placement"]
    planned = None
    if placement != "none":
        from pinlab.placement import make_placement

        seed = run_seed(plan.seed, config["position"], index) if placement == "random" else None
        planned = make_placement(_this_topology(), strategy=placement, threads=config["threads"], seed=seed)
    spec = plan_spec(
        config["argv"],
        placement=planned,
        mem=config["mem"],
        no_aslr=True,
        clean_env=True,
        sample_ms=100.0,
    )
    if placement == "none":
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
        try:
            record = launch(spec)
            if record.interrupted is not None:
                return {"interrupted": record.interrupted}
        except (ProgramNotFound, ProgramNotExecutable) as exc:
            return {"status": "failed", "exit_status": 127 if isinstance(exc, ProgramNotFound) else 126, "stderr_tail": str(exc)}
        finally:
            for group in coruns:
                group.stop()
        fields = fields_from_record(record.to_json())
        fields["status"] = "timeout" if record.timed_out else ("ok" if record.exit_status == 0 else "failed")
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


def plan_from_parameters(name: str, parameters: dict[str, Any], seed: int, max_failures: int) -> StudyPlan:
    """The plan of a stored study (for --resume)."""
    p = parameters
    adaptive = {k: p[k] for k in ("max_runs", "min_runs", "alpha", "baseline") if k in p}
    return StudyPlan(name=name, programs=[Program(n, a) for n, a in p["programs"]], strategies=p["strategies"], threads=p["threads"],
                     runs=p["runs"], order=p["order"], warmup=p["warmup"], mem=p["mem"], coruns=p["coruns"], metric=p["metric"],
                     timeout=p["timeout"], max_failures=max_failures, seed=seed, counters=p.get("counters", []), **adaptive)


def _values(runs: list[dict[str, Any]], metric: str) -> list[float]:
    """The compared values of successful runs: times, or the inverse of a throughput metric."""
    values = [r["metric"] for r in runs if r["status"] == "ok" and r["metric"] is not None]
    return values if metric == "time" else [1.0 / v for v in values if v]


def undecided(plan: StudyPlan, configs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[int, str]:
    """Configurations (by position) an adaptive study must run again, with the reason.

    Every configuration gets ``min_runs``; after that, a configuration and its baseline get more
    runs while their comparison is not decided (:func:`pinlab.stats.decided`), until either has
    ``max_runs`` stored runs (failed ones count, so a failing program cannot loop forever).
    """
    from pinlab.stats import InvalidSample, compare, decided

    by_config: dict[int, list[dict[str, Any]]] = {c["id"]: [] for c in configs}
    for run in runs:
        if not run["warmup"]:
            by_config[run["config_id"]].append(run)
    stored = {c["position"]: len(by_config[c["id"]]) for c in configs}
    values = {c["position"]: _values(by_config[c["id"]], plan.metric) for c in configs}
    need = {c["position"]: f"{stored[c['position']]}/{plan.min_runs} first runs" for c in configs if stored[c["position"]] < plan.min_runs}
    if need:
        return need

    def group(config):
        return config["program"], config["threads"], config["mem"], config["corun"]

    baselines = {group(c): c["position"] for c in configs if c["placement"] == plan.baseline}
    for config in configs:
        base = baselines.get(group(config))
        position = config["position"]
        if config["placement"] == plan.baseline or base is None:
            continue
        if stored[position] >= plan.max_runs or stored[base] >= plan.max_runs:
            continue
        try:
            settled = decided(compare(values[base], values[position], alpha=plan.alpha))
        except InvalidSample:
            settled = False  # too few successful runs to compare yet
        if not settled:
            need[position] = need[base] = "undecided"
    return need


def next_round(plan: StudyPlan, configs: list[dict[str, Any]], runs: list[dict[str, Any]], round_number: int) -> list[tuple[int, int, bool]]:
    """The next round of an adaptive study: one more run of every configuration still needing one."""
    positions = sorted(undecided(plan, configs, runs))
    if plan.order == "shuffled":
        random.Random(f"{plan.seed}:{round_number}").shuffle(positions)
    counts = {c["id"]: 0 for c in configs}
    for run in runs:
        if not run["warmup"]:
            counts[run["config_id"]] += 1
    return [(p, counts[configs[p]["id"]], False) for p in positions]


def run_study(plan: StudyPlan | None, db: str, *, resume: str | None = None, max_failures: int = 10, progress: bool = True) -> dict[str, Any]:
    """Run (or resume) a study, storing every run as soon as it ends; returns a short summary.

    Ctrl-C or a kill leaves every finished run stored; ``resume`` continues with the runs not
    stored yet. Past ``max_failures`` failed runs the study stops with a UsageError.
    """
    from pinlab import __version__
    from pinlab.measure.noise import WARNING, check
    from pinlab.study.store import Store

    with Store.open(db) as store:
        if resume is not None:
            study = store.study(resume)
            if study is None:
                names = ", ".join(s.name for s in store.studies()) or "none"
                raise UsageError(f"no study named {resume!r} in {db} (studies there: {names})")
            plan = plan_from_parameters(study.name, study.parameters, study.seed or 0, max_failures)
        else:
            warnings = [f"{f.name}: {f.found}" for f in check() if f.status == WARNING]
            study = store.create_study(plan.name, plan.parameters(), plan.configs(), plan.seed, machine_description(), __version__, warnings)
        configs = store.configs(study.id)
        stored = store.runs(study.id)
        done = {(r["config_id"], r["run_index"], r["warmup"]) for r in stored}
        order = schedule(plan, len(configs))
        todo = [(c, r, w) for c, r, w in order if (configs[c]["id"], r, w) not in done]
        failures = sum(1 for r in stored if r["status"] != "ok" and not r["warmup"])
        total = len(order) + (plan.max_runs * len(configs) if plan.adaptive else 0)  # adaptive: an upper bound
        bar = _progress(progress, total, len(stored))
        new_runs = 0

        def one(c: int, r: int, w: bool, note: str = "") -> None:
            nonlocal failures, new_runs
            config = configs[c]
            runs_text = f" run {r + 1}" + (f"/{plan.runs}" if not plan.adaptive else note)
            bar.describe(f"{config['program']} {config['placement']} x{config['threads']}" + (" (warm-up)" if w else runs_text))
            try:
                fields = execute_run(plan, config, r, w)
            except KeyboardInterrupt:
                fields = {"interrupted": 2}
            if "interrupted" in fields:  # the program was stopped with the study: not a run to keep
                raise StudyInterrupted(fields["interrupted"], len(store.runs(study.id)), study.name)
            store.add_run(config["id"], r, w, **fields)
            new_runs += 1
            bar.advance()
            if fields["status"] != "ok" and not w:
                failures += 1
                if failures >= max_failures:
                    tail = (fields.get("stderr_tail") or "").strip().splitlines()[-1:] or ["(no output)"]
                    raise UsageError(f"study {study.name} stopped after {failures} failed runs (last: {config['program']}, {fields['status']}, "
                                     f"exit status {fields.get('exit_status')}: {tail[0][:200]}); the runs are stored; fix the program and --resume {study.name}")

        try:
            for c, r, w in todo:
                one(c, r, w)
            round_number = 0
            while plan.adaptive:
                batch = next_round(plan, configs, store.runs_frame(study.name), round_number)  # without the records: only status and metric are needed
                if not batch:
                    break
                round_number += 1
                for c, r, w in batch:
                    one(c, r, w, f" (adaptive: {len(batch)} configurations undecided)")
        finally:
            bar.close()
        store.finish(study.id)
        measured = sum(1 for r in store.runs(study.id) if not r["warmup"])
        summary = {"study": study.name, "db": db, "runs": len(store.runs(study.id)), "new_runs": new_runs, "failures": failures,
                   "measured": measured, "configs": len(configs), "adaptive": plan.adaptive}
        return summary


class _progress:
    """A rich progress bar (configuration, runs done, time left), or nothing when not wanted."""

    def __init__(self, enabled: bool, total: int, done: int) -> None:
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=False)
            self.task = self.bar.add_task("starting", total=total, completed=done)
            self.bar.start()

    def describe(self, text: str) -> None:
        if self.bar:
            self.bar.update(self.task, description=text)

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
