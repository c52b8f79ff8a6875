"""Progress of a long graph load, shown on a terminal.

:func:`pinlab.graph.model.load_graph` takes a ``progress`` object and, for a file larger than
``LARGE_FILE_BYTES``, calls ``step(description, total)`` at each phase (reading the file, with
its size in bytes as the total; parsing; checking the weights), ``advance(nbytes)`` as the bytes
come in, and ``done()`` at the end, loaded or refused. Small files call nothing.

:func:`terminal_progress` gives the object pinlab's commands pass: a rich bar (a spinner where a
phase has no total) on stderr when stderr is a terminal, removed when the load ends; elsewhere
(a pipe, a file, a CI log) None, and the load prints nothing beyond its notices.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from pinlab import terminal


class TerminalProgress:
    """A transient rich progress display on ``stream`` (stderr), started on the first step."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream
        self._bar: Any = None
        self._task: Any = None

    def step(self, description: str, total: int | None = None) -> None:
        """A new phase: a bar to ``total`` (bytes), or a pulsing one where the total is not known."""
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            console = terminal.console(piped_width=None, file=self.stream or sys.stderr, force_terminal=True, highlight=False)
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.start()
        else:
            self._bar.remove_task(self._task)
        self._task = self._bar.add_task(description, total=total)

    def advance(self, amount: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def done(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def terminal_progress(stream: IO[str] | None = None) -> TerminalProgress | None:
    """A progress display for graph loads when ``stream`` (default stderr) is a terminal, else None."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        tty = False
    return TerminalProgress(stream) if tty else None
