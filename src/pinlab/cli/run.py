"""pinlab run: run a program with every thread pinned from its first instruction, and record what happened."""

from __future__ import annotations

import click

from pinlab.cli.common import graph_option, graph_strategy_options, placement_options, this_topology
from pinlab.cli.program import started
from pinlab.launch import plan_spec
from pinlab.launch.record import write_record
from pinlab.launch.runner import run as launch
from pinlab.memory.balance import INTERVAL as BALANCE_INTERVAL
from pinlab.memory.balance import Steal
from pinlab.outputs import check_writable


@click.command(context_settings={"allow_interspersed_args": False})
@placement_options("Number of threads of the plan (also OMP_NUM_THREADS when unset).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A placement written by `pinlab place -f json`.")
@click.option(
    "--mem",
    help="Memory policy: first-touch, local, bind:NODES, interleave:NODES|all, weighted-interleave:NODES[@WEIGHTS], preferred:NODE, follow; domain with --rank.",
)
@click.option(
    "--overflow", type=click.Choice(["wrap", "unpinned", "error"]), default="wrap", show_default=True, help="Workers past the end of the plan."
)
@click.option(
    "--children",
    type=click.Choice(["next", "inherit", "unpinned"]),
    default="next",
    show_default=True,
    help="Processes the program starts: the plan's next slots (as threads), the mask they inherit, or unpinned.",
)
@click.option("--skip", help="Creation indexes (1 = first thread created) to leave unpinned as helpers, e.g. 1,3.")
@click.option(
    "--nested",
    help="inherit[:numa|cache]: threads created by non-main threads, and the main thread's inner OpenMP teams once the plan (the outer team) is taken, stay in their creator's NUMA node or cache domain.",
)
@click.option("--no-aslr", is_flag=True, help="Turn address-space randomisation off for the program.")
@click.option("--clean-env", is_flag=True, help="Only the variables the program needs, environment of constant size.")
@click.option("--thp", type=click.Choice(["never", "always"]), help="Transparent huge pages off or on for the program.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), help="Write what happened to FILE.json.")
@click.option(
    "--counters",
    help="Performance counters of the whole program (perf list names, comma-separated; 'default' = cycles,instructions,cache-misses and software events).",
)
@click.option("--sample-ms", type=float, default=100.0, show_default=True, help="How often to sample where each thread runs.")
@graph_strategy_options()
@click.option(
    "--balance",
    is_flag=True,
    help="An idle NUMA node steals half the busy threads of an overloaded one, with the data attached to them (libpinlab-mem).",
)
@click.option("--balance-interval", type=float, help=f"Seconds between --balance's looks at the threads [default: {BALANCE_INTERVAL}].")
@click.option(
    "--balance-data",
    type=click.Choice(["attached", "accessed"]),
    help="What moves with stolen threads: data attached through libpinlab-mem [default], or also the pages each mostly accessed (the page tracer runs alongside).",
)
@click.option(
    "--rank",
    "rank",
    default="auto",
    show_default=True,
    help="MPI rank context: auto (from srun/mpirun's environment), off, or LOCAL/COUNT. The rank's threads are placed inside its part of the node.",
)
@click.option(
    "--gpus",
    is_flag=False,
    flag_value="all",
    help="In a rank context: the rank's part of the node is next to its GPUs, which it is given (all, or a list: cuda0,cuda1...).",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def run(program, record_path, graph_file, strict, quiet, **options) -> int:
    """Run PROGRAM with every thread pinned from its first instruction: pinlab run [OPTIONS] -- PROGRAM [ARGS...]

    Exits with the program's exit status (128+N if it died of signal N), 127 if it is not
    found, 126 if it cannot be executed, 2 for bad options.
    """
    if record_path:  # found out now, not after the program ran, that the record cannot be written
        check_writable(record_path, "the record")
    fits = dict(topology=this_topology, strategy=options["strategy"], threads=options["threads"], smt=options["smt"], domains=options["domains"])
    spec = plan_spec(list(program), graph=graph_option(graph_file, strict, fits), **options)
    if quiet and not record_path:
        spec.sample_ms = None  # nobody reads where the threads ran
    _tell_before(spec, quiet)
    record = started(lambda: launch(spec))
    if isinstance(record, int):
        return record
    for warning in record.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    if record_path:
        write_record(record, record_path)
    if not quiet:
        for steal in record.balance or ():
            click.echo(f"pinlab: {Steal(**steal).text()}", err=True)
        click.echo(record.summary(), err=True)
    return record.exit_status


def _tell_before(spec, quiet: bool) -> None:
    """What the user should know before the program starts: the rank's part of the node, counters that cannot be read."""
    if spec.rank_plan is not None and not quiet:
        for notice in spec.rank_plan.notices:
            click.echo(f"pinlab: notice: {notice}", err=True)
        click.echo(f"pinlab: {spec.rank_plan.summary()}", err=True)
    for notice in spec.notices if not quiet else ():
        click.echo(f"pinlab: {notice}", err=True)
    for notice in spec.counters.notices if spec.counters else ():
        click.echo(f"pinlab: notice: {notice}", err=True)
