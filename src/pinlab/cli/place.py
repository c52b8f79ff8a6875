"""pinlab place: compute a placement and print it in the chosen format (and its picture, its cost, or a split among MPI ranks)."""

from __future__ import annotations

import json

import click

from pinlab.cli.common import TOPOLOGY_HELP, graph_option, graph_strategy_options, placement_options
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
@placement_options()
@click.option("--topology", "-t", "source", default="this", show_default=True, help=TOPOLOGY_HELP)
@click.option(
    "--plan", "plan_file", type=click.Path(dir_okay=False), help="A plan file (pinlab place -f json, pinlab tune -o): its placement on this topology."
)
@click.option("--format", "-f", "fmt", default="list", show_default=True, help="list, json, omp, kmp, numactl, taskset, likwid, slurm")
@click.option("--picture", type=click.Path(dir_okay=False, writable=True), help="Also draw the placement to FILE.svg or FILE.png.")
@graph_strategy_options("Affinity graph (pinlab trace) for lp-compact, lp-scatter, gp, lpgp, gplp, treematch; also prints placement costs.")
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
    strategy,
    threads,
    cpus,
    source,
    plan_file,
    seed,
    smt,
    oversubscribe,
    cpu_kind,
    fmt,
    picture,
    graph_file,
    domains,
    level,
    strict,
    ranks,
    gpus,
    rank,
) -> None:
    """Compute a placement: the CPU of each thread, in the order threads start."""
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
        plan=plan_file,
    )
    if request.ranks is not None:
        _place_ranks(request, request.ranks)
        return
    topo = (_rank_domain(request.rank) if request.on_this_machine else None) or load_topology(request.topology)
    fits = dict(topology=lambda: topo, strategy=strategy, threads=threads, smt=smt, domains=domains)
    graph = graph_option(request.graph, request.strict, fits)
    notices: list[str] = []
    placement = request.place(topo, graph, notices)
    for notice in notices:
        click.echo(f"pinlab: {notice}", err=True)
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
