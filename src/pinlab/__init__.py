"""pinlab: find, apply and prove the best placement of a program's threads and memory."""

from pinlab.version import __version__

__all__ = ["__version__", "doctor", "load_study", "run", "tune"]


def run(argv, placement=None, **options):
    """Run a program pinned; see :func:`pinlab.launch.run` (imported lazily to keep ``import pinlab`` cheap)."""
    from pinlab.launch import run as _run

    return _run(argv, placement, **options)


def load_study(db, name=None, **options):
    """A stored study as pandas DataFrames ``(runs, stats)``; see :func:`pinlab.report.data.load_study`."""
    from pinlab.report.data import load_study as _load

    return _load(db, name, **options)


def doctor(pids=None, seconds=3.0, **options):
    """What is wrong with where process ``pids``'s threads are, and the fix; see :func:`pinlab.doctor.doctor`.

    Once ``pinlab.doctor`` (the package) is imported it replaces this function as the attribute,
    and is callable the same way.
    """
    from pinlab.doctor import doctor as _doctor

    return _doctor(pids, seconds, **options)


def tune(program=(), **options):
    """Race placements of ``program`` (argv) and answer which to use; see :func:`pinlab.tune.tune`.

    ``options`` are :class:`pinlab.tune.TuneRequest`'s (``threads``, ``budget``, ``db``...), checked
    before anything runs. Once ``pinlab.tune`` (the package) is imported it replaces this function
    as the attribute, and is callable the same way.
    """
    from pinlab.tune import TuneRequest
    from pinlab.tune import tune as _tune

    return _tune(TuneRequest(program=tuple(program), **options))
