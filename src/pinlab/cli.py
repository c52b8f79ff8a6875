"""The ``pinlab`` command line: parse, call the library, print. Heavy modules load lazily."""
from __future__ import annotations

import sys

import click

from pinlab.errors import UsageError
from pinlab.study.limits import MAX_RUNS_PER_CONFIG
from pinlab.words import plural


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pinlab")
def cli() -> None:
    """pinlab: find, apply and prove the best placement of threads and memory."""


#: The graph strategies in -s's help (pinlab.placement.strategies.GRAPH_STRATEGIES; a test keeps them equal).
_GRAPH_STRATEGY_HELP = "; with --graph FILE: lp-compact, lp-scatter, gp, lpgp, gplp, treematch"
_TOPOLOGY_HELP = "this (default), a path to an hwloc XML file, synthetic:<hwloc synthetic string>, or a preset name"


@cli.command()
@click.option("--topology", "-t", "source", default="this", show_default=True, help=_TOPOLOGY_HELP)
@click.option("--format", "-f", "fmt", type=click.Choice(["tree", "json", "xml", "synthetic"]), default="tree", show_default=True)
@click.option("--list-presets", is_flag=True, help="List the bundled machine descriptions and exit.")
def topology(source: str, fmt: str, list_presets: bool) -> None:
    """Show the machine's topology (or another one's)."""
    from pinlab.topology import load_topology, preset_names

    if list_presets:
        for name in preset_names():
            topo = load_topology(name)
            click.echo(f"{name:16} {topo.root.infos.get('PinlabDescription', '')}")
        return
    topo = load_topology(source)
    if fmt == "tree":
        from pinlab.topology.render import render_tree

        click.echo(render_tree(topo))
    elif fmt == "json":
        import json

        from pinlab.topology.render import topology_to_json

        click.echo(json.dumps(topology_to_json(topo), indent=2))
    elif fmt == "xml":
        click.echo(topo.xml, nl=not topo.xml.endswith("\n"))
    else:
        import tempfile

        from pinlab.topology.sources import lstopo

        with tempfile.NamedTemporaryFile("w", suffix=".xml") as tmp:
            tmp.write(topo.xml)
            tmp.flush()
            click.echo(lstopo(["-i", tmp.name, "--of", "synthetic", "-"], what=f"{topo.name} as a synthetic string").strip())


@cli.command()
@click.option("--strategy", "-s", help="compact|close, scatter|spread, random, none, intra-socket, inter-socket" + _GRAPH_STRATEGY_HELP)
@click.option("--threads", "-n", type=int, help="Number of threads (thread 0 is the main thread).")
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S1:0-3, M0:0-1@M1:0-1, E:N:4:1:2).")
@click.option("--topology", "-t", "source", default="this", show_default=True, help=_TOPOLOGY_HELP)
@click.option("--seed", type=int, help="Seed for the random strategy (default: a fresh one, printed in the JSON).")
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings (default: one thread per physical core).")
@click.option("--oversubscribe", is_flag=True, help="Wrap round-robin when there are more threads than CPUs.")
@click.option("--cpu-kind", help="Hybrid processors: only this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option("--format", "-f", "fmt", default="list", show_default=True, help="list, json, omp, kmp, numactl, taskset, likwid, slurm")
@click.option("--picture", type=click.Path(dir_okay=False, writable=True), help="Also draw the placement to FILE.svg or FILE.png.")
# -- graph strategies (issue 11) --
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), help="Affinity graph (pinlab trace) for lp-compact, lp-scatter, gp, lpgp, gplp, treematch; also prints placement costs.")
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option("--level", help="gp: partition into the objects of this level (package, numa, l3, l2...).")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric graph instead of symmetrising it.")
@click.option("--ranks", type=int, help="Preview the node split among R MPI ranks (with -s/-n: each rank's threads inside its part).")
@click.option("--gpus", is_flag=False, flag_value="all", help="With --ranks: ranks next to the GPUs (all, or a list: cuda0,cuda1 / rsmi2 / bus ids).")
@click.option("--rank", "rank", default="auto", show_default=True,
              help="On this machine, in an MPI rank context (auto: srun/mpirun's environment; off; or LOCAL/COUNT): the placement inside the rank's part of the node.")
def place(strategy, threads, cpus, source, seed, smt, oversubscribe, cpu_kind, fmt, picture, graph_file, domains, level, strict, ranks, gpus, rank) -> None:
    """Compute a placement: the CPU of thread 0, 1, 2, ... in order."""
    from pinlab.placement import make_placement
    from pinlab.placement.exports import FORMATS, export
    from pinlab.topology import load_topology

    if ranks is not None and rank.strip().lower() not in ("auto", "off"):
        raise UsageError(f"--ranks {ranks} previews the split among all the ranks and --rank {rank} places one rank: give one of them")
    if ranks is not None or gpus is not None:
        _place_ranks(source, ranks, gpus, fmt, picture, dict(strategy=strategy, threads=threads, cpus=cpus, smt=smt, oversubscribe=oversubscribe,
                                                             seed=seed, cpu_kind=cpu_kind, graph=_graph_option(graph_file, strict),
                                                             domains=domains, level=level))
        return
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if picture:
        from pathlib import Path

        if not picture.lower().endswith((".svg", ".png")):
            raise UsageError(f"picture file {picture!r} must end in .svg or .png")
        if not Path(picture).resolve().parent.is_dir():
            raise UsageError(f"cannot write picture {picture!r}: its directory does not exist; create it first")
    topo = _rank_domain(rank) if source.strip() in ("this", "") else None
    topo = topo or load_topology(source)
    graph = _graph_option(graph_file, strict, dict(topology=lambda: topo, strategy=strategy, threads=threads, smt=smt, domains=domains))
    placement = make_placement(topo, strategy=strategy, threads=threads, cpus=cpus, smt=smt, oversubscribe=oversubscribe, seed=seed,
                               cpu_kind=cpu_kind, graph=graph, domains=domains, level=level)
    if graph is not None:
        _place_costs(placement, graph, fmt)
    else:
        if placement.cpus is None and fmt == "list":
            from pinlab.topology.cpuset import format_cpulist

            balancing = ", with the kernel's automatic NUMA balancing switched on for the run" if placement.strategy == "autonuma" else ""
            click.echo(f"{placement.strategy}: no pinning; the operating system places {plural(placement.threads, 'thread')} on CPUs "
                       f"{format_cpulist(topo.allowed_cpus)}{balancing}", err=True)
        text = export(placement, fmt)
        if text:
            click.echo(text)
    if picture:
        from pinlab.placement.picture import draw

        draw(placement, picture)


def _rank_domain(rank: str):
    """pinlab place on this machine in a rank context: this machine with only the rank's domain
    allowed (said on stderr), or None outside any."""
    from pinlab.ranks.launch import this_rank

    plan = this_rank(rank, None)
    if plan is None:
        return None
    click.echo(f"pinlab: {plan.summary()}", err=True)
    return plan.topology


def _place_ranks(source, ranks, gpus, fmt, picture, options) -> None:
    """pinlab place --ranks R [--gpus]: the node's split, and each rank's placement with -s/-c."""
    from pathlib import Path

    from pinlab.ranks.launch import domain_placement, domain_topology, node_split
    from pinlab.topology import load_topology
    from pinlab.topology.sources import load_node

    if ranks is None:
        raise UsageError("--gpus shares the node's GPUs among ranks: give the number of ranks with --ranks R")
    if fmt not in ("list", "json"):
        raise UsageError(f"--ranks prints a table (-f list) or JSON (-f json), not {fmt!r}")
    if picture:
        from pinlab.placement.picture import _check_target

        _check_target(Path(picture))
    topo = load_node() if source in ("this", "") else load_topology(source)
    split, notices = node_split(topo, ranks, gpus)
    for notice in notices:
        click.echo(f"pinlab: notice: {notice}", err=True)
    placements = None
    if options["strategy"] is not None or options["cpus"] is not None:
        placements = [domain_placement(domain_topology(topo, d), d, ranks, options) for d in split.domains]
    if picture:
        from pinlab.placement.picture import draw_ranks

        draw_ranks(split, picture, placements)
    if fmt == "json":
        import json

        data = split.to_json()
        if placements:
            for d, p in zip(data["domains"], placements):
                d["placement"] = p.to_json()
        click.echo(json.dumps(data, indent=2))
        return
    from pinlab.ranks.show import rank_table

    click.echo(rank_table(split, placements))


def _place_costs(placement, graph, fmt) -> None:
    """pinlab place --graph: the placement, then its cost beside compact/scatter/random (JSON: a "cost" object)."""
    from pinlab.placement.cost import compare, format_comparison
    from pinlab.placement.exports import export

    graph.check_threads(placement.threads)
    if placement.cpus is None:
        raise UsageError("strategy none leaves placement to the OS: it has no cost; choose a strategy or -c CPUS")
    result = compare(placement, graph)
    if fmt == "json":
        import json

        data = placement.to_json()
        data["cost"] = {"graph": graph.source, **result}
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(export(placement, fmt))
    # The table goes to stderr so that the placement on stdout stays usable by scripts.
    click.echo(format_comparison(result), err=True)


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--strategy", "-s", help="compact, scatter, random, none, intra-socket, inter-socket" + _GRAPH_STRATEGY_HELP + " (see pinlab place)")
@click.option("--threads", "-n", type=int, help="Number of threads of the plan (also OMP_NUM_THREADS when unset).")
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S0:0-3).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A placement written by `pinlab place -f json`.")
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings in the plan.")
@click.option("--oversubscribe", is_flag=True, help="Allow more threads than CPUs in the plan (round-robin).")
@click.option("--seed", type=int, help="Seed for the random strategy.")
@click.option("--cpu-kind", help="Hybrid processors: only this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option("--mem", help="Memory policy: first-touch, local, bind:NODES, interleave:NODES|all, preferred:NODE, follow.")
@click.option("--overflow", type=click.Choice(["wrap", "unpinned", "error"]), default="wrap", show_default=True, help="Workers past the end of the plan.")
@click.option("--children", type=click.Choice(["next", "inherit", "unpinned"]), default="next", show_default=True,
              help="Processes the program starts: the plan's next slots (as threads), the mask they inherit, or unpinned.")
@click.option("--skip", help="Creation indexes (1 = first thread created) to leave unpinned as helpers, e.g. 1,3.")
@click.option("--nested", help="inherit[:numa|cache]: threads created by non-main threads, and the main thread's inner OpenMP teams once the plan (the outer team) is taken, stay in their creator's NUMA node or cache domain.")
@click.option("--no-aslr", is_flag=True, help="Turn address-space randomisation off for the program.")
@click.option("--clean-env", is_flag=True, help="Only the variables the program needs, environment of constant size.")
@click.option("--thp", type=click.Choice(["never", "always"]), help="Transparent huge pages off or on for the program.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), help="Write what happened to FILE.json.")
@click.option("--counters", help="Performance counters of the whole program (perf list names, comma-separated; 'default' = cycles,instructions,cache-misses and software events).")
@click.option("--sample-ms", type=float, default=100.0, show_default=True, help="How often to sample where each thread runs.")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), help="Affinity graph (pinlab trace) for the graph strategies: lp-compact, lp-scatter, gp, lpgp, gplp, treematch.")
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option("--level", help="gp: partition into the objects of this level (package, numa, l3, l2...).")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric graph instead of symmetrising it.")
@click.option("--balance", is_flag=True, help="An idle NUMA node steals half the busy threads of an overloaded one, with the data attached to them (libpinlab-mem).")
@click.option("--balance-interval", type=float, help="Seconds between --balance's looks at the threads [default: 0.25].")
@click.option("--balance-data", type=click.Choice(["attached", "accessed"]),
              help="What moves with stolen threads: data attached through libpinlab-mem [default], or also the pages each mostly accessed (the page tracer runs alongside).")
@click.option("--rank", "rank", default="auto", show_default=True,
              help="MPI rank context: auto (from srun/mpirun's environment), off, or LOCAL/COUNT. The rank's threads are placed inside its part of the node.")
@click.option("--gpus", is_flag=False, flag_value="all", help="In a rank context: the rank's part of the node is next to its GPUs, which it is given (all, or a list: cuda0,cuda1...).")
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def run(strategy, threads, cpus, plan_file, smt, oversubscribe, seed, cpu_kind, mem, overflow, children, skip, nested, no_aslr, clean_env, thp, record_path, counters, sample_ms,
        graph_file, domains, level, strict, balance, balance_interval, balance_data, rank, gpus, quiet, program) -> int:
    """Run PROGRAM with every thread pinned from its first instruction: pinlab run [OPTIONS] -- PROGRAM [ARGS...]

    Exits with the program's exit status (128+N if it died of signal N), 127 if it is not
    found, 126 if it cannot be executed, 2 for bad options.
    """
    from pinlab.launch import plan_spec, write_record
    from pinlab.launch.runner import run as launch

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

    from pinlab.ranks.launch import no_domain_memory, this_rank

    graph = _graph_option(graph_file, strict, dict(topology=_this_topology, strategy=strategy, threads=threads, smt=smt, domains=domains))
    rank_plan = this_rank(rank, gpus)
    placement = env = None
    if rank_plan is None:
        no_domain_memory(mem)
    else:
        placement, mem = _rank_placement(rank_plan, dict(strategy=strategy, threads=threads, cpus=cpus, smt=smt, oversubscribe=oversubscribe,
                                                         seed=seed, cpu_kind=cpu_kind, graph=graph, domains=domains, level=level), plan_file, mem)
        strategy = cpus = cpu_kind = graph = domains = level = None
        threads = placement.threads if placement is not None else threads
        env = rank_plan.env(os.environ)
        if not quiet:
            for notice in rank_plan.notices:
                click.echo(f"pinlab: notice: {notice}", err=True)
            click.echo(f"pinlab: {rank_plan.summary()}", err=True)
    spec = plan_spec(
        list(program), strategy=strategy, threads=threads, cpus=cpus, plan_file=plan_file, placement=placement, smt=smt, oversubscribe=oversubscribe,
        seed=seed, cpu_kind=cpu_kind, mem=mem, overflow=overflow, children=children, skip=skip, nested=nested, no_aslr=no_aslr, clean_env=clean_env, thp=thp,
        sample_ms=sample_ms if (record_path or not quiet) else None, counters=counters,
        graph=graph, domains=domains, level=level, balance=_balance_option(balance, balance_interval),
        balance_data=balance_data, env=env,
    )
    if rank_plan is not None:
        spec.rank, spec.domain_cpus = rank_plan.record(), rank_plan.domain.cpus
    for notice in spec.counters.notices if spec.counters else ():
        click.echo(f"pinlab: notice: {notice}", err=True)
    record = _started(lambda: launch(spec))
    if isinstance(record, int):
        return record
    for warning in record.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    if record_path:
        write_record(record, record_path)
    if not quiet:
        from pinlab.memory.balance import Steal

        for steal in record.balance or ():
            click.echo(f"pinlab: {Steal(**steal).text()}", err=True)
        click.echo(record.summary(), err=True)
    return record.exit_status


def _rank_placement(rank_plan, options: dict, plan_file, mem):
    """In a rank context: the placement of -s/-c inside the rank's domain (None: the program
    stays on the domain's CPUs, unpinned within), and --mem for that domain."""
    from pinlab.ranks.launch import domain_placement, rank_memory

    if plan_file is not None:
        raise UsageError("--plan gives fixed CPUs for the whole node: in a rank context give -s STRATEGY or -c CPUS, "
                         "placed inside the rank's part of the node (or --rank off)")
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


def _this_topology():
    from pinlab.topology import load_topology

    return load_topology("this")


def _graph_option(path, strict: bool, fits: dict | None = None):
    """--graph FILE loaded and checked (notices on stderr), or None.

    ``fits`` (topology, strategy, threads, smt, domains; topology a callable) refuses a graph of
    the wrong size from its thread count, before its weights are read."""
    if path is None:
        if strict:
            raise UsageError("--strict checks the graph of --graph FILE: give one or leave --strict out")
        return None
    from pinlab.graph import load_graph
    from pinlab.graph.mapping import graph_fits

    def expect(n: int) -> None:
        if fits is not None:
            strategy = (fits["strategy"] or "").strip().lower()
            topo = fits["topology"]() if strategy or fits["threads"] is not None else None
            graph_fits(topo, strategy, n, threads=fits["threads"], smt=fits["smt"], domains=fits["domains"], source=path)

    from pinlab.graph.progress import terminal_progress

    return load_graph(path, strict=strict, notice=lambda text: click.echo(f"pinlab: notice: {text}", err=True), expect=expect,
                      progress=terminal_progress())


def _started(start):
    """``start()``'s result; a program that is not found or cannot be executed is said in one line
    and becomes the exit status env(1) uses (127, 126)."""
    from pinlab.launch import ProgramNotExecutable, ProgramNotFound

    try:
        return start()
    except ProgramNotFound as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 127
    except ProgramNotExecutable as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 126


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--threads", "-n", type=int, help="Worker threads (default: -c's length, OMP_NUM_THREADS, or one per allowed core; with --pid the workers running).")
@click.option("--candidates", "-c", default="auto", show_default=True, help="auto (from the topology) or the paper's style: \"0,1;0,2;...\" (thread i on the i-th CPU listed).")
@click.option("--strategies", help="Candidates from placement strategies instead: compact,scatter,...")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), help="Affinity graph (pinlab trace) for graph strategies in --strategies (lpgp, treematch...).")
@click.option("--max-candidates", type=int, default=8, show_default=True, help="At most this many automatic candidates.")
@click.option("--cpu-kind", help="Hybrid processors: automatic candidates on this kind of core only.")
@click.option("--metric", "-m", help="instructions (default where counted), cycles, any perf event, heartbeat, stdout:REGEX, task-clock. See --list-metrics.")
@click.option("--list-metrics", is_flag=True, help="List the metrics this machine offers and exit.")
@click.option("-i", "--init", "init", type=float, help="Seconds the program initialises before probing [default: w].")
@click.option("-w", "--warmup", type=float, help="Seconds of warm-up after each re-pin [default: t/2].")
@click.option("-t", "--interval", type=float, default=30.0, show_default=True, help="Seconds each candidate is measured (and between rate reports).")
@click.option("--windows", type=int, default=5, show_default=True, help="Sub-windows per probe: the samples of the statistical verdict.")
@click.option("--rounds", default="1", show_default=True, help="Times each candidate is measured, or auto: again only those not settled.")
@click.option("--max-rounds", type=int, default=5, show_default=True, help="With --rounds auto: at most this many rounds.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Risk of the one-sided test of the best against the runner-up.")
@click.option("--tolerance", type=float, default=0.01, show_default=True, help="Candidates within this fraction of the best's rate (surely) are equivalent.")
@click.option("--migrate-pages", type=click.Choice(["off", "process", "attached", "accessed"]), default="off", show_default=True,
              help="After a re-pin, move the program's pages to the new candidate's NUMA nodes (process), each thread's attached data "
                   "(libpinlab-mem) to its new node (attached), or the pages each thread mostly accessed (accessed: the page tracer runs alongside).")
@click.option("--monitor", is_flag=True, help="After the choice keep measuring, and probe again when the rate drops for good.")
@click.option("--threshold", type=float, help="With --monitor: a drop of more than this percent below the rate kept since the choice...  [default: 10]")
@click.option("--patience", type=int, help="...for this many intervals in a row starts a new search.  [default: 3]")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), help="Write the events to FILE.jsonl (see pinlab autopin-report).")
@click.option("--pid", type=int, help="Probe a program already running (never killed; Ctrl-C leaves it on the best pinning so far, on its own masks if none was measured).")
@click.option("--restore", is_flag=True, help="With --pid: on Ctrl-C give the threads their masks back.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def autopin(threads, candidates, strategies, graph_file, max_candidates, cpu_kind, metric, list_metrics, init, warmup, interval, windows, rounds, max_rounds, alpha,
            tolerance, migrate_pages, monitor, threshold, patience, log_path, pid, restore, quiet, program) -> int:
    """Find the best pinning while the program runs, and keep it: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...]

    The threads start on the first candidate; after -i seconds each candidate is measured for
    -t seconds (after -w seconds of warm-up), the best is kept and its rate printed every -t
    seconds. Exits with the program's status (as pinlab run), 2 for bad options; with --pid,
    0 when the program ends or on Ctrl-C.
    """
    from pinlab.autopin.options import AutopinOptions

    if list_metrics:
        from pinlab.autopin.metrics import list_metrics as available

        for name, description, usable in available():
            click.echo(f"{name:28} {'yes' if usable else 'no ':3} {description}")
        return 0
    if pid is not None and program:
        raise UsageError("give a program to start or --pid PID of one running, not both")
    if pid is None and not program:
        raise UsageError("no program given: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...], or --pid PID")
    if restore and pid is None:
        raise UsageError("--restore applies to --pid (a program autopin started ends with it)")
    options = AutopinOptions(threads=threads, candidates=candidates, strategies=strategies, max_candidates=max_candidates, cpu_kind=cpu_kind,
                             metric=metric, init=init, warmup=warmup, interval=interval, windows=windows, rounds=rounds, max_rounds=max_rounds,
                             alpha=alpha, tolerance=tolerance, migrate_pages=migrate_pages, monitor=monitor, threshold=threshold, patience=patience,
                             log=log_path, restore=restore, graph=_graph_option(graph_file, False))
    say = (lambda line: None) if quiet else (lambda line: click.echo(f"autopin: {line}", err=True))
    if pid is not None:
        from pinlab.autopin.session import autopin_attached

        autopin_attached(pid, options, say=say)
        return 0
    from pinlab.autopin.session import autopin_program

    outcome = _started(lambda: autopin_program(list(program), options, say=say))
    if isinstance(outcome, int):
        return outcome
    for warning in outcome.record.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    return outcome.exit_status


@cli.group()
def workload() -> None:
    """Built-in workloads: STREAM family, mb, primes, pairs."""


@workload.command("list")
def workload_list() -> None:
    """List the built-in workloads."""
    from pinlab.workloads import WORKLOADS

    for w in WORKLOADS.values():
        click.echo(f"{w.name:18} {w.kind:26} {w.summary}")


@workload.command("path")
@click.argument("name")
def workload_path_command(name: str) -> None:
    """Print the executable of workload NAME (to run it under taskset, likwid-pin, perf...)."""
    from pinlab.workloads import workload_path

    click.echo(workload_path(name))


# ---- heartbeat header (issue 10, autopin metrics)
@workload.command("heartbeat-header")
@click.option("--include-dir", is_flag=True, help="Print the directory to give cc -I instead of the header's path.")
def workload_heartbeat_header(include_dir: bool) -> None:
    """Print the path of pinlab_heartbeat.h, the C header by which a program reports its work to autopin."""
    from pinlab.native import include_dir as headers

    directory = headers()
    click.echo(directory if include_dir else directory / "pinlab_heartbeat.h")
# ---- end heartbeat header


@workload.command("run")
@click.argument("name")
@click.option("--threads", "-n", type=int, help="Number of OpenMP threads.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object with the results.")
@click.option("--strategy", "-s", help="Run pinned with this strategy (through pinlab run).")
@click.option("--cpus", "-c", help="Run pinned on these CPUs (through pinlab run).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def workload_run(name, threads, as_json, strategy, cpus, args) -> int:
    """Run workload NAME; its own options go after --, e.g. pinlab workload run stream -n 2 -- --size 10M"""
    from pinlab.workloads import workload_argv

    argv = workload_argv(name, threads, args, json=as_json)
    from pinlab.launch import plan_spec
    from pinlab.launch.runner import run as launch

    if strategy is not None and threads is None:
        raise UsageError(f"running {name} with strategy {strategy} needs a thread count: add -n THREADS")
    # Through the launcher even unpinned: signals forwarded, exit status 128+N, nothing orphaned.
    record = launch(plan_spec(argv, strategy=strategy, threads=threads, cpus=cpus, sample_ms=None))
    for warning in record.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    return record.exit_status


@cli.command(context_settings={"show_default": True})
@click.argument("kind")
@click.option("--count", "-n", type=int, default=1, help="Number of co-runner processes.")
@click.option("--cpus", "-c", help="CPUs to load, one co-runner per CPU in turn (default: all allowed).")
@click.option("--period-us", type=int, help="sleep kind: period of busy + sleep, 10 to 10000 us (default 1000).")
@click.option("--duty", type=int, help="sleep kind: percent of each period spent busy (default 50).")
@click.option("--size", help="memory kind: buffer size (default 4x the last-level cache).")
@click.option("--duration", type=float, help="Stop after this many seconds (default: run until Ctrl-C or SIGTERM).")
def corun(kind, count, cpus, period_us, duty, size, duration) -> int:
    """Run co-runners of KIND (cpu, sleep, memory) until stopped, to load CPUs during a measurement."""
    import signal
    import time

    from pinlab.workloads.corun import CoRunners

    if duration is not None and not 0 < duration < 1e9:
        raise UsageError(f"--duration must be a positive number of seconds (got {duration})")
    if count > 4096:
        raise UsageError(f"--count {count} is more co-runners than any machine needs (4096 at most)")
    runners = CoRunners(kind, count, cpus, period_us=period_us, duty=duty, size=size)
    stopping = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    waited = stopping | {signal.SIGCHLD}  # a co-runner that ends by itself has failed: stop and say so
    old = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        with runners:
            cpus_used = sorted({runners.cpus[i % len(runners.cpus)] for i in range(count)})
            click.echo(f"pinlab: {plural(count, f'{kind} co-runner')} on {'CPU' if len(cpus_used) == 1 else 'CPUs'} "
                       f"{','.join(map(str, cpus_used))}, {'pid' if count == 1 else 'pids'} {' '.join(map(str, runners.pids))}", err=True)
            deadline = None if duration is None else time.monotonic() + duration
            while runners.failure() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                info = signal.sigwaitinfo(waited) if left is None else signal.sigtimedwait(waited, left)
                if info is not None and info.si_signo in stopping:
                    break
        failure = runners.failure()  # after the stop: a co-runner that refused its options as it was stopped failed too
        status = runners.exit_status()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if failure:
        click.echo(f"pinlab: error: co-runner {failure}; see its message above", err=True)
        return status
    return 0


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check(as_json: bool) -> None:
    """Tell what on this machine will add noise or bias to measurements, and how to change it."""
    from pinlab.measure.noise import WARNING, check as run_checks

    findings = run_checks()
    if as_json:
        import json

        click.echo(json.dumps([f.to_dict() for f in findings], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="pinlab check: what will add noise or bias to measurements here", show_lines=True)
    for column in ("check", "status", "found", "what it means", "how to change it"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "info": "cyan", "warning": "yellow"}
    for f in findings:
        table.add_row(f.name, f"[{colours[f.status]}]{f.status}[/]", f.found, f.meaning, f.fix)
    Console(width=None if sys.stdout.isatty() else 160).print(table)  # piped: do not wrap at 80
    warnings = sum(1 for f in findings if f.status == WARNING)
    click.echo(f"{plural(warnings, 'warning')}." if warnings else "No warnings.")


@cli.command()
@click.option("--name", help="Name of the study (default: study-<date-time>).")
@click.option("--db", default="pinlab.db", show_default=True, help="SQLite file the runs are stored in.")
@click.option("--strategies", "-s", default="none,compact,scatter", show_default=True, help="Placements to compare; none is the baseline.")
@click.option("--threads", "-n", default=None, help="Thread counts, e.g. 1,2 (default: the number of CPUs this process may use).")
@click.option("--runs", default="35", show_default=True, help=f"Measured runs per configuration (at most {MAX_RUNS_PER_CONFIG}), or auto: add runs until every comparison with the baseline is decided.")
@click.option("--max-runs", type=int, default=100, show_default=True, help="--runs auto: most runs per configuration.")
@click.option("--min-runs", type=int, default=10, show_default=True, help="--runs auto: runs per configuration before the first test.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="--runs auto: risk level at which a comparison is decided.")
@click.option("--counters", help="Performance counters per run (perf list names, comma-separated; 'default' = cycles,instructions,cache-misses and software events).")
@click.option("--order", type=click.Choice(["interleaved", "blocked", "shuffled"]), default="interleaved", show_default=True)
@click.option("--warmup", type=int, default=1, show_default=True, help="Warm-up runs per configuration, not counted.")
@click.option("--mem", default="first-touch", show_default=True, help="Memory policies, comma-separated (see pinlab run).")
@click.option("--corun", default="none", show_default=True, help="Co-runner configurations, comma-separated: none, cpu:1, sleep:2+cpu:1... (at most one co-runner per CPU).")
@click.option("--metric", default="time", show_default=True, help="time, json:KEY, or a regular expression with one group.")
@click.option("--metric-better", help="Which way the metric is better: lower (times) or higher (rates such as MB/s); required for any metric but time.")
@click.option("--timeout", type=float, help="Seconds after which a run is killed and stored as timed out (default: no timeout).")
@click.option("--cpu-kind", help="Hybrid processors: every placement on this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option("--sample-ms", default="auto", show_default=True, help="How often to sample where each thread runs: milliseconds, or auto (about 20 samples per run, from the warm-up runs' length, 5-100 ms).")
@click.option("--max-failures", type=int, default=10, show_default=True, help="Stop after this many failed runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random placements and of the shuffled order.")
@click.option("--workload", "-w", "workloads", multiple=True, help="A built-in workload with its options, e.g. stream:--size 10M (repeatable).")
@click.option("--resume", help="Continue the study NAME where it stopped.")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), help="Affinity graph (pinlab trace) for graph strategies among -s (lpgp, treematch...); stored with the study.")
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option("--backend", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="Where the runs happen: here, or as a Slurm job array (one whole node per task).")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), help="Slurm: the shared directory the tasks write their runs into [default: --db's directory].")
@click.option("--nodes", type=int, default=1, show_default=True, help="Slurm: array tasks, each on a whole node of its own.")
@click.option("--partition", help="Slurm: the partition to run in.")
@click.option("--time", "time_limit", help="Slurm: time limit of each task (MINUTES, HH:MM:SS, D-HH:MM:SS).")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, help="Slurm: one more sbatch argument, e.g. --sbatch-arg=--account=proj (repeatable).")
@click.option("--collect", help="Slurm: merge the runs the tasks of campaign NAME stored into --db (repeatable, safe).")
@click.option("--status", "status_of", help="Slurm: the state of each task of campaign NAME.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def study(name, db, strategies, threads, runs, max_runs, min_runs, alpha, counters, order, warmup, mem, corun, metric, metric_better, timeout,
          cpu_kind, sample_ms, max_failures, seed, workloads, resume, graph_file, domains, backend, results_dir, nodes, partition, time_limit,
          sbatch_args, collect, status_of, quiet, program) -> int:
    """Run programs many times under each placement and store every run: pinlab study [OPTIONS] -- PROGRAM ARGS

    Exits with 0 when every configuration has successful runs, 1 when the study ended but a
    configuration has none (every run of it failed; the runs are stored), 2 for bad options or
    after --max-failures failed runs, 128+N when stopped by signal N (continue with --resume).
    """
    from pinlab.study.engine import FIXED_RUNS, StudyInterrupted, run_study

    if collect is not None or status_of is not None or (resume and _is_campaign(db, resume)):
        return _campaign_command(db, collect, status_of, resume, program or workloads)
    try:
        if backend == "slurm":
            if resume:
                raise UsageError(f"--resume {resume}: no Slurm campaign of that name in {db}")
            return _submit(db, results_dir, nodes, partition, time_limit, sbatch_args, graph_file, domains,
                           _study_plan(name, strategies, threads, runs, max_runs, min_runs, alpha, counters, order, warmup, mem, corun, metric,
                                       metric_better, timeout, cpu_kind, sample_ms, max_failures, seed, workloads, program, on_nodes=True))
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
            plan = _study_plan(name, strategies, threads, runs, max_runs, min_runs, alpha, counters, order, warmup, mem, corun, metric,
                               metric_better, timeout, cpu_kind, sample_ms, max_failures, seed, workloads, program)
            plan.graph, plan.domains = _graph_option(graph_file, False), domains
            summary = run_study(plan, db, max_failures=max_failures, progress=not quiet)
    except StudyInterrupted as exc:
        click.echo(f"pinlab: {exc}", err=True)
        return 128 + exc.signum
    except KeyboardInterrupt:
        click.echo(f"pinlab: study interrupted; every finished run is stored; continue with --resume {resume or name or 'NAME'}", err=True)
        return 130
    click.echo(f"pinlab: study {summary['study']}: {plural(summary['runs'], 'run')} stored in {summary['db']} "
               f"({summary['new_runs']} new, {summary['failures']} failed)", err=True)
    if summary.get("adaptive"):
        fixed = FIXED_RUNS * summary["configs"]
        click.echo(f"pinlab: adaptive study: {plural(summary['measured'], 'measured run')} over {plural(summary['configs'], 'configuration')}; "
                   f"a fixed {FIXED_RUNS} runs each would take {fixed} ({summary['measured'] / fixed:.0%} of that)", err=True)
    return 0


def _is_campaign(db: str, name: str) -> bool:
    """Whether study ``name`` of ``db`` is a Slurm campaign (its --resume resubmits tasks)."""
    from pathlib import Path

    from pinlab.study.store import Store

    if not Path(db).exists():
        return False
    with Store.open(db, create=False, readonly=True) as store:
        study = store.study(name)
    return study is not None and bool(study.parameters.get("slurm"))


def _submit(db, results_dir, nodes, partition, time_limit, sbatch_args, graph_file, domains, plan) -> int:
    from pathlib import Path

    from pinlab.study.slurm import SlurmOptions, submit

    plan.graph, plan.domains = _graph_option(graph_file, False), domains
    options = SlurmOptions(results=results_dir or str(Path(db).resolve().parent), nodes=nodes, partition=partition, time=time_limit,
                           sbatch_args=tuple(sbatch_args))
    done = submit(plan, db, options, say=lambda text: click.echo(text, err=True))
    click.echo(f"pinlab: study {done['study']}: {plural(done['runs'], 'run')} in {plural(done['tasks'], 'array task')} "
               f"(one whole node each), Slurm job {done['job']}; results in {done['dir']}", err=True)
    click.echo(f"pinlab: follow it with `pinlab study --status {done['study']} --db {db}`, then `pinlab study --collect {done['study']} --db {db}`", err=True)
    return 0


def _campaign_command(db, collect, status_of, resume, extra) -> int:
    """--collect, --status and --resume of a Slurm campaign."""
    from pinlab.study import slurm

    if sum(1 for x in (collect, status_of, resume) if x is not None) > 1:
        raise UsageError("give one of --collect NAME, --status NAME and --resume NAME")
    option = "--collect" if collect is not None else "--status" if status_of is not None else "--resume"
    if not (collect or status_of or resume or "").strip():
        raise UsageError(f"{option} needs the campaign's name: pinlab study {option} NAME --db FILE")
    if extra:
        raise UsageError("--collect, --status and --resume act on a stored campaign: give no program or --workload")
    ctx = click.get_current_context()
    ignored = [p.opts[0] for p in ctx.command.params if p.name not in ("db", "collect", "status_of", "resume", "backend", "quiet", "program", "workloads")
               and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)]
    if ignored:
        raise UsageError(f"{option} acts on a stored campaign with its own settings: leave {', '.join(ignored)} out")
    if collect:
        done = slurm.collect(db, collect)
        click.echo(f"pinlab: study {collect}: {plural(done['added'], 'new run')} collected into {db} "
                   f"({done['already']} already there; {done['collected']} of {done['expected']} runs in all)", err=True)
        if done["missing"]:
            click.echo(f"pinlab: warning: {plural(len(done['missing']), 'task')} stored nothing yet: {', '.join(map(str, done['missing']))} "
                       f"(see pinlab study --status {collect})", err=True)
        for task, (got, expected) in sorted(done["incomplete"].items()):
            click.echo(f"pinlab: warning: task {task} has {got} of its {expected} runs", err=True)
        if done["waiting"]:
            click.echo(f"pinlab: warning: {plural(len(done['waiting']), 'task')} still queued or running, not read yet: "
                       f"{', '.join(map(str, done['waiting']))} (collect again when they end)", err=True)
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
            click.echo(f"{t['task']:>4}  {t['job']:12}  {t['state']:8}  {'?' if t['runs'] is None else t['runs']:>4}/{t['expected']:<4}  {t['detail']}".rstrip())
        return 0
    done = slurm.resubmit(db, resume)
    if not done["resubmitted"]:
        click.echo(f"pinlab: study {resume}: no failed task to resubmit (see pinlab study --status {resume})", err=True)
    else:
        click.echo(f"pinlab: study {resume}: resubmitted {plural(len(done['resubmitted']), 'task')} "
                   f"({', '.join(map(str, done['resubmitted']))}) as Slurm job {done['job']}", err=True)
    return 0


@cli.command("study-task", hidden=True)
@click.argument("directory", type=click.Path(file_okay=False))
@click.argument("task", type=int)
def study_task(directory, task) -> int:
    """One array task of a Slurm campaign (run by the campaign's job script on a node)."""
    from pinlab.study.slurm import run_task

    return run_task(directory, task)


def _study_plan(name, strategies, threads, runs, max_runs, min_runs, alpha, counters, order, warmup, mem, corun, metric, metric_better, timeout,
                cpu_kind, sample_ms, max_failures, seed, workloads, program, on_nodes: bool = False):
    """The options of `pinlab study` as one StudyPlan (StudyPlan.validate checks it before anything runs)."""
    import datetime
    import os

    from pinlab.study.engine import StudyPlan, parse_command, parse_workload
    from pinlab.topology.cpuset import parse_cpulist

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
        from pinlab.measure.counters import parse_events

        usable = [e.name for e in parse_events(counters)]
    elif counters is not None:
        from pinlab.measure.counters import parse_events, probe

        found = probe(parse_events(counters))
        usable = [e.name for e in found.usable]
        for notice in found.notices:
            click.echo(f"pinlab: notice: {notice}", err=True)
    if threads is None and on_nodes:
        raise UsageError("--backend slurm: give the thread counts with -n (this machine's CPU count says nothing of the nodes')")
    if threads is None:
        threads = str(len(os.sched_getaffinity(0)))
    plan = StudyPlan(name=name or datetime.datetime.now().strftime("study-%Y%m%d-%H%M%S"), programs=programs,
                     strategies=strategies.split(","), threads=parse_cpulist(threads, what="--threads list"), runs=runs_value, order=order,
                     warmup=warmup, mem=mem.split(","), coruns=corun.split(","), metric=metric, metric_better=metric_better,
                     timeout=timeout, max_failures=max_failures,
                     seed=seed, counters=usable, max_runs=max_runs, min_runs=min_runs, alpha=alpha, sample_ms=sample_value, cpu_kind=cpu_kind)
    return plan  # run_study validates it before it opens the database


@cli.command()
@click.argument("name", required=False)
@click.option("--db", default="pinlab.db", show_default=True, help="The study database.")
@click.option("--baseline", default="none", show_default=True, help="The placement others are compared with.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Risk level of the statistical tests.")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), help="Write a self-contained HTML report into DIR.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="Write runs.csv and stats.csv into DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@click.option("--metric-better", help="For a study stored without its metric's direction (older pinlab): lower or higher is better.")
@click.option("--by-node", is_flag=True, help="Also each configuration's runs and median per node (a Slurm campaign's nodes).")
def report(name, db, baseline, alpha, html_dir, csv_dir, as_json, metric_better, by_node) -> None:
    """Statistics of a stored study (NAME, default the latest): tables, CSV, JSON, HTML."""
    from pathlib import Path

    from pinlab.report.data import study_report
    from pinlab.report.tables import dump_json, print_report, write_csv

    if not Path(db).exists():
        raise UsageError(f"no study database at {db!r}: run `pinlab study --db {db} ...` first")
    for option, directory in (("--csv", csv_dir), ("--html", html_dir)):
        if directory:
            check_output_directory(directory, option)
    rep = study_report(db, name, baseline=baseline, alpha=alpha, metric_better=metric_better)
    if as_json:
        click.echo(dump_json(rep))
    else:
        print_report(rep)
        if by_node:
            from pinlab.report.tables import print_by_node

            print_by_node(rep)
    try:
        if csv_dir:
            runs_csv, stats_csv = write_csv(rep, csv_dir)
            click.echo(f"pinlab: wrote {runs_csv} and {stats_csv}", err=True)
        if html_dir:
            from pinlab.report.html import write_html

            click.echo(f"pinlab: HTML report: {write_html(rep, html_dir)}", err=True)
    except OSError as exc:  # checked above, but a disk can fill or a directory vanish meanwhile
        raise UsageError(f"could not write the report: {exc.strerror or exc} ({exc.filename}); the study database is unchanged") from None


# -- autopin-report (issue 10, item 9) --------------------------------------------------------------
@cli.command("autopin-report")
@click.argument("log_path", metavar="LOG")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), help="Write a self-contained HTML report into DIR.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw the rate over time to FILE.svg or FILE.png.")
def autopin_report(log_path, html_dir, picture) -> None:
    """Report on an autopin log (written by `pinlab autopin --log FILE`): candidates, verdicts, timeline."""
    from pinlab.autopin.logread import read_log
    from pinlab.report.autopin_tables import print_autopin_report

    if html_dir:
        check_output_directory(html_dir, "--html")
    if picture and not picture.lower().endswith((".svg", ".png")):
        raise UsageError(f"picture file {picture!r} must end in .svg or .png")
    log = read_log(log_path)
    for warning in log.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    print_autopin_report(log)
    if picture:
        from pinlab.report.autopin_timeline import save_picture, timeline

        click.echo(f"pinlab: picture: {save_picture(timeline(log), picture)}", err=True)
    if html_dir:
        from pinlab.report.autopin_html import write_autopin_html

        click.echo(f"pinlab: HTML report: {write_autopin_html(log, html_dir)}", err=True)


def check_output_directory(directory: str, option: str) -> None:
    """Fail now, in one line, if files cannot be written into ``directory`` (made if missing).

    Directories made for the check are removed again: the report makes them when it writes, and
    a report that fails before then (a damaged database, an unknown study) leaves nothing behind.
    """
    import os
    import tempfile

    made = []
    try:
        path = os.path.abspath(directory)
        missing = []
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for path in reversed(missing):
            os.mkdir(path)
            made.append(path)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".pinlab-check-"):
            pass
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"cannot write {option} {directory}: a part of that path is a file, not a directory; give a directory path") from None
    except OSError as exc:
        raise UsageError(f"cannot write {option} {directory}: {exc.strerror or exc}; give a directory you can write to") from None
    finally:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass


# -- memory: pinlab memmap (issue 12) ---------------------------------------------------------
@cli.command()
@click.argument("pid", type=int)
@click.option("--watch", type=float, metavar="S", help="Look again every S seconds until Ctrl-C or until the process ends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per look, one per line (every mapping).")
@click.option("--all", "show_all", is_flag=True, help="List every mapping, not only the largest resident ones.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="How many mappings to list without --all.")
def memmap(pid, watch, as_json, show_all, top) -> int:
    """Where a running process's memory lives: resident MiB per NUMA node, per kind of mapping and per mapping.

    Like numastat -p, from /proc/PID/numa_maps, with each mapping (heap, stack, anonymous memory,
    files) and its memory policy. Exits 0 (also when a watched process ends), 2 for a PID that
    does not exist or is not yours.
    """
    import json

    from pinlab.memory.memmap import memmap as look_at, watch as watching

    if watch is not None and not 0 < watch <= 86400:
        raise UsageError(f"--watch must be a positive number of seconds, at most a day (got {watch})")
    looks = watching(pid, watch) if watch is not None else iter([look_at(pid)])
    from rich.console import Console

    from pinlab.memory import show

    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        for look in looks:
            if as_json:
                click.echo(json.dumps(look.to_json()), nl=True)
                sys.stdout.flush()
                continue
            console.print(show.heading(look), highlight=False)
            console.print(show.summary(look))
            console.print(show.mappings(look, show_all=show_all, top=top))
            console.print(show.kinds_line(), highlight=False)
    except KeyboardInterrupt:
        return 0
    if watch is not None:
        click.echo(f"pinlab: process {pid} has ended", err=True)
    return 0


@cli.command()
@click.argument("pid", type=int)
@click.option("--to", "to_nodes", required=True, metavar="NODES", help="The nodes to move the pages to (a node list, or all).")
@click.option("--from", "from_nodes", metavar="NODES", help="Move only the pages on these nodes [default: every node not in --to].")
def migrate(pid, to_nodes, from_nodes) -> None:
    """Move a running process's pages to other NUMA nodes now (as migratepages does), and say where they are.

    Node i of --from goes to node i of --to when both list as many nodes (a cycle, such as
    --from 0,1 --to 1,0, is refused); the kernel folds them otherwise. Exits 2 for a PID that is
    gone or not yours and for nodes without memory.
    """
    from pinlab.memory.migrate import move_process

    before, after, left = move_process(pid, to_nodes, from_nodes)

    def line(pages):
        return ", ".join(f"{node}: {count}" for node, count in sorted(pages.items())) or "none"

    click.echo(f"process {pid}: pages per node before {line(before)}; after {line(after)}")
    if left:
        click.echo(f"pinlab: warning: the kernel left {plural(left, 'page')} where they were (shared with other processes, or busy)", err=True)


# -- live threads: pinlab ps, pinlab pin (issue 10) ------------------------------------------
@cli.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--watch", type=float, metavar="S", help="Look again every S seconds until Ctrl-C or until the processes end.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per process and look, one per line.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw where the threads are now to FILE.svg or FILE.png (one PID).")
def ps(pids, watch, as_json, picture) -> int:
    """Show every thread of running processes: role, CPU now, mask, migrations, CPU time, pages per NUMA node.

    With no PID, the processes of yours that run under `pinlab run`. Exits with 0 (also when the
    processes end while watched), 2 for a PID that does not exist.
    """
    import json
    import time

    from pinlab.live import Watcher, check_process, pinlab_processes
    from pinlab.live import show

    if watch is not None and not 0 < watch <= 86400:
        raise UsageError(f"--watch must be a positive number of seconds, at most a day (got {watch})")
    if picture:
        if len(pids) != 1:
            raise UsageError("--picture draws one process: give exactly one PID")
        show.check_picture_path(picture)
    if not pids:
        pids = pinlab_processes()
        if not pids:
            click.echo("pinlab: no process of yours runs under pinlab run; give the PID of the process to show: pinlab ps PID", err=True)
            return 0
    for pid in pids:
        check_process(pid, repin=False)
    topo = None
    watchers = [Watcher(pid) for pid in pids]
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        while watchers:
            for watcher in list(watchers):
                look = watcher.look()
                if look is None:
                    click.echo(f"pinlab: process {watcher.pid} has ended", err=True)
                    watchers.remove(watcher)
                    continue
                if as_json:
                    click.echo(json.dumps(look.to_json()))
                else:
                    console.print(show.table(look))
                    console.print(show.pages_line(look))
                if picture:
                    if topo is None:
                        from pinlab.topology import load_topology

                        topo = load_topology("this")
                    show.draw_look(look, topo, picture)
            if watch is None or not watchers:
                break
            time.sleep(watch)
    except KeyboardInterrupt:  # Ctrl-C is how --watch stops
        pass
    return 0


@cli.command()
@click.option("--pid", type=int, required=True, help="The process whose threads to re-pin.")
@click.option("--strategy", "-s", help="compact, scatter, random, intra-socket, inter-socket (see pinlab place)")
@click.option("--count", "-n", "count", type=int, help="Threads of the plan (default: the number of selected threads).")
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S0:0-3), as pinlab place -c.")
@click.option("--threads", "which", default="workers", show_default=True, help="workers (main + workers, helpers left alone), all, or thread ids 1234,1240.")
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings in the plan.")
@click.option("--oversubscribe", is_flag=True, help="Allow a plan with more threads than cores (round-robin).")
@click.option("--seed", type=int, help="Seed for the random strategy.")
def pin(pid, strategy, count, cpus, which, smt, oversubscribe, seed) -> None:
    """Re-pin the threads of a running program: the i-th selected thread gets plan CPU i.

    The program keeps running (it is never stopped or signalled). Threads that end meanwhile are
    named; more threads than plan CPUs wrap round-robin, with a notice.
    """
    from pinlab.live import apply_plan, check_process, plan_cpus, select_threads

    check_process(pid)
    selected = select_threads(pid, which)
    plan = plan_cpus(len(selected), strategy=strategy, threads=count, cpus=cpus, smt=smt, oversubscribe=oversubscribe, seed=seed)
    result = apply_plan(pid, selected, plan)
    for notice in result.notices:
        click.echo(f"pinlab: notice: {notice}", err=True)
    roles = {t.tid: t.role for t in result.threads}
    click.echo(f"pinlab: re-pinned {plural(len(result.cpus), 'thread')} of process {pid}")
    for tid, cpu in result.cpus.items():
        click.echo(f"  tid {tid:>8}  {roles[tid]:8} -> CPU {cpu}")
    for tid in result.ended:
        click.echo(f"pinlab: thread {tid} ended before it was re-pinned", err=True)


# ---- affinity graph files (issue 11, item 1)
def _graph_notice(text: str) -> None:
    click.echo(f"pinlab: notice: {text}", err=True)


@cli.group()
def graph() -> None:
    """Affinity graphs: show them, convert them between JSON and a matrix CSV."""


@graph.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--picture", type=click.Path(dir_okay=False), help="Also draw the heat map to FILE.png or FILE.svg.")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric matrix or a non-zero diagonal instead of fixing it.")
@click.option("--threads", "-n", type=int, help="Refuse the graph unless it has this many threads (as a placement of -n threads would).")
def graph_show(file, picture, strict, threads) -> None:
    """Print the affinity graph FILE as a heat map with the heaviest pairs."""
    from rich.console import Console

    from pinlab.graph.model import load_graph
    from pinlab.graph.progress import terminal_progress
    from pinlab.graph.show import render

    if picture:
        from pinlab.graph.picture import check_target

        check_target(picture)
    loaded = load_graph(file, strict=strict, notice=_graph_notice, progress=terminal_progress())
    if threads is not None:
        loaded.check_threads(threads)
    # No markup or emoji: a program's arguments in the summary are printed as they are.
    console = Console(highlight=False, markup=False, emoji=False)
    for part in render(loaded, console.width):
        if isinstance(part, str):
            console.print(part, soft_wrap=True)
        else:
            console.print(part, end="")
    if picture:
        from pinlab.graph.picture import draw

        draw(loaded, picture)


@graph.command("convert")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Refuse an asymmetric matrix or a non-zero diagonal instead of fixing it.")
def graph_convert(source, target, strict) -> None:
    """Convert the affinity graph SOURCE to TARGET: JSON (.json) or a matrix (.csv, .txt, .mat), by the suffixes."""
    from pinlab.graph.model import convert_graph
    from pinlab.graph.progress import terminal_progress

    convert_graph(source, target, strict=strict, notice=_graph_notice, progress=terminal_progress())
# ---- end affinity graph files
# -- calibrate (issue 11, item 5): distances measured on the machine ----------------------------------
@cli.command()
@click.option("--quick", is_flag=True, help="Fewer repetitions: 2 ms per CPU pair instead of 8, smaller memory buffers.")
@click.option("--sample", is_flag=True, help="Large machines: a sample of CPU pairs per topology level (trusts the tree; not for VMs).")
@click.option("--no-memory", is_flag=True, help="Only the core-to-core latency, not the NUMA nodes' bandwidth and latency.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the topology's hwloc XML with the measured distances to FILE.xml.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw the matrices to FILE.png or FILE.svg.")
@click.option("--topology", "-t", "source", default="this", show_default=True, help="The topology of this machine to measure and extend.")
def calibrate(quick, sample, no_memory, output, picture, source) -> None:
    """Measure this machine's distances: core-to-core latency and each NUMA node's bandwidth and latency.

    With -o, the topology is written with the measurements in it (hwloc user distances); give that
    file to --topology of any pinlab command and placements follow the measured machine.
    """
    from pathlib import Path

    from rich.console import Console

    from pinlab.measure.calibrate import calibrate as measure, calibrated_xml
    from pinlab.measure.calibrate_show import LATENCY_TITLE, MEMORY_TITLE, check_picture_path, draw, latency_table, legend, memory_table
    from pinlab.topology import load_topology

    if output is not None:
        from pinlab.outputs import check_writable

        if not output.lower().endswith(".xml"):
            raise UsageError(f"-o {output!r}: the calibrated topology is hwloc XML; give a file name ending in .xml")
        check_writable(output, "the calibrated topology")
    if picture:
        check_picture_path(picture)
    topo = load_topology(source)
    result = measure(topo, quick=quick, sample=sample, memory=not no_memory)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(LATENCY_TITLE, highlight=False)
    console.print(latency_table(result))
    console.print(legend(result))
    estimated = f", {result.estimated_pairs} estimated from their level's median" if result.estimated_pairs else ""
    console.print(f"{plural(result.measured_pairs, 'pair')} of CPUs measured in {result.latency_seconds:.2f} s{estimated}")
    if result.memory is not None:
        console.print(MEMORY_TITLE, highlight=False)
        console.print(memory_table(result))
        console.print(f"memory measured in {result.memory_seconds:.2f} s")
    if output is not None:
        try:
            Path(output).write_text(calibrated_xml(topo, result), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {output!r}: {exc.strerror or exc}") from None
        click.echo(f"pinlab: wrote {output}; use it with --topology {output}", err=True)
    if picture:
        draw(result, picture)
        click.echo(f"pinlab: picture: {picture}", err=True)
# ---- pinlab trace, cc, cflags, ldflags (issue 11: measuring the affinity graph) ----


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--threads", "-n", type=int, required=True, help="Threads of the program (OMP_NUM_THREADS is set to it unless set).")
@click.option("--method", "-m", type=click.Choice(["auto", "exact", "sampled", "pages"]), default="auto", show_default=True,
              help="exact: built with pinlab cc; sampled: memory-sampling hardware; pages: any program. auto picks in that order.")
@click.option("--output", "-o", required=True, help="The graph file: FILE.json (or .csv for a bare matrix).")
@click.option("--no-baseline", is_flag=True, help="Do not run the program a second time untraced to measure the slowdown.")
@click.option("--after", metavar="WHEN", help="Count only from WHEN: SECONDS after the start, 'parallel' (the first thread "
              "created: an OpenMP program's first parallel region) or 'mark' (the program's call to pinlab_trace_start()).")
@click.option("--original", metavar="PROGRAM", help="exact: the program built without pinlab cc, run with the same arguments for the slowdown.")
@click.option("--period-ms", type=int, help="pages: milliseconds between protection rounds [default: 10].")
@click.option("--min-bytes", type=int, help="pages: only mappings at least this large are watched [default: 65536].")
@click.option("--heap", is_flag=True, help="pages: watch malloc's main heap too (small blocks; see the README for the risk).")
@click.option("--sample-period", type=int, help="sampled: one data-address sample every this many loads/stores [default: 1000].")
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def trace(threads, method, output, no_baseline, after, original, period_ms, min_bytes, heap, sample_period, quiet, program) -> int:
    """Measure which threads share data: pinlab trace -n THREADS -o FILE -- PROGRAM [ARGS...]

    The program's output and exit status pass through unchanged (pinlab exits with the program's
    status, 128+N if it died of signal N); 128+N when pinlab is stopped by signal N (Ctrl-C: 130);
    127/126 for a program that cannot be found or executed; 2 for bad options.
    """
    from pinlab.graph.trace import trace_program
    from pinlab.graph.trace.common import TraceRequest

    settings = {"period_ms": period_ms, "min_bytes": min_bytes, "heap": True if heap else None, "sample_period": sample_period}
    request = TraceRequest(argv=list(program), threads=threads, options={k: v for k, v in settings.items() if v is not None}, after=after)
    outcome = _started(lambda: trace_program(request, method, baseline=not no_baseline, output=output, original=original))
    if isinstance(outcome, int):
        return outcome
    result = outcome.result
    for warning in result.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    if not quiet:
        measured = result.graph.measured
        speed = f", untraced {outcome.baseline_seconds:.3f} s, slowdown x{outcome.slowdown:.1f}" if outcome.slowdown else ""
        where = f"graph of {threads} threads -> {output}" if outcome.written else "no graph written"
        click.echo(f"pinlab: traced with {outcome.method} in {result.wall_seconds:.3f} s{speed}; "
                   f"{measured.get('units_seen', '?')} {result.graph.granularity}s seen; {where}", err=True)
    return 128 + outcome.interrupted if outcome.interrupted else result.exit_status


@cli.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@click.option("--verbose", "-v", is_flag=True, help="Print each compiler command before it runs.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def cc(verbose, command) -> int:
    """Build a program for pinlab trace --method exact: pinlab cc -- COMPILER ARGS...

    Compile steps get -fsanitize=thread; the link step gets pinlab's tracer runtime instead of
    ThreadSanitizer's (a command doing both is split). Exits with the compiler's status; 127 for a
    compiler that is not found, 126 for one that cannot be executed, 2 for one that does not build.
    """
    from pinlab.graph.trace.cc import build

    return _started(lambda: build(list(command), echo=(lambda line: click.echo(line, err=True)) if verbose else None))


@cli.command()
@click.option("--mem", is_flag=True, help="The flags of a program using pinlab's memory API (pinlab_mem.h) instead.")
def cflags(mem) -> None:
    """Print the compile flags of a program to trace exactly (for Makefiles: CFLAGS += $(pinlab cflags)).

    With --mem, those of a program using the memory API: CFLAGS += $(pinlab cflags --mem).
    """
    if mem:
        from pinlab.native import include_dir

        click.echo(f"-I{include_dir()}")
        return
    from pinlab.graph.trace.cc import compile_flags

    click.echo(" ".join(compile_flags()))


@cli.command()
@click.option("--mem", is_flag=True, help="Link pinlab's memory library (libpinlab-mem) instead.")
def ldflags(mem) -> None:
    """Print the link flags of a program to trace exactly (pinlab's tracer runtime, with an rpath).

    With --mem, those of a program using the memory API: LDLIBS += $(pinlab ldflags --mem).
    """
    if mem:
        from pinlab.native import native_path

        directory = native_path("libpinlab-mem.so").parent
        click.echo(f"-L{directory} -Wl,-rpath,{directory} -lpinlab-mem")
        return
    from pinlab.graph.trace.cc import link_flags

    click.echo(" ".join(link_flags()))


# ---- end of pinlab trace ----


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and exit status 2, never a traceback."""
    try:
        result = cli.main(args=argv, prog_name="pinlab", standalone_mode=False)
    except UsageError as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return exc.exit_status
    except click.exceptions.NoSuchOption as exc:
        click.echo(f"pinlab: error: {exc.format_message()} (see 'pinlab {exc.ctx.info_name if exc.ctx else ''} --help')", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"pinlab: error: {exc.format_message()}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("pinlab: aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
