"""pinlab autopin: probe placements while a program runs and keep the best."""

from __future__ import annotations

import click

from pinlab.autopin.metrics import list_metrics as available
from pinlab.autopin.options import AutopinOptions
from pinlab.autopin.prepare import preview
from pinlab.autopin.session import autopin as run_autopin
from pinlab.autopin.session import check_target
from pinlab.cli.common import RenamingCommand, graph_option, renamed
from pinlab.cli.completion import complete_strategies
from pinlab.cli.program import started
from pinlab.words import plural


@renamed({"-c": "--candidates", "-t": "--interval", "-w": "--warmup"})
@click.command(cls=RenamingCommand, context_settings={"allow_interspersed_args": False})
@click.option(
    "--threads",
    "-n",
    type=int,
    help="Worker threads (default: --candidates's length, OMP_NUM_THREADS, or one per allowed core; with --pid the workers running).",
)
@click.option(
    "--candidates",
    "-C",
    default="auto",
    show_default=True,
    help='auto (from the topology) or the paper\'s style: "0,1;0,2;..." (thread i on the i-th CPU listed).',
)
@click.option("--strategies", shell_complete=complete_strategies, help="Candidates from placement strategies instead: compact,scatter,...")
@click.option(
    "--graph",
    "graph_file",
    type=click.Path(dir_okay=False),
    help="Affinity graph (pinlab trace) for graph strategies in --strategies (lpgp, treematch...).",
)
@click.option("--max-candidates", type=int, default=8, show_default=True, help="At most this many automatic candidates.")
@click.option("--cpu-kind", help="Hybrid processors: automatic candidates on this kind of core only.")
@click.option(
    "--metric", "-m", help="instructions (default where counted), cycles, any perf event, heartbeat, stdout:REGEX, task-clock. See --list-metrics."
)
@click.option("--list-metrics", is_flag=True, help="List the metrics this machine offers and exit.")
@click.option("-i", "--init", "init", type=float, help="Seconds the program initialises before probing [default: the warm-up].")
@click.option("-W", "--warmup", type=float, help="Seconds of warm-up after each re-pin [default: half the interval].")
@click.option("-T", "--interval", type=float, default=30.0, show_default=True, help="Seconds each candidate is measured (and between rate reports).")
@click.option("--windows", type=int, default=5, show_default=True, help="Sub-windows per probe: the samples of the statistical verdict.")
@click.option("--rounds", default="1", show_default=True, help="Times each candidate is measured, or auto: again only those not settled.")
@click.option("--max-rounds", type=int, default=5, show_default=True, help="With --rounds auto: at most this many rounds.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Risk of the one-sided test of the best against the runner-up.")
@click.option(
    "--tolerance", type=float, default=0.01, show_default=True, help="Candidates within this fraction of the best's rate (surely) are equivalent."
)
@click.option(
    "--migrate-pages",
    type=click.Choice(["off", "process", "attached", "accessed"]),
    default="off",
    show_default=True,
    help="After a re-pin, move the program's pages to the new candidate's NUMA nodes (process), each thread's attached data "
    "(libpinlab-mem) to its new node (attached), or the pages each thread mostly accessed (accessed: the page tracer runs alongside).",
)
@click.option(
    "--probe",
    type=click.Choice(["repin", "restart"]),
    default="repin",
    show_default=True,
    help="How a candidate is measured: the running program moved there (repin), or a run of its own pinned there from its "
    "start, killed after -i + -T seconds, the program then run once more on the choice (restart: for restartable programs).",
)
@click.option("--monitor", is_flag=True, help="After the choice keep measuring, and probe again when the rate drops for good.")
@click.option(
    "--threshold", type=float, help="With --monitor: a drop of more than this percent below the rate kept since the choice...  [default: 10]"
)
@click.option("--patience", type=int, help="...for this many intervals in a row starts a new search.  [default: 3]")
@click.option(
    "--recheck",
    type=int,
    help="With --monitor: every this many intervals measure the runner-up once, and search again when it has become "
    "better by more than the threshold (0: never).  [default: 10]",
)
@click.option("--log", "log", type=click.Path(dir_okay=False), help="Write the events to FILE.jsonl (see pinlab autopin-report).")
@click.option(
    "--pid",
    type=int,
    help="Probe a program already running (never killed; Ctrl-C leaves it on the best pinning so far, on its own masks if none was measured).",
)
@click.option("--restore", is_flag=True, help="With --pid: on Ctrl-C give the threads their masks back.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
@click.option("--dry-run", is_flag=True, help="Print the candidates autopin would probe, and exit (no program needed).")
@click.option("--topology", "source", help="With --dry-run: the candidates for this machine instead (a preset, synthetic:..., or an hwloc XML file).")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def autopin(program, graph_file, pid, list_metrics, quiet, dry_run, source, **fields) -> int:
    """Find the best pinning while the program runs, and keep it: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...]

    The threads start on the first candidate; after -i seconds each candidate is measured for
    -T seconds (after -W seconds of warm-up), the best is kept and its rate printed every -T
    seconds. Exits with the program's status (as pinlab run), 2 for bad options; with --pid,
    0 when the program ends or on Ctrl-C.
    """
    if list_metrics:
        for name, description, usable in available():
            click.echo(f"{name:28} {'yes' if usable else 'no ':3} {description}")
        return 0
    if dry_run:
        topology, candidates = preview(AutopinOptions(**fields, graph=graph_option(graph_file, False)), source, pid)
        threads = len(candidates[0].cpus)
        click.echo(f"{plural(len(candidates), 'candidate')} for {plural(threads, 'thread')} on {topology.name}:")
        for i, candidate in enumerate(candidates):
            cpus = f"CPUs {','.join(map(str, candidate.cpus))}"
            click.echo(f"  #{i} {candidate.name}{'' if candidate.name == cpus else f': {cpus}'} ({candidate.describe(topology)})")
        if len(candidates) == 1:
            click.echo(
                "only one candidate: autopin would measure it once and keep it; list others with -C (-C '0;1'), "
                "or let pinlab tune race restarted runs"
            )
        return 0
    check_target(program, pid, fields["restore"], source)
    options = AutopinOptions(**fields, graph=graph_option(graph_file, False))
    say = (lambda line: None) if quiet else (lambda line: click.echo(f"autopin: {line}", err=True))
    outcome = started(lambda: run_autopin(program, pid, options, say=say))
    if isinstance(outcome, int):
        return outcome
    if pid is not None:
        return 0
    for warning in outcome.record.warnings if outcome.record is not None else ():  # none: stopped between --probe restart's runs
        click.echo(f"pinlab: warning: {warning}", err=True)
    return outcome.exit_status
