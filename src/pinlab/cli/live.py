"""pinlab ps and pinlab pin: the threads of running programs, and re-pinning them."""

from __future__ import annotations

import json
import time

import click

from pinlab import terminal
from pinlab.cli.completion import complete_strategies
from pinlab.live import Watcher, WatchRequest, apply_plan, check_process, pinlab_processes, plan_cpus, select_threads, show
from pinlab.topology import load_topology
from pinlab.words import plural


@click.command()
@click.argument("pids", nargs=-1, type=int)
@click.option("--watch", type=float, metavar="S", help="Look again every S seconds until Ctrl-C or until the processes end.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per process and look, one per line.")
@click.option("--picture", type=click.Path(dir_okay=False), help="Draw where the threads are now to FILE.svg or FILE.png (one PID).")
def ps(pids, watch, as_json, picture) -> int:
    """Show every thread of running processes: role, CPU now, mask, migrations, CPU time, pages per NUMA node.

    With no PID, the processes of yours that run under `pinlab run`. Exits with 0 (also when the
    processes end while watched), 2 for a PID that does not exist.
    """
    request = WatchRequest(tuple(pids), watch, picture)
    if not pids:
        pids = pinlab_processes()
        if not pids:
            click.echo("pinlab: no process of yours runs under pinlab run; give the PID of the process to show: pinlab ps PID", err=True)
            return 0
    for pid in pids:
        check_process(pid, repin=False)
    topo = None
    watchers = [Watcher(pid) for pid in pids]
    console = terminal.console()
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
                if request.picture:
                    if topo is None:
                        topo = load_topology("this")
                    show.draw_look(look, topo, request.picture)
            if request.every is None or not watchers:
                break
            time.sleep(request.every)
    except KeyboardInterrupt:  # Ctrl-C is how --watch stops
        pass
    return 0


def _count_or_old_selection(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """-n/--threads is the plan's thread count, as everywhere; --threads once selected the threads
    (now --select): a value that is not a count is taken the old way, with a notice."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        click.echo(
            f"pinlab: notice: pin --threads {value} is now --select {value} (-n/--threads is the plan's thread count, as in every command); "
            "the old spelling goes in the next release",
            err=True,
        )
        return value


def _old_count(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        click.echo("pinlab: notice: pinlab pin --count is now -n/--threads; the old spelling goes in the next release", err=True)
    return value


@click.command()
@click.option("--pid", type=int, required=True, help="The process whose threads to re-pin.")
@click.option("--strategy", "-s", shell_complete=complete_strategies, help="compact, scatter, random, intra-socket, inter-socket (see pinlab place)")
@click.option("--threads", "-n", "count", callback=_count_or_old_selection, help="Threads of the plan (default: the number of selected threads).")
@click.option("--count", "old_count", type=int, hidden=True, callback=_old_count)
@click.option("--cpus", "-c", help="Explicit CPUs (0,2,4-7) or a domain expression (S0:0-3), as pinlab place -c.")
@click.option(
    "--select", "which", default="workers", show_default=True, help="workers (main + workers, helpers left alone), all, or thread ids 1234,1240."
)
@click.option("--smt", is_flag=True, help="Allow hardware-thread siblings in the plan.")
@click.option("--oversubscribe", is_flag=True, help="Allow a plan with more threads than cores (round-robin).")
@click.option("--seed", type=int, help="Seed for the random strategy.")
def pin(pid, strategy, count, old_count, cpus, which, smt, oversubscribe, seed) -> None:
    """Re-pin the threads of a running program: the i-th selected thread gets plan CPU i.

    The program keeps running (it is never stopped or signalled). Threads that end meanwhile are
    named; more threads than plan CPUs wrap round-robin, with a notice.
    """
    if isinstance(count, str):  # the old --threads SELECTION
        if which != "workers":
            raise click.UsageError(f"--threads {count} and --select {which} both choose the threads to re-pin: keep --select")
        count, which = None, count
    if old_count is not None:
        count = old_count
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
