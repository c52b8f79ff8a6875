"""A program the command starts: one that is missing or cannot be executed is one line and env(1)'s status.

Apart from the other helpers of the commands, and importing no more than click and the errors,
so that ``pinlab doctor PID`` (whose start-up the watched program shares its CPUs with) starts light.
"""

from __future__ import annotations

import click

from pinlab.errors import ProgramNotExecutable, ProgramNotFound


def started(start):
    """``start()``'s result; a program that is not found or cannot be executed is said in one line
    and becomes the exit status env(1) uses (127, 126)."""
    try:
        return start()
    except ProgramNotFound as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 127
    except ProgramNotExecutable as exc:
        click.echo(f"pinlab: error: {exc}", err=True)
        return 126
