"""Bounds on what one study may schedule (imported by the command line's help without the engine).

A run costs at least a few milliseconds, so a million runs is already hours of machine time:
larger counts are typing mistakes (``--runs 999999999999``), refused with one line before
anything is stored, never turned into a schedule in memory.
"""

#: Runs (or ``--max-runs``, or warm-ups) per configuration.
MAX_RUNS_PER_CONFIG = 100_000
#: Runs of one study in all (configurations x runs per configuration, warm-ups included).
MAX_STUDY_RUNS = 1_000_000
#: Longest ``--timeout`` accepted: a week, in seconds.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
