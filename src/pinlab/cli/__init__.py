"""The ``pinlab`` command line: parse, call the library, print.

One module per command or group of commands, found through :data:`COMMANDS` and imported only
when its command runs (or when help lists it), so that ``pinlab run`` pays for no other command's
imports. Errors of the library (:class:`pinlab.errors.UsageError`) and of the command line
(click's) both end as one line on standard error and exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib

import click

from pinlab.errors import UsageError

#: Command name -> "module:function" under pinlab.cli, in the order ``pinlab --help`` lists them.
COMMANDS = {
    "topology": "topology:topology",
    "place": "place:place",
    "run": "run:run",
    "autopin": "autopin:autopin",
    "workload": "workload:workload",
    "corun": "workload:corun",
    "check": "check:check",
    "study": "study:study",
    "study-task": "study:study_task",
    "report": "report:report",
    "autopin-report": "report:autopin_report",
    "memmap": "memory:memmap",
    "migrate": "memory:migrate",
    "ps": "live:ps",
    "pin": "live:pin",
    "graph": "graph:graph",
    "calibrate": "calibrate:calibrate",
    "trace": "trace:trace",
    "cc": "trace:cc",
    "cflags": "trace:cflags",
    "ldflags": "trace:ldflags",
}


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
