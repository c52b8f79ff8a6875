"""pinlab study: run configurations many times, locally or as a Slurm campaign, storing every run."""

from __future__ import annotations

from pathlib import Path

import click

from pinlab.cli.common import graph_option
from pinlab.cli.completion import complete_strategies
from pinlab.study import slurm
from pinlab.study.engine import StudyInterrupted, run_study
from pinlab.study.limits import MAX_RUNS_PER_CONFIG
from pinlab.study.plan import FIXED_RUNS
from pinlab.study.request import DEFAULTS, campaign_action, check_local, check_slurm, study_plan
from pinlab.study.slurm import SlurmOptions, run_task, submit
from pinlab.study.store import Store
from pinlab.words import plural


@click.command()
@click.option("--name", help="Name of the study (default: study-<date-time>).")
@click.option("--db", default="pinlab.db", show_default=True, help="SQLite file the runs are stored in.")
@click.option(
    "--strategies",
    "-s",
    default=DEFAULTS["strategies"],
    show_default=True,
    shell_complete=complete_strategies,
    help="Placements to compare, comma-separated (the strategies of pinlab run -s); none is the baseline.",
)
@click.option("--threads", "-n", default=None, help="Thread counts, e.g. 1,2 (default: the number of CPUs this process may use).")
@click.option(
    "--runs",
    default=DEFAULTS["runs"],
    show_default=True,
    help=f"Measured runs per configuration (at most {MAX_RUNS_PER_CONFIG}), or auto: add runs until every comparison with the baseline is decided.",
)
@click.option("--max-runs", type=int, default=DEFAULTS["max_runs"], show_default=True, help="--runs auto: most runs per configuration.")
@click.option(
    "--min-runs", type=int, default=DEFAULTS["min_runs"], show_default=True, help="--runs auto: runs per configuration before the first test."
)
@click.option("--alpha", type=float, default=DEFAULTS["alpha"], show_default=True, help="--runs auto: risk level at which a comparison is decided.")
@click.option(
    "--counters",
    help="Performance counters per run (perf list names, comma-separated; 'default' = cycles,instructions,cache-misses and software events).",
)
@click.option("--order", type=click.Choice(["interleaved", "blocked", "shuffled"]), default=DEFAULTS["order"], show_default=True)
@click.option("--warmup", type=int, default=DEFAULTS["warmup"], show_default=True, help="Warm-up runs per configuration, not counted.")
@click.option("--mem", default=DEFAULTS["mem"], show_default=True, help="Memory policies, comma-separated (see pinlab run).")
@click.option(
    "--corun",
    default=DEFAULTS["corun"],
    show_default=True,
    help="Co-runner configurations, comma-separated: none, cpu:1, sleep:2+cpu:1... (at most one co-runner per CPU).",
)
@click.option("--metric", default=DEFAULTS["metric"], show_default=True, help="time, json:KEY, or a regular expression with one group.")
@click.option(
    "--metric-better", help="Which way the metric is better: lower (times) or higher (rates such as MB/s); required for any metric but time."
)
@click.option("--timeout", type=float, help="Seconds after which a run is killed and stored as timed out (default: no timeout).")
@click.option("--cpu-kind", help="Hybrid processors: every placement on this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option(
    "--sample-ms",
    default=DEFAULTS["sample_ms"],
    show_default=True,
    help="How often to sample where each thread runs: milliseconds, or auto (about 20 samples per run, from the warm-up runs' length, 5-100 ms).",
)
@click.option("--max-failures", type=int, default=DEFAULTS["max_failures"], show_default=True, help="Stop after this many failed runs.")
@click.option("--seed", type=int, default=DEFAULTS["seed"], show_default=True, help="Seed of random placements and of the shuffled order.")
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
def study(program, db, resume, backend, graph_file, domains, collect, status_of, quiet, **o) -> int:
    """Run programs many times under each placement and store every run: pinlab study [OPTIONS] -- PROGRAM ARGS

    Exits with 0 when every configuration has successful runs, 1 when the study ended but a
    configuration has none (every run of it failed; the runs are stored), 2 for bad options or
    after --max-failures failed runs, 128+N when stopped by signal N (continue with --resume).
    """
    if collect is not None or status_of is not None or (resume and _is_campaign(db, resume)):
        return _campaign_command(db, collect, status_of, resume, program or o["workloads"])
    slurm_options = {k: o.pop(k) for k in ("results_dir", "nodes", "partition", "time_limit", "sbatch_args")}
    try:
        if backend == "slurm":
            check_slurm(resume=resume, db=db)
            plan = study_plan(program=program, on_nodes=True, notice=_notice, **o)
            plan.graph, plan.domains = graph_option(graph_file, False), domains
            return _submit(db, plan, **slurm_options)
        given = [v for k, v in slurm_options.items() if k != "nodes" and v] + ([1] if slurm_options["nodes"] != 1 else [])
        placements = [x for x in (o["cpu_kind"], graph_file, domains) if x is not None]
        check_local(
            resume=resume, slurm_options=given, program=program, workloads=o["workloads"], metric_better=o["metric_better"], placements=placements
        )
        if resume:
            summary = run_study(None, db, resume=resume, max_failures=o["max_failures"], progress=not quiet)
        else:
            plan = study_plan(program=program, notice=_notice, **o)
            plan.graph, plan.domains = graph_option(graph_file, False), domains
            summary = run_study(plan, db, max_failures=o["max_failures"], progress=not quiet)
    except StudyInterrupted as exc:
        click.echo(f"pinlab: {exc}", err=True)
        return 128 + exc.signum
    except KeyboardInterrupt:
        click.echo(f"pinlab: study interrupted; every finished run is stored; continue with --resume {resume or o['name'] or 'NAME'}", err=True)
        return 130
    _tell_summary(summary)
    return 0


def _notice(text: str) -> None:
    click.echo(f"pinlab: notice: {text}", err=True)


def _tell_summary(summary: dict) -> None:
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


def _is_campaign(db: str, name: str) -> bool:
    """Whether study ``name`` of ``db`` is a Slurm campaign (its --resume resubmits tasks)."""
    if not Path(db).exists():
        return False
    with Store.open(db, create=False, readonly=True) as store:
        study = store.study(name)
    return study is not None and bool(study.parameters.get("slurm"))


def _submit(db, plan, results_dir, nodes, partition, time_limit, sbatch_args) -> int:
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
    ctx = click.get_current_context()
    ignored = [
        p.opts[0]
        for p in ctx.command.params
        if p.name not in ("db", "collect", "status_of", "resume", "backend", "quiet", "program", "workloads")
        and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)
    ]
    campaign_action(collect, status_of, resume, extra=extra, ignored=ignored)
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
