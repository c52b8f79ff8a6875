"""pinlab: find, apply and prove the best placement of a program's threads and memory."""
__version__ = "0.1.0"


def run(argv, placement=None, **options):
    """Run a program pinned; see :func:`pinlab.launch.run` (imported lazily to keep ``import pinlab`` cheap)."""
    from pinlab.launch import run as _run

    return _run(argv, placement, **options)
