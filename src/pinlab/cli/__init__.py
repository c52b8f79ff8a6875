"""The ``pinlab`` command line: parse, call the library, print.

One module per command or group of commands, found through :data:`COMMANDS` and imported only
when its command runs (or when help lists it), so that ``pinlab run`` pays for no other command's
imports. Errors of the library (:class:`pinlab.errors.UsageError`) and of the command line
(click's) both end as one line on standard error and exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib

import click
from click.shell_completion import CompletionItem

from pinlab.errors import UsageError

#: Command name -> ("module:function" under pinlab.cli, the line ``pinlab --help`` shows, None when
#: hidden), in the order ``pinlab --help`` lists them. The line is the first of the command's
#: docstring (a test keeps them equal), so that listing the commands imports none of them.
REGISTRY: dict[str, tuple[str, str | None]] = {
    "topology": ("topology:topology", "Show the machine's topology (or another one's)."),
    "place": ("place:place", "Compute a placement: the CPU of each thread, in the order threads start."),
    "run": ("run:run", "Run PROGRAM with every thread pinned from its first instruction: pinlab run [OPTIONS] -- PROGRAM [ARGS...]"),
    "autopin": ("autopin:autopin", "Find the best pinning while the program runs, and keep it: pinlab autopin [OPTIONS] -- PROGRAM [ARGS...]"),
    "workload": ("workload:workload", "Built-in workloads: STREAM family, mb, primes, pairs."),
    "corun": ("workload:corun", "Run co-runners of KIND (cpu, sleep, memory) until stopped, to load CPUs during a measurement."),
    "check": ("check:check", "Tell what on this machine will add noise or bias to measurements, and how to change it."),
    "study": ("study:study", "Run programs many times under each placement and store every run: pinlab study [OPTIONS] -- PROGRAM ARGS"),
    "study-task": ("study:study_task", None),
    "report": ("report:report", "Statistics of a stored study (NAME, default the latest): tables, CSV, JSON, HTML."),
    "autopin-report": ("report:autopin_report", "Report on an autopin log (written by `pinlab autopin --log FILE`): candidates, verdicts, timeline."),
    "memmap": ("memory:memmap", "Where a running process's memory lives: resident MiB per NUMA node, per kind of mapping and per mapping."),
    "migrate": ("memory:migrate", "Move a running process's pages to other NUMA nodes now (as migratepages does), and say where they are."),
    "ps": ("live:ps", "Show every thread of running processes: role, CPU now, mask, migrations, CPU time, pages per NUMA node."),
    "doctor": (
        "doctor:doctor",
        "Find what is wrong with where a program's threads are, and print the exact fix: pinlab doctor PID [PID...] | -- PROGRAM [ARGS...]",
    ),
    "tune": (
        "tune:tune_command",
        "Race placements of a program and print the one to use, with its gain and how sure: pinlab tune [OPTIONS] -- PROGRAM [ARGS...]",
    ),
    "pin": ("live:pin", "Re-pin the threads of a running program: the i-th selected thread gets plan CPU i."),
    "graph": ("graph:graph", "Affinity graphs: show them, convert them between JSON and a matrix CSV."),
    "calibrate": ("calibrate:calibrate", "Measure this machine's distances: core-to-core latency and each NUMA node's bandwidth and latency."),
    "trace": ("trace:trace", "Measure which threads share data: pinlab trace -n THREADS -o FILE -- PROGRAM [ARGS...]"),
    "cc": ("trace:cc", "Build a program for pinlab trace --method exact: pinlab cc -- COMPILER ARGS..."),
    "cflags": ("trace:cflags", "Print the compile flags of a program to trace exactly (for Makefiles: CFLAGS += $(pinlab cflags))."),
    "ldflags": ("trace:ldflags", "Print the link flags of a program to trace exactly (pinlab's tracer runtime, with an rpath)."),
}

#: Command name -> "module:function".
COMMANDS = {name: target for name, (target, _) in REGISTRY.items()}


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(f"pinlab.cli.{module}"), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of ``pinlab --help``, from the registry: no command module is imported for it."""
        rows = [(name, summary) for name, (_, summary) in REGISTRY.items() if summary is not None]
        width = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, click.Command(name, help=summary).get_short_help_str(width)) for name, summary in rows]
            )  # shortened as click does

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names from the registry (click's own would import every command for its help
        line), then the group's options."""
        items = [CompletionItem(name, help=summary) for name, (_, summary) in REGISTRY.items() if summary is not None and name.startswith(incomplete)]
        return items + click.Command.shell_complete(self, ctx, incomplete)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pinlab")
def cli() -> None:
    """pinlab: find, apply and prove the best placement of threads and memory."""


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
