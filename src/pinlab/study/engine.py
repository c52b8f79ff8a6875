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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pinlab.errors import UsageError
from pinlab.graph import AffinityGraph, graph_from_json, load_graph
from pinlab.launch import ProgramNotExecutable, ProgramNotFound, plan_spec
from pinlab.launch.memory import parse_policy
from pinlab.launch.openmp import disagreements
from pinlab.launch.runner import resolve_program
from pinlab.launch.runner import run as launch
from pinlab.measure.counters import parse_event, parse_events, probe
from pinlab.measure.noise import WARNING, check
from pinlab.placement import make_placement
from pinlab.placement.kinds import restrict_to_kind
from pinlab.placement.strategies import GRAPH_STRATEGIES, UNPINNED, canonical_strategy
from pinlab.stats import InvalidSample, compare, decided
from pinlab.study.direction import check_better_option, study_direction
from pinlab.study.limits import MAX_RUNS_PER_CONFIG, MAX_STUDY_RUNS, MAX_TIMEOUT_S
from pinlab.study.machine import machine_description, node_identity, this_topology
from pinlab.study.store import Store, damaged_database, fields_from_record
from pinlab.version import __version__
from pinlab.words import plural
from pinlab.workloads import WORKLOADS, workload_path
from pinlab.workloads.corun import KINDS, CoRunners

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
#: --sample-ms auto: about this many samples of where each thread runs per run, at a period
#: between these bounds (milliseconds), chosen per program from its warm-up runs.
SAMPLES_PER_RUN = 20
SAMPLE_MS_BOUNDS = (5.0, 100.0)
#: The period used without a warm-up to learn from (and by studies from before --sample-ms).
DEFAULT_SAMPLE_MS = 100.0


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
    #: "lower" or "higher": which values of the metric are better; required for any metric but
    #: time (see :mod:`pinlab.study.direction`), stored with the study.
    metric_better: str | None = None
    timeout: float | None = None
    max_failures: int = 10
    seed: int = 0
    counters: list[str] = field(default_factory=list)
    max_runs: int = 100
    min_runs: int = MIN_RUNS
    alpha: float = 0.05
    baseline: str = "none"
    sample_ms: float | str = "auto"
    cpu_kind: str | None = None  # hybrid processors: placements on one kind of core (see pinlab.placement.kinds)
    #: The affinity graph of the graph strategies (lpgp, treematch...): an AffinityGraph, a graph
    #: file's path or a graph's JSON (a stored study's); stored with the study, so a resumed study
    #: maps the same graph whatever became of the file.
    graph: Any = None
    domains: int | None = None  # graph strategies: use only this many sockets

    @property
    def adaptive(self) -> bool:
        return self.runs == "auto"

    def validate(self, topology=None, fits: bool = True) -> None:
        """Refuse, with one clear UsageError, any plan that could not run as asked.

        Called before anything is stored or run (by :func:`run_study`), so the command line and
        the Python API refuse the same things. ``topology`` (default: this machine) is what the
        placements must fit; ``fits=False`` leaves that check to the machines that will run the
        study (a Slurm campaign's nodes check it as each task starts).
        """
        import math

        if not isinstance(self.name, str) or not self.name.strip():
            raise UsageError("the study name is empty: give a name with --name")
        if not self.programs:
            raise UsageError("no program to study: give -- PROGRAM ARGS or --workload NAME[:OPTIONS]")
        if self.runs != "auto" and (isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1):
            raise UsageError(f"--runs must be a positive number of runs or auto (got {self.runs!r})")
        if self.runs != "auto" and self.runs > MAX_RUNS_PER_CONFIG:
            raise UsageError(f"--runs {self.runs} is more than {MAX_RUNS_PER_CONFIG} runs per configuration: run fewer (or use --runs auto)")
        if self.adaptive:
            if self.min_runs < 3:
                raise UsageError(f"--min-runs must be at least 3: the tests need that many runs (got {self.min_runs})")
            if self.max_runs < self.min_runs:
                raise UsageError(f"--max-runs ({self.max_runs}) must be at least --min-runs ({self.min_runs})")
            if self.max_runs > MAX_RUNS_PER_CONFIG:
                raise UsageError(f"--max-runs {self.max_runs} is more than {MAX_RUNS_PER_CONFIG} runs per configuration: give fewer")
            if not 0 < self.alpha < 0.5:
                raise UsageError(f"--alpha must be between 0 and 0.5 (got {self.alpha})")
        if not 0 <= self.warmup <= MAX_RUNS_PER_CONFIG:
            raise UsageError(f"--warmup must be between 0 and {MAX_RUNS_PER_CONFIG} runs per configuration (got {self.warmup})")
        if self.order not in ORDERS:
            raise UsageError(f"unknown --order {self.order!r}: use {', '.join(ORDERS)}")
        if self.max_failures < 1:
            raise UsageError(f"--max-failures must be at least 1 (got {self.max_failures})")
        if self.timeout is not None and not (math.isfinite(self.timeout) and 0 < self.timeout <= MAX_TIMEOUT_S):
            raise UsageError(
                f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:.0f} (a week) (got {self.timeout}); leave it out for no timeout"
            )
        if self.sample_ms != "auto" and not (
            isinstance(self.sample_ms, (int, float)) and math.isfinite(self.sample_ms) and 1 <= self.sample_ms <= 3_600_000
        ):
            raise UsageError(f"--sample-ms must be auto or a number of milliseconds between 1 and 3600000 (got {self.sample_ms!r})")
        if not self.threads or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.threads):
            raise UsageError(f"--threads must be positive thread counts (got {self.threads})")
        self.strategies = [canonical_strategy(s, explicit_hint=False) for s in self.strategies]
        if len(set(self.strategies)) != len(self.strategies):
            raise UsageError(f"a placement is listed twice in --strategies {','.join(self.strategies)}: give each once")
        self._check_graph()
        if self.adaptive and self.baseline not in self.strategies:
            raise UsageError(f"--runs auto compares every placement with the baseline {self.baseline}: add {self.baseline} to --strategies")
        check_metric(self.metric)

        self.metric_better = check_better_option(self.metric, self.metric_better, [(p.name, p.argv) for p in self.programs])

        self.mem = [str(parse_policy(m)) for m in self.mem]
        self.coruns = [parse_coruns(c) for c in self.coruns]
        for name in self.counters:
            parse_event(name)
        n_configs = len(self.configs())
        per_config = self.warmup + (self.max_runs if self.adaptive else self.runs)
        if n_configs * per_config > MAX_STUDY_RUNS:
            raise UsageError(
                f"this study would schedule {n_configs * per_config:,} runs ({n_configs} configurations x {per_config}), "
                f"more than {MAX_STUDY_RUNS:,}: give fewer runs, placements or thread counts"
            )
        for program in self.programs:
            check_program(program)
        if fits:
            self._check_fits(topology)

    def _check_graph(self) -> None:
        """A graph goes with graph strategies, and fits every thread count they are studied with."""
        mapped = [s for s in self.strategies if s in GRAPH_STRATEGIES]
        if self.graph is None:
            if mapped:
                raise UsageError(f"strategy {mapped[0]} needs --graph FILE (make one with pinlab trace)")
            if self.domains is not None:
                raise UsageError("--domains goes with a graph strategy among --strategies (lpgp, treematch...)")
            return
        if not mapped:
            raise UsageError(f"--graph is for the graph strategies ({', '.join(GRAPH_STRATEGIES)}): add one to --strategies or leave --graph out")
        if isinstance(self.graph, dict):
            self.graph = graph_from_json(self.graph, source="stored with the study")
        elif not isinstance(self.graph, AffinityGraph):
            self.graph = load_graph(self.graph)
        for threads in self.threads:
            if threads != self.graph.threads:
                raise UsageError(
                    f"graph {self.graph.source} was measured with {self.graph.threads} threads but the study asks for {threads}: "
                    f"{mapped[0]} places exactly the traced threads; give -n {self.graph.threads}"
                )

    def _placement_options(self, strategy: str) -> dict[str, Any]:
        """The graph and --domains for a graph strategy, nothing for the others."""
        return {"graph": self.graph, "domains": self.domains} if strategy in GRAPH_STRATEGIES else {}

    def _check_fits(self, topology) -> None:
        """Every placement and co-runner configuration fits the machine (this one by default)."""
        topo = topology if topology is not None else this_topology()
        placed_on = topo
        if self.cpu_kind is not None:  # refused in its own words when the kind is unknown or absent
            placed_on = restrict_to_kind(topo, self.cpu_kind)
        for strategy in self.strategies:
            if strategy in UNPINNED:
                continue
            for threads in self.threads:
                try:
                    make_placement(placed_on, strategy=strategy, threads=threads, seed=0, **self._placement_options(strategy))
                except UsageError as exc:  # its hints (--oversubscribe, --smt) are options of place and run, not of study
                    raise UsageError(
                        f"placement {strategy} with {threads} threads does not fit this machine: {str(exc).split('; use ')[0]}; "
                        "give fewer threads with -n, or leave this placement out"
                    ) from None
        cpus = len(topo.allowed_cpus)
        for corun in self.coruns:
            count = corun_count(corun)
            if count > cpus:
                raise UsageError(
                    f"co-runners {corun} ask for {count} processes but this process may use only {cpus} CPUs "
                    f"(one co-runner per CPU): give at most {corun.split(':')[0]}:{cpus}"
                )

    def parameters(self) -> dict[str, Any]:
        """What defines the study (a resumed study must match it). Keys are only added for the
        features a study uses, so older studies keep matching their stored parameters."""
        parameters = {
            "programs": [[p.name, p.argv] for p in self.programs],
            "strategies": self.strategies,
            "threads": self.threads,
            "runs": self.runs,
            "order": self.order,
            "warmup": self.warmup,
            "mem": self.mem,
            "coruns": self.coruns,
            "metric": self.metric,
            "timeout": self.timeout,
        }
        if self.metric_better is not None:  # None only for a study stored before directions were stored
            parameters["metric_better"] = self.metric_better
        if self.counters:
            parameters["counters"] = self.counters
        if self.cpu_kind is not None:
            parameters["cpu_kind"] = self.cpu_kind
        if self.graph is not None:
            parameters["graph"] = self.graph.to_json() if hasattr(self.graph, "to_json") else self.graph
        if self.domains is not None:
            parameters["domains"] = self.domains
        parameters["sample_ms"] = self.sample_ms
        if self.adaptive:
            parameters.update(max_runs=self.max_runs, min_runs=self.min_runs, alpha=self.alpha, baseline=self.baseline)
        return parameters

    def configs(self) -> list[dict[str, Any]]:
        return [
            {"program": p.name, "argv": p.argv, "threads": n, "placement": s, "mem": m, "corun": c}
            for p in self.programs
            for n in self.threads
            for s in self.strategies
            for m in self.mem
            for c in self.coruns
        ]


def parse_workload(text: str) -> Program:
    """``stream`` / ``stream:--size 10M``: a built-in workload with its options (``--workload``).

    Only built-in workloads: a name that is not one is an error, never looked up on PATH (a
    program goes after ``--``).
    """
    head, _, options = text.partition(":")
    head = head.strip()
    if head not in WORKLOADS:
        raise UsageError(
            f"unknown workload {head!r} in --workload {text!r}: choose one of {', '.join(WORKLOADS)} "
            "(see `pinlab workload list`), or give any other program after --"
        )
    try:
        words = shlex.split(options)
    except ValueError as exc:
        raise UsageError(f"cannot split the options of --workload {text!r}: {exc}") from None
    # Always with --json: the output is captured, and the JSON holds every figure (json:KEY metrics).
    return Program(name=head, argv=[workload_path(head), "--json", *words])


def parse_command(argv: list[str]) -> Program:
    """A program and its arguments (what follows ``--``)."""
    if not argv or not argv[0]:
        raise UsageError("empty program: give a command line after -- or a --workload NAME")
    return Program(name=os.path.basename(argv[0]), argv=list(argv))


def check_program(program: Program) -> None:
    """The program exists and can be executed, as ``pinlab run`` would find it (else exit 2 now)."""
    try:
        resolve_program(program.argv[0], os.environ.get("PATH", os.defpath))
    except (ProgramNotFound, ProgramNotExecutable) as exc:
        raise UsageError(f"cannot study {program.argv[0]!r}: {exc}; check the path or PATH") from None


def corun_count(corun: str) -> int:
    """How many co-runner processes a co-runner configuration starts (0 for none)."""
    if corun == "none":
        return 0
    return sum(int(part.partition(":")[2]) for part in corun.split("+"))


def parse_coruns(text: str) -> str:
    """``none`` or ``KIND:COUNT[,KIND:COUNT...]`` (cpu, sleep, memory), checked now."""
    if text == "none":
        return text
    for part in text.split("+"):
        kind, _, count = part.partition(":")
        if kind not in KINDS or not (count.isascii() and count.isdigit()) or int(count) < 1:
            raise UsageError(
                f"malformed co-runner configuration {text!r}: use none or KIND:COUNT (KIND one of {', '.join(KINDS)}), e.g. cpu:1 or sleep:2+cpu:1"
            )
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


def schedule(plan: StudyPlan, n_configs: int) -> Iterator[tuple[int, int, bool]]:
    """(config position, run index, warm-up?) in the order the runs happen, generated lazily.

    Warm-up runs come first (one round over the configurations), then the measured runs:
    interleaved (one run of each configuration in turn, so drift spreads evenly), blocked (all
    runs of a configuration together) or shuffled (a random order from the study's seed). Only
    the shuffled order holds anything in memory: a permutation of run numbers (4-8 bytes a run,
    within the bound :data:`MAX_STUDY_RUNS`).
    """
    for r in range(plan.warmup):
        for c in range(n_configs):
            yield c, r, True
    if plan.adaptive:
        return  # the measured runs are chosen round by round (see next_round)
    if plan.order == "blocked":
        for c in range(n_configs):
            for r in range(plan.runs):
                yield c, r, False
        return
    numbers: Iterable[int] = range(plan.runs * n_configs)
    if plan.order == "shuffled":
        # The same permutation as shuffling the list of (config, run) pairs itself: shuffle
        # moves elements by position only, so studies resumed across versions keep their order.
        numbers = list(numbers)
        random.Random(plan.seed).shuffle(numbers)
    for number in numbers:
        yield number % n_configs, number // n_configs, False


def scheduled_runs(plan: StudyPlan, n_configs: int) -> int:
    """How many runs :func:`schedule` yields (for an adaptive study: the most it can take)."""
    return n_configs * (plan.warmup + (plan.max_runs if plan.adaptive else plan.runs))


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

    ``sample_ms``: how often pinlab samples where each thread runs (see :func:`sample_period`).
    A co-runner that ended before the run did (it crashed, or its options were wrong) makes the
    run failed: the program did not run next to the load the configuration says.
    """
    placement = config["placement"]
    planned = None
    if placement != "none":
        seed = run_seed(plan.seed, config["position"], index) if placement == "random" else None
        planned = make_placement(
            this_topology(), strategy=placement, threads=config["threads"], seed=seed, cpu_kind=plan.cpu_kind, **plan._placement_options(placement)
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


def plan_from_parameters(name: str, parameters: dict[str, Any], seed: int, max_failures: int) -> StudyPlan:
    """The plan of a stored study (for --resume)."""
    p = parameters
    adaptive = {k: p[k] for k in ("max_runs", "min_runs", "alpha", "baseline") if k in p}
    return StudyPlan(
        name=name,
        programs=[Program(n, a) for n, a in p["programs"]],
        strategies=p["strategies"],
        threads=p["threads"],
        runs=p["runs"],
        order=p["order"],
        warmup=p["warmup"],
        mem=p["mem"],
        coruns=p["coruns"],
        metric=p["metric"],
        metric_better=p.get("metric_better"),
        timeout=p["timeout"],
        max_failures=max_failures,
        seed=seed,
        counters=p.get("counters", []),
        sample_ms=p.get("sample_ms", DEFAULT_SAMPLE_MS),
        cpu_kind=p.get("cpu_kind"),
        graph=p.get("graph"),
        domains=p.get("domains"),
        **adaptive,
    )  # studies from before --sample-ms sampled every 100 ms


def _values(runs: list[dict[str, Any]]) -> list[float]:
    """The compared values of successful runs, in the metric's own unit (compare() is told its direction)."""
    return [r["metric"] for r in runs if r["status"] == "ok" and r["metric"] is not None]


def undecided(plan: StudyPlan, configs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[int, str]:
    """Configurations (by position) an adaptive study must run again, with the reason.

    Every configuration gets ``min_runs``; after that, a configuration and its baseline get more
    runs while their comparison is not decided (:func:`pinlab.stats.decided`), until either has
    ``max_runs`` stored runs (failed ones count, so a failing program cannot loop forever).
    """
    by_config: dict[int, list[dict[str, Any]]] = {c["id"]: [] for c in configs}
    for run in runs:
        if not run["warmup"]:
            by_config[run["config_id"]].append(run)
    stored = {c["position"]: len(by_config[c["id"]]) for c in configs}
    values = {c["position"]: _values(by_config[c["id"]]) for c in configs}
    direction = study_direction(plan.parameters())  # a resumed study's stored direction, or what pinlab knows or assumed
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
            settled = decided(compare(values[base], values[position], alpha=plan.alpha, better=direction.better, seconds=direction.seconds))
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


def sample_period(plan: StudyPlan, config: dict[str, Any], runs: list[dict[str, Any]]) -> float:
    """How often (ms) a run of ``config`` samples where its threads run.

    A number given with ``--sample-ms`` is used as it is. ``auto`` aims at about
    :data:`SAMPLES_PER_RUN` samples per run whatever its length: the period is the shortest
    wall time among the program's stored warm-up runs (all its configurations) divided by that,
    within :data:`SAMPLE_MS_BOUNDS`. Every measured run of a program thus samples at the same
    period (sampling costs pinlab a little CPU time, the same in every configuration compared).
    Warm-ups themselves, and studies without warm-ups, use :data:`DEFAULT_SAMPLE_MS`.
    """
    if plan.sample_ms != "auto":
        return float(plan.sample_ms)
    walls = [
        r["wall_seconds"]
        for r in runs
        if r["warmup"]
        and r["wall_seconds"]
        and r.get("program", config["program"]) == config["program"]
        and r.get("argv", config["argv"]) == config["argv"]
    ]
    if not walls:
        return DEFAULT_SAMPLE_MS
    low, high = SAMPLE_MS_BOUNDS
    return round(min(high, max(low, min(walls) * 1000 / SAMPLES_PER_RUN)), 1)


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
            runs_text = f" run {r + 1}" + (f"/{plan.runs}" if not plan.adaptive else note)
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
                if failures >= max_failures:
                    raise UsageError(
                        f"study {study.name} stopped after {plural(failures, 'failed run')} (last: {config['program']}, "
                        f"{failure_reason(fields)}); the runs are stored; fix the program and --resume {study.name}"
                    )

        try:
            for c, r, w in only if only is not None else schedule(plan, len(configs)):
                if (configs[c]["id"], r, w) not in done:
                    one(c, r, w)
            round_number = 0
            while plan.adaptive and only is None:
                batch = next_round(plan, configs, store.run_rows(study.name), round_number)  # without the records: only status and metric are needed
                if not batch:
                    break
                round_number += 1
                for c, r, w in batch:
                    one(c, r, w, f" (adaptive: {plural(len(batch), 'configuration')} undecided)")
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
        }
        succeeded = {r["config_id"] for r in measured if r["status"] == "ok"}
        empty = [c for c in configs if c["id"] not in succeeded]
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
            import sys

            print(text, file=sys.stderr, flush=True)

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
