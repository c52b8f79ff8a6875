"""pinlab study: run configurations many times, locally or as a Slurm campaign, storing every run."""

from __future__ import annotations

import click

from pinlab.cli.common import graph_option
from pinlab.cpuset import parse_cpulist
from pinlab.errors import UsageError
from pinlab.measure.counters import parse_events, probe
from pinlab.study import slurm
from pinlab.study.engine import StudyInterrupted, run_study
from pinlab.study.limits import MAX_RUNS_PER_CONFIG
from pinlab.study.plan import FIXED_RUNS, StudyPlan, parse_command, parse_workload
from pinlab.study.slurm import SlurmOptions, run_task, submit
from pinlab.study.store import Store
from pinlab.words import plural


@click.command()
@click.option("--name", help="Name of the study (default: study-<date-time>).")
@click.option("--db", default="pinlab.db", show_default=True, help="SQLite file the runs are stored in.")
@click.option(
    "--strategies",
    "-s",
    default="none,compact,scatter",
    show_default=True,
    help="Placements to compare, comma-separated (the strategies of pinlab run -s); none is the baseline.",
)
@click.option("--threads", "-n", default=None, help="Thread counts, e.g. 1,2 (default: the number of CPUs this process may use).")
@click.option(
    "--runs",
    default="35",
    show_default=True,
    help=f"Measured runs per configuration (at most {MAX_RUNS_PER_CONFIG}), or auto: add runs until every comparison with the baseline is decided.",
)
@click.option("--max-runs", type=int, default=100, show_default=True, help="--runs auto: most runs per configuration.")
@click.option("--min-runs", type=int, default=10, show_default=True, help="--runs auto: runs per configuration before the first test.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="--runs auto: risk level at which a comparison is decided.")
@click.option(
    "--counters",
    help="Performance counters per run (perf list names, comma-separated; 'default' = cycles,instructions,cache-misses and software events).",
)
@click.option("--order", type=click.Choice(["interleaved", "blocked", "shuffled"]), default="interleaved", show_default=True)
@click.option("--warmup", type=int, default=1, show_default=True, help="Warm-up runs per configuration, not counted.")
@click.option("--mem", default="first-touch", show_default=True, help="Memory policies, comma-separated (see pinlab run).")
@click.option(
    "--corun",
    default="none",
    show_default=True,
    help="Co-runner configurations, comma-separated: none, cpu:1, sleep:2+cpu:1... (at most one co-runner per CPU).",
)
@click.option("--metric", default="time", show_default=True, help="time, json:KEY, or a regular expression with one group.")
@click.option(
    "--metric-better", help="Which way the metric is better: lower (times) or higher (rates such as MB/s); required for any metric but time."
)
@click.option("--timeout", type=float, help="Seconds after which a run is killed and stored as timed out (default: no timeout).")
@click.option("--cpu-kind", help="Hybrid processors: every placement on this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option(
    "--sample-ms",
    default="auto",
    show_default=True,
    help="How often to sample where each thread runs: milliseconds, or auto (about 20 samples per run, from the warm-up runs' length, 5-100 ms).",
)
@click.option("--max-failures", type=int, default=10, show_default=True, help="Stop after this many failed runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random placements and of the shuffled order.")
@click.option(
    "--workload", "-w", "workloads", multiple=True, help="A built-in workload with its options, quoted as one word: 'stream:--size 10M' (repeatable)."
)
@click.option("--resume", help="Continue the study NAME where it stopped.")
@click.option(
    "--graph",
    "graph_file",
    type=click.Path(dir_okay=False),
    help="Affinity graph (pinlab trace) for graph strategies among -s (lpgp, treematch...); stored with the study.",
)
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option(
    "--backend",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="Where the runs happen: here, or as a Slurm job array (one whole node per task).",
)
@click.option(
    "--results",
    "results_dir",
    type=click.Path(file_okay=False),
    help="Slurm: the shared directory the tasks write their runs into [default: --db's directory].",
)
@click.option("--nodes", type=int, default=1, show_default=True, help="Slurm: array tasks, each on a whole node of its own.")
@click.option("--partition", help="Slurm: the partition to run in.")
@click.option("--time", "time_limit", help="Slurm: time limit of each task (MINUTES, HH:MM:SS, D-HH:MM:SS).")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, help="Slurm: one more sbatch argument, e.g. --sbatch-arg=--account=proj (repeatable).")
@click.option("--collect", help="Slurm: merge the runs the tasks of campaign NAME stored into --db (repeatable, safe).")
@click.option("--status", "status_of", help="Slurm: the state of each task of campaign NAME.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def study(
    name,
    db,
    strategies,
    threads,
    runs,
    max_runs,
    min_runs,
    alpha,
    counters,
    order,
    warmup,
    mem,
    corun,
    metric,
    metric_better,
    timeout,
    cpu_kind,
    sample_ms,
    max_failures,
    seed,
    workloads,
    resume,
    graph_file,
    domains,
    backend,
    results_dir,
    nodes,
    partition,
    time_limit,
    sbatch_args,
    collect,
    status_of,
    quiet,
    program,
) -> int:
    """Run programs many times under each placement and store every run: pinlab study [OPTIONS] -- PROGRAM ARGS

    Exits with 0 when every configuration has successful runs, 1 when the study ended but a
    configuration has none (every run of it failed; the runs are stored), 2 for bad options or
    after --max-failures failed runs, 128+N when stopped by signal N (continue with --resume).
    """
    if collect is not None or status_of is not None or (resume and _is_campaign(db, resume)):
        return _campaign_command(db, collect, status_of, resume, program or workloads)
    try:
        if backend == "slurm":
            if resume:
                raise UsageError(f"--resume {resume}: no Slurm campaign of that name in {db}")
            return _submit(
                db,
                results_dir,
                nodes,
                partition,
                time_limit,
                sbatch_args,
                graph_file,
                domains,
                _study_plan(
                    name,
                    strategies,
                    threads,
                    runs,
                    max_runs,
                    min_runs,
                    alpha,
                    counters,
                    order,
                    warmup,
                    mem,
                    corun,
                    metric,
                    metric_better,
                    timeout,
                    cpu_kind,
                    sample_ms,
                    max_failures,
                    seed,
                    workloads,
                    program,
                    on_nodes=True,
                ),
            )
        if results_dir or sbatch_args or partition or time_limit or nodes != 1:
            raise UsageError("--results, --nodes, --partition, --time and --sbatch-arg are for --backend slurm")
        if resume:
            if program or workloads:
                raise UsageError("--resume continues a stored study with its own programs: give no program or --workload")
            if metric_better is not None:
                raise UsageError("--resume continues a stored study with its own metric and direction: leave --metric-better out")
            if cpu_kind is not None or graph_file is not None or domains is not None:
                raise UsageError("--resume continues a stored study with its own placements: leave --cpu-kind, --graph and --domains out")
            summary = run_study(None, db, resume=resume, max_failures=max_failures, progress=not quiet)
        else:
            plan = _study_plan(
                name,
                strategies,
                threads,
                runs,
                max_runs,
                min_runs,
                alpha,
                counters,
                order,
                warmup,
                mem,
                corun,
                metric,
                metric_better,
                timeout,
                cpu_kind,
                sample_ms,
                max_failures,
                seed,
                workloads,
                program,
            )
            plan.graph, plan.domains = graph_option(graph_file, False), domains
            summary = run_study(plan, db, max_failures=max_failures, progress=not quiet)
    except StudyInterrupted as exc:
        click.echo(f"pinlab: {exc}", err=True)
        return 128 + exc.signum
    except KeyboardInterrupt:
        click.echo(f"pinlab: study interrupted; every finished run is stored; continue with --resume {resume or name or 'NAME'}", err=True)
        return 130
    click.echo(
        f"pinlab: study {summary['study']}: {plural(summary['runs'], 'run')} stored in {summary['db']} "
        f"({summary['new_runs']} new, {summary['failures']} failed)",
        err=True,
    )
    if summary.get("adaptive"):
        fixed = FIXED_RUNS * summary["configs"]
        click.echo(
            f"pinlab: adaptive study: {plural(summary['measured'], 'measured run')} over {plural(summary['configs'], 'configuration')}; "
            f"a fixed {FIXED_RUNS} runs each would take {fixed} ({summary['measured'] / fixed:.0%} of that)",
            err=True,
        )
    return 0


def _is_campaign(db: str, name: str) -> bool:
    """Whether study ``name`` of ``db`` is a Slurm campaign (its --resume resubmits tasks)."""
    from pathlib import Path

    if not Path(db).exists():
        return False
    with Store.open(db, create=False, readonly=True) as store:
        study = store.study(name)
    return study is not None and bool(study.parameters.get("slurm"))


def _submit(db, results_dir, nodes, partition, time_limit, sbatch_args, graph_file, domains, plan) -> int:
    from pathlib import Path

    plan.graph, plan.domains = graph_option(graph_file, False), domains
    options = SlurmOptions(
        results=results_dir or str(Path(db).resolve().parent), nodes=nodes, partition=partition, time=time_limit, sbatch_args=tuple(sbatch_args)
    )
    done = submit(plan, db, options, say=lambda text: click.echo(text, err=True))
    click.echo(
        f"pinlab: study {done['study']}: {plural(done['runs'], 'run')} in {plural(done['tasks'], 'array task')} "
        f"(one whole node each), Slurm job {done['job']}; results in {done['dir']}",
        err=True,
    )
    click.echo(
        f"pinlab: follow it with `pinlab study --status {done['study']} --db {db}`, then `pinlab study --collect {done['study']} --db {db}`", err=True
    )
    return 0


def _campaign_command(db, collect, status_of, resume, extra) -> int:
    """--collect, --status and --resume of a Slurm campaign."""
    if sum(1 for x in (collect, status_of, resume) if x is not None) > 1:
        raise UsageError("give one of --collect NAME, --status NAME and --resume NAME")
    option = "--collect" if collect is not None else "--status" if status_of is not None else "--resume"
    if not (collect or status_of or resume or "").strip():
        raise UsageError(f"{option} needs the campaign's name: pinlab study {option} NAME --db FILE")
    if extra:
        raise UsageError("--collect, --status and --resume act on a stored campaign: give no program or --workload")
    ctx = click.get_current_context()
    ignored = [
        p.opts[0]
        for p in ctx.command.params
        if p.name not in ("db", "collect", "status_of", "resume", "backend", "quiet", "program", "workloads")
        and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)
    ]
    if ignored:
        raise UsageError(f"{option} acts on a stored campaign with its own settings: leave {', '.join(ignored)} out")
    if collect:
        done = slurm.collect(db, collect)
        click.echo(
            f"pinlab: study {collect}: {plural(done['added'], 'new run')} collected into {db} "
            f"({done['already']} already there; {done['collected']} of {done['expected']} runs in all)",
            err=True,
        )
        if done["missing"]:
            click.echo(
                f"pinlab: warning: {plural(len(done['missing']), 'task')} stored nothing yet: {', '.join(map(str, done['missing']))} "
                f"(see pinlab study --status {collect})",
                err=True,
            )
        for task, (got, expected) in sorted(done["incomplete"].items()):
            click.echo(f"pinlab: warning: task {task} has {got} of its {expected} runs", err=True)
        if done["waiting"]:
            click.echo(
                f"pinlab: warning: {plural(len(done['waiting']), 'task')} still queued or running, not read yet: "
                f"{', '.join(map(str, done['waiting']))} (collect again when they end)",
                err=True,
            )
        for warning in done["warnings"]:
            click.echo(f"pinlab: warning: {warning}", err=True)
        for task, why in sorted(done["damaged"].items()):
            click.echo(f"pinlab: warning: task {task}'s database cannot be read, its runs are not collected: {why}", err=True)
        return 0
    if status_of:
        states = slurm.task_states(db, status_of)
        counts = {s: sum(1 for t in states if t["state"] == s) for s in ("pending", "running", "done", "failed")}
        click.echo(f"{status_of}: {len(states)} tasks: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        click.echo(f"{'task':>4}  {'job':12}  {'state':8}  {'runs':>9}  detail")
        for t in states:
            click.echo(
                f"{t['task']:>4}  {t['job']:12}  {t['state']:8}  {'?' if t['runs'] is None else t['runs']:>4}/{t['expected']:<4}  {t['detail']}".rstrip()
            )
        return 0
    done = slurm.resubmit(db, resume)
    if not done["resubmitted"]:
        click.echo(f"pinlab: study {resume}: no failed task to resubmit (see pinlab study --status {resume})", err=True)
    else:
        click.echo(
            f"pinlab: study {resume}: resubmitted {plural(len(done['resubmitted']), 'task')} "
            f"({', '.join(map(str, done['resubmitted']))}) as Slurm job {done['job']}",
            err=True,
        )
    return 0


@click.command("study-task", hidden=True)
@click.argument("directory", type=click.Path(file_okay=False))
@click.argument("task", type=int)
def study_task(directory, task) -> int:
    """One array task of a Slurm campaign (run by the campaign's job script on a node)."""
    return run_task(directory, task)


def _study_plan(
    name,
    strategies,
    threads,
    runs,
    max_runs,
    min_runs,
    alpha,
    counters,
    order,
    warmup,
    mem,
    corun,
    metric,
    metric_better,
    timeout,
    cpu_kind,
    sample_ms,
    max_failures,
    seed,
    workloads,
    program,
    on_nodes: bool = False,
):
    """The options of `pinlab study` as one StudyPlan (StudyPlan.validate checks it before anything runs)."""
    import datetime
    import os

    programs = [parse_workload(w) for w in workloads]
    if program:
        programs.append(parse_command(list(program)))
    runs_value = runs.strip().lower()
    if runs_value != "auto":
        if not (runs_value.isascii() and runs_value.isdigit()):
            raise UsageError(f"--runs must be a positive number of runs or auto (got {runs!r})")
        runs_value = int(runs_value)
    sample_value = sample_ms.strip().lower()
    if sample_value != "auto":
        try:
            sample_value = float(sample_value)
        except ValueError:
            raise UsageError(f"--sample-ms must be auto or a number of milliseconds (got {sample_ms!r})") from None
    usable = []
    if counters is not None and on_nodes:  # each node counts what it can (checked there, run by run)
        usable = [e.name for e in parse_events(counters)]
    elif counters is not None:
        found = probe(parse_events(counters))
        usable = [e.name for e in found.usable]
        for notice in found.notices:
            click.echo(f"pinlab: notice: {notice}", err=True)
    if threads is None and on_nodes:
        raise UsageError("--backend slurm: give the thread counts with -n (this machine's CPU count says nothing of the nodes')")
    if threads is None:
        threads = str(len(os.sched_getaffinity(0)))
    plan = StudyPlan(
        name=name or datetime.datetime.now().strftime("study-%Y%m%d-%H%M%S"),
        programs=programs,
        strategies=strategies.split(","),
        threads=parse_cpulist(threads, what="--threads list"),
        runs=runs_value,
        order=order,
        warmup=warmup,
        mem=mem.split(","),
        coruns=corun.split(","),
        metric=metric,
        metric_better=metric_better,
        timeout=timeout,
        max_failures=max_failures,
        seed=seed,
        counters=usable,
        max_runs=max_runs,
        min_runs=min_runs,
        alpha=alpha,
        sample_ms=sample_value,
        cpu_kind=cpu_kind,
    )
    return plan  # run_study validates it before it opens the database
