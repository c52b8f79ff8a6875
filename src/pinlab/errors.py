"""The exceptions that reach the user as a clear, one-line message.

Library code raises :class:`UsageError` for anything the user can fix (bad input, a missing
tool, a CPU that does not exist); the command line prints its message and exits with status 2,
never a traceback. A program to start that is missing or cannot be executed is its own pair
(exit statuses 127 and 126, as env(1) uses), here rather than with the launcher so that a
command can tell them apart without importing it. Anything else is a bug and is allowed to show
its traceback.
"""


class UsageError(Exception):
    """Bad input or environment: the message says what is wrong and what to do."""

    exit_status = 2


class ProgramNotFound(Exception):
    """The program does not exist (exit status 127, as env and timeout use)."""


class ProgramNotExecutable(Exception):
    """The program exists but cannot be executed (exit status 126)."""
