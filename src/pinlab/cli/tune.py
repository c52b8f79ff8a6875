"""pinlab tune: race placements of a program and print the one to use, how sure, and its settings."""

from __future__ import annotations

import json

import click

from pinlab import terminal
from pinlab.cli.program import started
from pinlab.study.engine import StudyInterrupted
from pinlab.study.plan import METRIC_HELP
from pinlab.tune import TuneRequest, tune
from pinlab.tune.request import MAX_RUNS, MIN_RUNS
from pinlab.tune.show import print_answer


@click.command()
@click.option("--threads", "-n", type=int, help="Threads of the program (default: the CPUs this process may use).")
@click.option("--workload", "-w", help="A built-in workload with its options, quoted as one word, instead of -- PROGRAM: 'stream:--size 10M'.")
@click.option("--budget", help="Most the race may take: a duration (90s, 10m, 1h) or a number of measured runs (60). Default: --max-runs each.")
@click.option("--corun", default="none", show_default=True, help="Co-runners beside every run: none, cpu:1, sleep:2+cpu:1... (as pinlab study).")
@click.option("--metric", default="time", show_default=True, help=METRIC_HELP + ".")
@click.option(
    "--metric-better", help="Which way the metric is better: lower (times) or higher (rates such as MB/s); required for any metric but time."
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Risk of a wrong drop over the race, and of a false winner.")
@click.option(
    "--tolerance", type=float, default=0.02, show_default=True, help="Placements within this share of the leader are equivalent (0.02 = 2%)."
)
@click.option("--min-runs", type=int, default=MIN_RUNS, show_default=True, help="Runs of every placement before the first look.")
@click.option("--max-runs", type=int, default=MAX_RUNS, show_default=True, help="Most runs of a placement.")
@click.option("--max-candidates", type=int, default=6, show_default=True, help="Most pinned placements raced beside the operating system's.")
@click.option(
    "--mem",
    is_flag=True,
    help="Also race memory policies, on a machine of several NUMA nodes: each placement's memory interleaved over its threads' nodes, or bound to them.",
)
@click.option(
    "--graph",
    help="Also race the graph strategies (lpgp, treematch...) of the program's affinity graph: a file from pinlab trace, or auto to trace the program once first.",
)
@click.option("--warmup", type=int, default=1, show_default=True, help="Warm-up runs per placement, not counted.")
@click.option("--timeout", type=float, help="Seconds after which a run is killed and stored as timed out.")
@click.option("--db", default="pinlab.db", show_default=True, help="SQLite file the runs are stored in (pinlab report reads it).")
@click.option("--name", help="Name of the tune's study (default: tune-<date-time>).")
@click.option("--resume", help="Continue the stored tune NAME where it stopped.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the winner as a plan file for pinlab run --plan.")
@click.option("--json", "as_json", is_flag=True, help="The whole answer as one JSON object.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def tune_command(program, as_json, quiet, **options) -> int:
    """Race placements of a program and print the one to use, with its gain and how sure: pinlab tune [OPTIONS] -- PROGRAM [ARGS...]

    The placements are the operating system's (no pinning) and autopin's structurally different
    ones for this machine and thread count. They run in rounds; after a few rounds those shown
    slower than the leader leave. The answer is the winner's speedup over the operating system's
    placement with an interval, the runner-up, and the winner as settings to paste. Every run is
    stored as a study in --db: pinlab report NAME shows it, --resume NAME continues it.

    Exits with 0 when the race ended (whatever it found), 2 for bad options, 126/127 when the
    program cannot be run, 128+N when stopped by signal N (continue with --resume).
    """
    req = TuneRequest(program=tuple(program), **options)
    try:
        found = started(lambda: tune(req, progress=not (quiet or as_json), say=lambda text: click.echo(text, err=True)))
    except StudyInterrupted as exc:
        click.echo(f"pinlab: {exc}", err=True)
        return 128 + exc.signum
    if isinstance(found, int):
        return found
    if as_json:
        click.echo(json.dumps(found.to_json()))
    else:
        print_answer(found, terminal.console(highlight=False))
    return 0
