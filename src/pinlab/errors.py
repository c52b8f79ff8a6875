"""The one exception type that reaches the user as a clear, one-line message.

Library code raises :class:`UsageError` for anything the user can fix (bad input, a missing
tool, a CPU that does not exist); the command line prints its message and exits with status 2,
never a traceback. Anything else is a bug and is allowed to show its traceback.
"""


class UsageError(Exception):
    """Bad input or environment: the message says what is wrong and what to do."""

    exit_status = 2
