"""pinlab place: compute a placement and print it in the chosen format (and its picture, its cost, or a split among MPI ranks)."""

from __future__ import annotations

import json

import click

from pinlab.cli.common import GRAPH_STRATEGY_HELP, TOPOLOGY_HELP, graph_option
from pinlab.cpuset import format_cpulist
from pinlab.placement.cost import compare, format_comparison
from pinlab.placement.exports import export
from pinlab.placement.picture import draw, draw_ranks
from pinlab.placement.request import PlaceRequest
from pinlab.ranks.launch import domain_placement, domain_topology, node_split, this_rank
from pinlab.ranks.show import rank_table
from pinlab.topology import load_topology
from pinlab.topology.sources import load_node
from pinlab.words import plural


@click.command()
@click.option("--strategy", "-s", help="compact|close, scatter|spread, random, none|os, intra-socket, inter-socket, autonuma" + GRAPH_STRATEGY_HELP)
@click.option("--threads", "-n", type=int, help="Number of threads (thread 0 is the main thread).")
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S1:0-3, M0:0-1@M1:0-1, E:N:4:1:2).")
@click.option("--topology", "-t", "source", default="this", show_default=True, help=TOPOLOGY_HELP)
@click.option("--seed", type=int, help="Seed for the random strategy (default: a fresh one, printed in the JSON).")
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings (default: one thread per physical core).")
@click.option("--oversubscribe", is_flag=True, help="Wrap round-robin when there are more threads than CPUs.")
@click.option("--cpu-kind", help="Hybrid processors: only this kind of core: performance (P), efficiency (E), or hwloc's kind name.")
@click.option("--format", "-f", "fmt", default="list", show_default=True, help="list, json, omp, kmp, numactl, taskset, likwid, slurm")
@click.option("--picture", type=click.Path(dir_okay=False, writable=True), help="Also draw the placement to FILE.svg or FILE.png.")
# -- graph strategies --
@click.option(
    "--graph",
    "graph_file",
    type=click.Path(dir_okay=False),
    help="Affinity graph (pinlab trace) for lp-compact, lp-scatter, gp, lpgp, gplp, treematch; also prints placement costs.",
)
@click.option("--domains", type=int, help="Graph strategies: use only this many sockets (or NUMA nodes).")
@click.option("--level", help="gp: partition into the objects of this level (package, numa, l3, l2...).")
@click.option("--strict", is_flag=True, help="Refuse an asymmetric graph instead of symmetrising it.")
@click.option("--ranks", type=int, help="Preview the node split among R MPI ranks (with -s/-n: each rank's threads inside its part).")
@click.option("--gpus", is_flag=False, flag_value="all", help="With --ranks: ranks next to the GPUs (all, or a list: cuda0,cuda1 / rsmi2 / bus ids).")
@click.option(
    "--rank",
    "rank",
    default="auto",
    show_default=True,
    help="On this machine, in an MPI rank context (auto: srun/mpirun's environment; off; or LOCAL/COUNT): the placement inside the rank's part of the node.",
)
def place(
    strategy, threads, cpus, source, seed, smt, oversubscribe, cpu_kind, fmt, picture, graph_file, domains, level, strict, ranks, gpus, rank
) -> None:
    """Compute a placement: the CPU of thread 0, 1, 2, ... in order."""
    request = PlaceRequest(
        strategy=strategy,
        threads=threads,
        cpus=cpus,
        topology=source,
        seed=seed,
        smt=smt,
        oversubscribe=oversubscribe,
        cpu_kind=cpu_kind,
        format=fmt,
        picture=picture,
        graph=graph_file,
        domains=domains,
        level=level,
        strict=strict,
        ranks=ranks,
        gpus=gpus,
        rank=rank,
    )
    if request.ranks is not None:
        _place_ranks(request, request.ranks)
        return
    topo = (_rank_domain(request.rank) if request.on_this_machine else None) or load_topology(request.topology)
    fits = dict(topology=lambda: topo, strategy=strategy, threads=threads, smt=smt, domains=domains)
    graph = graph_option(request.graph, request.strict, fits)
    placement = request.place(topo, graph)
    if graph is not None:
        _place_costs(placement, graph, request.format)
    else:
        _print_placement(placement, topo, request.format)
    if request.picture:
        draw(placement, request.picture)


def _print_placement(placement, topo, fmt: str) -> None:
    """The placement in format ``fmt``; for one that does not pin, first a line on stderr saying so."""
    if placement.cpus is None and fmt == "list":
        balancing = ", with the kernel's automatic NUMA balancing switched on for the run" if placement.strategy == "autonuma" else ""
        click.echo(
            f"{placement.strategy}: no pinning; the operating system places {plural(placement.threads, 'thread')} on CPUs "
            f"{format_cpulist(topo.allowed_cpus)}{balancing}",
            err=True,
        )
    text = export(placement, fmt)
    if text:
        click.echo(text)


def _rank_domain(rank: str):
    """pinlab place on this machine in a rank context: this machine with only the rank's domain
    allowed (said on stderr), or None outside any."""
    plan = this_rank(rank, None)
    if plan is None:
        return None
    click.echo(f"pinlab: {plan.summary()}", err=True)
    return plan.topology


def _place_ranks(request: PlaceRequest, ranks: int) -> None:
    """pinlab place --ranks R [--gpus]: the node's split, and each rank's placement with -s/-c."""
    options = request.options(graph_option(request.graph, request.strict))
    topo = load_node() if request.on_this_machine else load_topology(request.topology)
    split, notices = node_split(topo, ranks, request.gpus)
    for notice in notices:
        click.echo(f"pinlab: notice: {notice}", err=True)
    placements = None
    if request.strategy is not None or request.cpus is not None:
        placements = [domain_placement(domain_topology(topo, d), d, ranks, options) for d in split.domains]
    if request.picture:
        draw_ranks(split, request.picture, placements)
    if request.format == "json":
        data = split.to_json()
        if placements:
            for d, p in zip(data["domains"], placements):
                d["placement"] = p.to_json()
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(rank_table(split, placements))


def _place_costs(placement, graph, fmt) -> None:
    """pinlab place --graph: the placement, then its cost beside compact/scatter/random (JSON: a "cost" object)."""
    graph.check_threads(placement.threads)
    result = compare(placement, graph)
    if fmt == "json":
        data = placement.to_json()
        data["cost"] = {"graph": graph.source, **result}
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(export(placement, fmt))
    # The table goes to stderr so that the placement on stdout stays usable by scripts.
    click.echo(format_comparison(result), err=True)
