"""pinlab run: run a program with every thread pinned from its first instruction, and record what happened."""

from __future__ import annotations

import click

from pinlab.cli.common import GRAPH_STRATEGY_HELP, graph_option, started, this_topology
from pinlab.errors import UsageError
from pinlab.launch import plan_spec, write_record
from pinlab.launch.runner import run as launch
from pinlab.memory.balance import INTERVAL as BALANCE_INTERVAL
from pinlab.memory.balance import Steal
from pinlab.ranks.launch import domain_placement, no_domain_memory, rank_memory, this_rank


@click.command(context_settings={"allow_interspersed_args": False})
@click.option(
    "--strategy",
    "-s",
    help="compact|close, scatter|spread, random, none|os, intra-socket, inter-socket, autonuma" + GRAPH_STRATEGY_HELP + " (see pinlab place)",
)
@click.option("--threads", "-n", type=int, help="Number of threads of the plan (also OMP_NUM_THREADS when unset).")
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S0:0-3).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A placement written by `pinlab place -f json`.")
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings in the plan.")
@click.option("--oversubscribe", is_flag=True, help="Allow more threads than CPUs in the plan (round-robin).")
@click.option("--seed", type=int, help="Seed for the random strategy.")
@click.option("--cpu-kind", help="Hybrid processors: only this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
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
@click.option(
    "--graph",
    "graph_file",
    type=click.Path(dir_okay=False),
    help="Affinity graph (pinlab trace) for the graph strategies: lp-compact, lp-scatter, gp, lpgp, gplp, treematch.",
)
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option("--level", help="gp: partition into the objects of this level (package, numa, l3, l2...).")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric graph instead of symmetrising it.")
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
def run(
    strategy,
    threads,
    cpus,
    plan_file,
    smt,
    oversubscribe,
    seed,
    cpu_kind,
    mem,
    overflow,
    children,
    skip,
    nested,
    no_aslr,
    clean_env,
    thp,
    record_path,
    counters,
    sample_ms,
    graph_file,
    domains,
    level,
    strict,
    balance,
    balance_interval,
    balance_data,
    rank,
    gpus,
    quiet,
    program,
) -> int:
    """Run PROGRAM with every thread pinned from its first instruction: pinlab run [OPTIONS] -- PROGRAM [ARGS...]

    Exits with the program's exit status (128+N if it died of signal N), 127 if it is not
    found, 126 if it cannot be executed, 2 for bad options.
    """
    if sample_ms is not None and not 0 < sample_ms <= 3_600_000:
        raise UsageError(f"--sample-ms must be a positive number of milliseconds, at most one hour (got {sample_ms})")
    if record_path:
        from pathlib import Path

        if not Path(record_path).resolve().parent.is_dir():
            raise UsageError(f"cannot write the record {record_path!r}: its directory does not exist")
        try:  # find out now, not after the program ran, that the record cannot be written
            with open(record_path, "a"):
                pass
        except OSError as exc:
            raise UsageError(f"cannot write the record {record_path!r}: {exc.strerror}") from None
    import os

    graph = graph_option(graph_file, strict, dict(topology=this_topology, strategy=strategy, threads=threads, smt=smt, domains=domains))
    rank_plan = this_rank(rank, gpus)
    placement = env = None
    if rank_plan is None:
        no_domain_memory(mem)
    else:
        placement, mem = _rank_placement(
            rank_plan,
            dict(
                strategy=strategy,
                threads=threads,
                cpus=cpus,
                smt=smt,
                oversubscribe=oversubscribe,
                seed=seed,
                cpu_kind=cpu_kind,
                graph=graph,
                domains=domains,
                level=level,
            ),
            plan_file,
            mem,
        )
        strategy = cpus = cpu_kind = graph = domains = level = None
        threads = placement.threads if placement is not None else threads
        env = rank_plan.env(os.environ)
        if not quiet:
            for notice in rank_plan.notices:
                click.echo(f"pinlab: notice: {notice}", err=True)
            click.echo(f"pinlab: {rank_plan.summary()}", err=True)
    spec = plan_spec(
        list(program),
        strategy=strategy,
        threads=threads,
        cpus=cpus,
        plan_file=plan_file,
        placement=placement,
        smt=smt,
        oversubscribe=oversubscribe,
        seed=seed,
        cpu_kind=cpu_kind,
        mem=mem,
        overflow=overflow,
        children=children,
        skip=skip,
        nested=nested,
        no_aslr=no_aslr,
        clean_env=clean_env,
        thp=thp,
        sample_ms=sample_ms if (record_path or not quiet) else None,
        counters=counters,
        graph=graph,
        domains=domains,
        level=level,
        balance=_balance_option(balance, balance_interval),
        balance_data=balance_data,
        env=env,
    )
    if rank_plan is not None:
        spec.rank, spec.domain_cpus = rank_plan.record(), rank_plan.domain.cpus
    for notice in spec.counters.notices if spec.counters else ():
        click.echo(f"pinlab: notice: {notice}", err=True)
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


def _rank_placement(rank_plan, options: dict, plan_file, mem):
    """In a rank context: the placement of -s/-c inside the rank's domain (None: the program
    stays on the domain's CPUs, unpinned within), and --mem for that domain."""
    if plan_file is not None:
        raise UsageError(
            "--plan gives fixed CPUs for the whole node: in a rank context give -s STRATEGY or -c CPUS, "
            "placed inside the rank's part of the node (or --rank off)"
        )
    placement = None
    if options["strategy"] is not None or options["cpus"] is not None:
        placement = domain_placement(rank_plan.topology, rank_plan.domain, len(rank_plan.split.domains), options)
    elif options["cpu_kind"] is not None:
        raise UsageError("--cpu-kind narrows a strategy: add -s STRATEGY (e.g. -s compact)")
    return placement, rank_memory(mem, rank_plan.domain)


def _balance_option(balance: bool, interval: float | None):
    """--balance [--balance-interval S] as plan_spec's ``balance``."""
    if interval is not None and not balance:
        raise UsageError("--balance-interval sets how often --balance looks: give --balance too")
    return interval if balance and interval is not None else balance
