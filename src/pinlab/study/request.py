"""What ``pinlab study`` is asked, turned into a checked :class:`StudyPlan` before anything runs.

The command line and the Python API go through the same functions, so a study the command
refuses is refused from Python with the same one-line message: option values as the command
line spells them (``runs="auto"``, ``threads="1,2"``, ``strategies="none,compact"``), the
combinations of a local study, a resumed one and a Slurm campaign, and the actions on a stored
campaign (collect, status, resume).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence

from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure.counters import parse_events, probe
from pinlab.study.plan import StudyPlan, parse_command, parse_workload

#: ``pinlab study``'s defaults, for the Python API as for the command line.
DEFAULTS = dict(
    strategies="none,compact,scatter",
    runs="35",
    max_runs=100,
    min_runs=10,
    alpha=0.05,
    order="interleaved",
    warmup=1,
    mem="first-touch",
    corun="none",
    metric="time",
    sample_ms="auto",
    max_failures=10,
    seed=0,
)


def study_plan(
    *,
    name: str | None = None,
    program: Sequence[str] = (),
    workloads: Sequence[str] = (),
    threads: str | None = None,
    counters: str | None = None,
    metric_better: str | None = None,
    timeout: float | None = None,
    cpu_kind: str | None = None,
    on_nodes: bool = False,
    notice: Callable[[str], None] = lambda text: None,
    **options,
) -> StudyPlan:
    """The options of ``pinlab study``, spelled as on its command line, as one StudyPlan.

    ``on_nodes``: the runs happen on other machines (a Slurm campaign), so this machine's CPU
    count is no default and counters are checked there. ``notice`` hears what cannot be counted
    here. StudyPlan.validate checks the rest before the database is opened."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise UsageError(f"unknown study option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    o = {**DEFAULTS, **options}
    programs = [parse_workload(w) for w in workloads]
    if program:
        programs.append(parse_command(list(program)))
    usable: list[str] = []
    if counters is not None and on_nodes:  # each node counts what it can (checked there, run by run)
        usable = [e.name for e in parse_events(counters)]
    elif counters is not None:
        found = probe(parse_events(counters))
        usable = [e.name for e in found.usable]
        for text in found.notices:
            notice(text)
    if threads is None and on_nodes:
        raise UsageError("--backend slurm: give the thread counts with -n (this machine's CPU count says nothing of the nodes')")
    return StudyPlan(
        name=name or datetime.datetime.now().strftime("study-%Y%m%d-%H%M%S"),
        programs=programs,
        strategies=o["strategies"].split(","),
        threads=parse_cpulist(threads or str(len(os.sched_getaffinity(0))), what="--threads list"),
        runs=_runs(o["runs"]),
        order=o["order"],
        warmup=o["warmup"],
        mem=o["mem"].split(","),
        coruns=o["corun"].split(","),
        metric=o["metric"],
        metric_better=metric_better,
        timeout=timeout,
        max_failures=o["max_failures"],
        seed=o["seed"],
        counters=usable,
        max_runs=o["max_runs"],
        min_runs=o["min_runs"],
        alpha=o["alpha"],
        sample_ms=_sample_ms(o["sample_ms"]),
        cpu_kind=cpu_kind,
    )


def _runs(runs: str | int) -> str | int:
    text = str(runs).strip().lower()
    if text == "auto":
        return text
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"--runs must be a positive number of runs or auto (got {runs!r})")
    return int(text)


def _sample_ms(sample_ms: str | float) -> str | float:
    text = str(sample_ms).strip().lower()
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--sample-ms must be auto or a number of milliseconds (got {sample_ms!r})") from None


def check_local(*, resume: str | None = None, slurm_options: Sequence[str] = (), program=(), workloads=(), metric_better=None, placements=()) -> None:
    """A local study (new or resumed) takes no Slurm option; a resumed one keeps what it stored.

    ``slurm_options``: the Slurm-only options given; ``placements``: the placement options given
    (--cpu-kind, --graph, --domains), which a resumed study keeps from its first start."""
    if slurm_options:
        raise UsageError("--results, --nodes, --partition, --time and --sbatch-arg are for --backend slurm")
    if resume:
        if program or workloads:
            raise UsageError("--resume continues a stored study with its own programs: give no program or --workload")
        if metric_better is not None:
            raise UsageError("--resume continues a stored study with its own metric and direction: leave --metric-better out")
        if placements:
            raise UsageError("--resume continues a stored study with its own placements: leave --cpu-kind, --graph and --domains out")


def campaign_action(collect: str | None, status: str | None, resume: str | None, *, extra=(), ignored: Sequence[str] = ()) -> tuple[str, str]:
    """Which action on a stored Slurm campaign was asked, and its name: (collect|status|resume, NAME).

    ``extra``: programs or workloads given too; ``ignored``: other options given, which a stored
    campaign takes from its first submission."""
    if sum(1 for x in (collect, status, resume) if x is not None) > 1:
        raise UsageError("give one of --collect NAME, --status NAME and --resume NAME")
    action, name = ("collect", collect) if collect is not None else ("status", status) if status is not None else ("resume", resume)
    option = f"--{action}"
    if not (name or "").strip():
        raise UsageError(f"{option} needs the campaign's name: pinlab study {option} NAME --db FILE")
    if extra:
        raise UsageError("--collect, --status and --resume act on a stored campaign: give no program or --workload")
    if ignored:
        raise UsageError(f"{option} acts on a stored campaign with its own settings: leave {', '.join(ignored)} out")
    return action, str(name)


def check_slurm(*, resume: str | None, db: str) -> None:
    """A new Slurm campaign: --resume continues only a campaign stored in the database."""
    if resume:
        raise UsageError(f"--resume {resume}: no Slurm campaign of that name in {db}")
