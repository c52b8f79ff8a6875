"""The one place pinlab makes a rich console for what it prints.

Every table and report is printed through :func:`console`, so that they all agree on what a
pipe gets: rich wraps at 80 columns when its output is not a terminal, which folds wide tables
into unreadable columns in a log file or under ``less``; a piped console is given a fixed, wider
width instead. rich is a heavy import (``pinlab run`` must not pay for it), so it is imported
inside the function, when something is about to be printed.
"""

from __future__ import annotations

import sys
from typing import IO, Any

#: The width of a table printed into a pipe or a file (a terminal keeps its own width).
PIPED_WIDTH = 160


def console(*, piped_width: int | None = PIPED_WIDTH, file: IO[str] | None = None, **settings: Any) -> Any:
    """A rich ``Console`` on ``file`` (stdout by default), ``piped_width`` columns wide when that is not a terminal.

    ``piped_width=None`` leaves the width to rich (the terminal's, or ``COLUMNS``, or 80), for output
    that is not a table: a progress bar, or text that wraps itself. ``settings`` go to ``Console``
    as they are (``highlight``, ``markup``, ``force_terminal``, ...).
    """
    from rich.console import Console

    stream = file if file is not None else sys.stdout
    width = None if piped_width is None or stream.isatty() else piped_width
    return Console(file=file, width=width, **settings)
