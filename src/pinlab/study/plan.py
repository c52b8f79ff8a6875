"""What a study is: its programs, configurations and metric, checked before anything runs.

A configuration is (program, threads, placement, memory policy, co-runners); a :class:`StudyPlan`
lists them and says how many runs each gets (or ``auto``: until every comparison with the baseline
is decided). :meth:`StudyPlan.validate` refuses a plan that could not run as asked, and
:func:`plan_from_parameters` rebuilds the plan of a stored study for ``--resume``. Running the
plan is :mod:`pinlab.study.engine`'s; the order of its runs, :mod:`pinlab.study.schedule`'s.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.graph import AffinityGraph, graph_from_json, load_graph
from pinlab.launch import ProgramNotExecutable, ProgramNotFound
from pinlab.launch.memory import parse_policy
from pinlab.launch.runner import resolve_program
from pinlab.measure.counters import parse_event
from pinlab.placement import make_placement
from pinlab.placement.kinds import restrict_to_kind
from pinlab.placement.strategies import GRAPH_STRATEGIES, UNPINNED, canonical_strategy
from pinlab.study.direction import check_better_option
from pinlab.study.limits import MAX_RUNS_PER_CONFIG, MAX_STUDY_RUNS, MAX_TIMEOUT_S
from pinlab.study.machine import this_topology
from pinlab.workloads import WORKLOADS, workload_path
from pinlab.workloads.corun import KINDS

ORDERS = ("interleaved", "blocked", "shuffled")
#: A placement given as CPUs rather than a strategy: ``cpus:0,2,1,3`` (thread i on the i-th CPU;
#: a CPU listed twice is shared by two threads, as autopin's candidates may be).
EXPLICIT = "cpus:"
#: ``runs`` of a racing study (``pinlab tune``): every placement still in the race gets one more
#: run per round, and a placement shown worse than the leader leaves it (see pinlab.study.race).
RACE = "race"
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

    #: A racing study (``runs="race"``): the equivalence margin (a share of the leader's median),
    #: and the budget, in measured runs and in seconds of runs (warm-ups included); None: no limit.
    tolerance: float = 0.02
    #: Names for people of some placements (placement -> label, e.g. an autopin candidate's
    #: "scatter" for its cpus:LIST), kept with each configuration (its ``extra``).
    labels: dict[str, str] = field(default_factory=dict)
    budget_runs: int | None = None
    budget_seconds: float | None = None
    #: The (placement, memory policy) pairs studied, when not every placement goes with every
    #: policy (a tune's memory candidates interleave over the nodes of their own CPUs); None: all.
    pairs: list[list[str]] | None = None

    @property
    def adaptive(self) -> bool:
        return self.runs == "auto"

    @property
    def racing(self) -> bool:
        return self.runs == RACE

    @property
    def rounds_chosen(self) -> bool:
        """Whether the measured runs are chosen round by round from the runs stored (auto or race)."""
        return self.adaptive or self.racing

    def validate(self, topology=None, fits: bool = True) -> None:
        """Refuse, with one clear UsageError, any plan that could not run as asked.

        Called before anything is stored or run (by :func:`run_study`), so the command line and
        the Python API refuse the same things. ``topology`` (default: this machine) is what the
        placements must fit; ``fits=False`` leaves that check to the machines that will run the
        study (a Slurm campaign's nodes check it as each task starts).
        """
        if not isinstance(self.name, str) or not self.name.strip():
            raise UsageError("the study name is empty: give a name with --name")
        if not self.programs:
            raise UsageError("no program to study: give -- PROGRAM ARGS or --workload NAME[:OPTIONS]")
        if not self.rounds_chosen and (isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1):
            raise UsageError(f"--runs must be a positive number of runs or auto (got {self.runs!r})")
        if not self.rounds_chosen and self.runs > MAX_RUNS_PER_CONFIG:
            raise UsageError(f"--runs {self.runs} is more than {MAX_RUNS_PER_CONFIG} runs per configuration: run fewer (or use --runs auto)")
        if self.racing:
            self._check_race()
        if self.rounds_chosen:
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
        self.strategies = [canonical_placement(s) for s in self.strategies]
        self.labels = {canonical_placement(k): str(v) for k, v in self.labels.items()}
        if len(set(self.strategies)) != len(self.strategies):
            raise UsageError(f"a placement is listed twice in --strategies {','.join(self.strategies)}: give each once")
        self._check_graph()
        if self.adaptive and self.baseline not in self.strategies:
            raise UsageError(f"--runs auto compares every placement with the baseline {self.baseline}: add {self.baseline} to --strategies")
        check_metric(self.metric)

        self.metric_better = check_better_option(self.metric, self.metric_better, [(p.name, p.argv) for p in self.programs])

        self.mem = [str(parse_policy(m)) for m in self.mem]
        self._check_pairs()
        self.coruns = [parse_coruns(c) for c in self.coruns]
        for name in self.counters:
            parse_event(name)
        n_configs = len(self.configs())
        per_config = self.warmup + (self.max_runs if self.rounds_chosen else self.runs)
        if n_configs * per_config > MAX_STUDY_RUNS:
            raise UsageError(
                f"this study would schedule {n_configs * per_config:,} runs ({n_configs} configurations x {per_config}), "
                f"more than {MAX_STUDY_RUNS:,}: give fewer runs, placements or thread counts"
            )
        for program in self.programs:
            check_program(program)
        if fits:
            self._check_fits(topology)

    def _check_pairs(self) -> None:
        """Each pair names a listed placement and memory policy, once."""
        if self.pairs is None:
            return
        pairs = []
        for pair in self.pairs:
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise UsageError(f"a studied pair is a placement and a memory policy, not {pair!r}")
            placement, mem = canonical_placement(pair[0]), str(parse_policy(pair[1]))
            if placement not in self.strategies or mem not in self.mem:
                raise UsageError(f"the pair {placement} with memory {mem} names a placement or policy the study does not list")
            if [placement, mem] in pairs:
                raise UsageError(f"the pair {placement} with memory {mem} is listed twice: give each once")
            pairs.append([placement, mem])
        if not pairs:
            raise UsageError("no pair of placement and memory policy to study")
        self.pairs = pairs

    def _check_race(self) -> None:
        """A race needs two placements or more, a margin below 1 and budgets that allow a round."""
        if (len(self.pairs) if self.pairs is not None else len(self.strategies) * len(self.mem)) < 2:
            raise UsageError("a race needs at least two placements (or memory policies) to choose between")
        if len(self.programs) != 1 or len(self.threads) != 1 or len(self.coruns) != 1:
            raise UsageError("a race chooses for one program, one thread count and one co-runner setting: give one of each")
        if not (isinstance(self.tolerance, (int, float)) and math.isfinite(self.tolerance) and 0 <= self.tolerance < 1):
            raise UsageError(f"--tolerance must be a share between 0 and 1, e.g. 0.02 for 2% (got {self.tolerance!r})")
        if self.budget_runs is not None and (isinstance(self.budget_runs, bool) or not isinstance(self.budget_runs, int) or self.budget_runs < 1):
            raise UsageError(f"--budget in runs must be a positive number of runs (got {self.budget_runs!r})")
        if self.budget_seconds is not None and not (
            isinstance(self.budget_seconds, (int, float)) and math.isfinite(self.budget_seconds) and self.budget_seconds > 0
        ):
            raise UsageError(f"--budget in time must be a positive duration such as 90s, 10m or 1h (got {self.budget_seconds!r})")

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
                    study_placement(placed_on, strategy, threads, seed=0, **self._placement_options(strategy))
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
        if self.rounds_chosen:
            parameters.update(max_runs=self.max_runs, min_runs=self.min_runs, alpha=self.alpha, baseline=self.baseline)
        if self.racing:
            parameters.update(tolerance=self.tolerance, budget_runs=self.budget_runs, budget_seconds=self.budget_seconds)
        if self.labels:
            parameters["labels"] = self.labels
        if self.pairs is not None:
            parameters["pairs"] = self.pairs
        return parameters

    def configs(self) -> list[dict[str, Any]]:
        return [
            {"program": p.name, "argv": p.argv, "threads": n, "placement": s, "mem": m, "corun": c}
            | ({"extra": {"label": self._label(s, m)}} if s in self.labels else {})
            for p in self.programs
            for n in self.threads
            for s in self.strategies
            for m in self.mem
            if self.pairs is None or [s, m] in self.pairs
            for c in self.coruns
        ]

    def _label(self, placement: str, mem: str) -> str:
        """A placement's name for people, with its memory policy where the study has several."""
        return self.labels[placement] + (f", memory {mem}" if len(self.mem) > 1 else "")


def explicit_cpus(placement: str) -> list[int] | None:
    """The CPUs of a placement given as ``cpus:LIST``, None for a strategy's name."""
    if not placement.startswith(EXPLICIT):
        return None
    text = placement[len(EXPLICIT) :]
    cpus = []
    for part in text.split(","):  # in the order given, repeats kept: thread i takes the i-th
        cpus.extend(parse_cpulist(part, what=f"placement {placement!r}"))
    if not cpus:
        raise UsageError(f"placement {placement!r} names no CPU: write cpus:0,2,4")
    return cpus


def canonical_placement(text: str) -> str:
    """A study's placement as stored: a strategy's canonical name, or ``cpus:LIST`` written out."""
    text = text.strip()
    if text.lower().startswith(EXPLICIT):
        return EXPLICIT + ",".join(map(str, explicit_cpus(EXPLICIT + text[len(EXPLICIT) :]) or []))
    return canonical_strategy(text, explicit_hint=False)


def study_placement(topo, placement: str, threads: int, seed: int | None = None, cpu_kind: str | None = None, **options):
    """The Placement of one of a study's placements for ``threads`` threads: a strategy's, or the
    first ``threads`` of a ``cpus:LIST`` (which must list that many)."""
    cpus = explicit_cpus(placement)
    if cpus is None:
        return make_placement(topo, strategy=placement, threads=threads, seed=seed, cpu_kind=cpu_kind, **options)
    if len(cpus) < threads:
        raise UsageError(f"placement {placement} lists {len(cpus)} CPUs for {threads} threads")
    return make_placement(topo, cpus=",".join(map(str, cpus[:threads])), threads=threads, oversubscribe=True, cpu_kind=cpu_kind)


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


def plan_from_parameters(name: str, parameters: dict[str, Any], seed: int, max_failures: int) -> StudyPlan:
    """The plan of a stored study (for --resume)."""
    p = parameters
    kept = ("max_runs", "min_runs", "alpha", "baseline", "tolerance", "budget_runs", "budget_seconds", "labels", "pairs")
    adaptive = {k: p[k] for k in kept if k in p}
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
