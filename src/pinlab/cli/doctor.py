"""pinlab doctor: what is wrong with where a program's threads and memory are, and the exact fix."""

from __future__ import annotations

import json

import click

from pinlab import terminal
from pinlab.cli.completion import complete_strategies
from pinlab.cli.program import started
from pinlab.doctor import DoctorRequest, examine
from pinlab.doctor.request import DEFAULT_SECONDS
from pinlab.doctor.show import print_report


class DoctorCommand(click.Command):
    """PIDs before ``--``, the program to start after it: click would mix both into one argument."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            ctx.meta["pinlab_doctor_program"] = args[at + 1 :]
            args = args[:at]
        return super().parse_args(ctx, args)


@click.command(cls=DoctorCommand)
@click.argument("pids", nargs=-1, type=int)
@click.option(
    "--seconds", type=float, default=DEFAULT_SECONDS, show_default=True, help="How long to watch (0.2 to 3600): threads are sampled every 100 ms."
)
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object (keys in the manual).")
@click.option("--strategy", "-s", shell_complete=complete_strategies, help="With -- PROGRAM: run it placed by this strategy (as pinlab run -s).")
@click.option("--cpus", "-c", help="With -- PROGRAM: run it on these CPUs (as pinlab run -c).")
@click.option("--threads", "-n", type=int, help="With -- PROGRAM: threads of the plan (also OMP_NUM_THREADS when unset).")
@click.pass_context
def doctor(ctx, pids, seconds, as_json, strategy, cpus, threads) -> int:
    """Find what is wrong with where a program's threads are, and print the exact fix: pinlab doctor PID [PID...] | -- PROGRAM [ARGS...]

    Watches running processes (PID...) for --seconds, or starts PROGRAM as pinlab run does
    (unpinned unless -s or -c is given) and watches it for --seconds, then reports once it has
    ended, its output and exit status kept. Each finding says what is wrong, its evidence, why it
    costs time and the lines to paste that fix it.

    Exits with 0 when nothing is above info, 1 when a warning or a problem is found, 2 for bad
    input; with -- PROGRAM, the program's status when it is not 0 (127 if it is not found, 126 if
    it cannot be executed), else 0 or 1 by the findings.
    """
    program = ctx.meta.get("pinlab_doctor_program", [])
    req = DoctorRequest(tuple(pids), seconds, tuple(program), strategy, cpus, threads)
    report = started(lambda: examine(req))
    if isinstance(report, int):
        return report
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        print_report(report, terminal.console(highlight=False))
    if report.exit_status:
        return report.exit_status
    return report.status
