"""pinlab workload and pinlab corun: the bundled programs and co-runners."""

from __future__ import annotations

import click

from pinlab.cli.common import RenamingCommand, renamed
from pinlab.cli.completion import complete_strategies
from pinlab.launch.runner import run as launch
from pinlab.native import include_dir as headers
from pinlab.words import plural
from pinlab.workloads import WORKLOADS, workload_path, workload_spec
from pinlab.workloads.corun import CoRunners


@click.group()
def workload() -> None:
    """Built-in workloads: STREAM family, mb, primes, pairs."""


@workload.command("list")
def workload_list() -> None:
    """List the built-in workloads."""
    for w in WORKLOADS.values():
        click.echo(f"{w.name:18} {w.kind:26} {w.summary}")


@workload.command("path")
@click.argument("name")
def workload_path_command(name: str) -> None:
    """Print the executable of workload NAME (to run it under taskset, likwid-pin, perf...)."""
    click.echo(workload_path(name))


@workload.command("heartbeat-header")
@click.option("--include-dir", is_flag=True, help="Print the directory to give cc -I instead of the header's path.")
def workload_heartbeat_header(include_dir: bool) -> None:
    """Print the path of pinlab_heartbeat.h, the C header by which a program reports its work to autopin."""
    directory = headers()
    click.echo(directory if include_dir else directory / "pinlab_heartbeat.h")


@workload.command("run")
@click.argument("name")
@click.option("--threads", "-n", type=int, help="Number of OpenMP threads.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object with the results.")
@click.option("--strategy", "-s", shell_complete=complete_strategies, help="Run pinned with this strategy (through pinlab run).")
@click.option("--cpus", "-c", help="Run pinned on these CPUs (through pinlab run).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def workload_run(name, threads, as_json, strategy, cpus, args) -> int:
    """Run workload NAME; its own options go after --, as in pinlab workload run stream -n 2 -- --size 10M"""
    record = launch(workload_spec(name, threads, args, json=as_json, strategy=strategy, cpus=cpus))
    for warning in record.warnings:
        click.echo(f"pinlab: warning: {warning}", err=True)
    return record.exit_status


@renamed({"-n": "--count"})
@click.command(cls=RenamingCommand, context_settings={"show_default": True})
@click.argument("kind")
@click.option("--count", type=int, default=1, help="Number of co-runner processes.")
@click.option("--cpus", "-c", help="CPUs to load, one co-runner per CPU in turn (default: all allowed).")
@click.option("--period-us", type=int, help="sleep kind: period of busy + sleep, 10 to 10000 us (default 1000).")
@click.option("--duty", type=int, help="sleep kind: percent of each period spent busy (default 50).")
@click.option("--size", help="memory kind: buffer size (default 4x the last-level cache).")
@click.option("--duration", type=float, help="Stop after this many seconds (default: run until Ctrl-C or SIGTERM).")
def corun(kind, count, cpus, period_us, duty, size, duration) -> int:
    """Run co-runners of KIND (cpu, sleep, memory) until stopped, to load CPUs during a measurement."""
    runners = CoRunners(kind, count, cpus, period_us=period_us, duty=duty, size=size, duration=duration)
    failure = runners.hold(started=_announce)
    if failure:
        click.echo(f"pinlab: error: co-runner {failure}; see its message above", err=True)
        return runners.exit_status()
    return 0


def _announce(runners: CoRunners) -> None:
    """The co-runners' kind, CPUs and pids on stderr, once they run."""
    count, kind = runners.count, runners.kind
    cpus_used = sorted({runners.cpus[i % len(runners.cpus)] for i in range(count)})
    click.echo(
        f"pinlab: {plural(count, f'{kind} co-runner')} on {'CPU' if len(cpus_used) == 1 else 'CPUs'} "
        f"{','.join(map(str, cpus_used))}, {'pid' if count == 1 else 'pids'} {' '.join(map(str, runners.pids))}",
        err=True,
    )
