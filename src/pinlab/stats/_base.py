"""What every stats module shares: checking a sample, quiet scipy calls, JSON-able records.

No NaN or infinity ever reaches a statistic: :func:`as_sample` refuses non-finite run times, and
bounds them to [``MIN_TIME``, ``MAX_TIME``] so that no square, sum or ratio of run times overflows
to infinity or underflows to zero (a subnormal "sample" such as [5e-324, 1e-323] would otherwise
have a variance of exactly 0 without being constant).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pinlab.errors import UsageError

if TYPE_CHECKING:  # numpy and scipy load when a statistic is computed: importing pinlab.stats stays cheap
    import numpy as np

#: The smallest and largest run time accepted (seconds, or whatever unit the caller uses):
#: far beyond any real measure, and narrow enough that squares and ratios stay normal floats.
MIN_TIME = 1e-100
MAX_TIME = 1e100


class InvalidSample(UsageError, ValueError):
    """A sample or a parameter the statistics cannot use (empty, not finite, not positive, ...)."""


def as_sample(sample: Sequence[float], what: str = "sample") -> np.ndarray:
    """The run times as a 1-D float array; every time must be a finite number of seconds > 0,
    within [MIN_TIME, MAX_TIME]."""
    import numpy as np

    try:
        x = np.asarray(sample, dtype=float)
    except (TypeError, ValueError) as e:
        raise InvalidSample(f"{what}: run times must be numbers ({e})") from None
    if x.ndim != 1:
        raise InvalidSample(f"{what}: expected a flat sequence of run times, got shape {x.shape}")
    if x.size == 0:
        raise InvalidSample(f"{what}: no run times (at least one run is needed)")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise InvalidSample(f"{what}: run times must be finite and > 0 seconds")
    if np.any(x < MIN_TIME) or np.any(x > MAX_TIME):
        raise InvalidSample(f"{what}: run times must lie between {MIN_TIME:g} and {MAX_TIME:g} seconds")
    return x


def all_equal(x: np.ndarray) -> bool:
    """Whether every run took exactly the same time (a sample of one run counts as all equal)."""
    import numpy as np

    return bool(np.all(x == x[0]))


def check_level(value: float, name: str) -> float:
    """A probability strictly between 0 and 1 (a confidence level or a risk alpha)."""
    v = float(value)
    if not 0.0 < v < 1.0:
        raise InvalidSample(f"{name} must be strictly between 0 and 1, got {value!r}")
    return v


def preload() -> None:
    """Import what the tests compute with (numpy, scipy.stats) now. They load when a statistic is
    first computed, which takes a second of CPU on a quiet machine and many on a busy one: a
    caller that will judge at a moment that matters (autopin's verdict, while the program runs on
    its last-probed candidate) loads them beforehand."""
    import numpy  # noqa: F401
    import scipy.stats  # noqa: F401


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence numpy's and scipy's warnings around a scipy test. Degenerate samples (one run,
    all runs equal, all values tied, ...) never reach scipy: the stats modules decide them by
    their own documented rules. What is left is warnings scipy gives on regular samples (e.g.
    Shapiro-Wilk's "p may be inaccurate for N > 5000", or "precision loss" on nearly constant
    runs), which change no result."""
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            yield


def num(value) -> float:
    """A plain Python float (NaN stays NaN)."""
    return float(value)


def jsonable(value):
    """Plain JSON types: NaN and infinities become None, tuples lists, records dicts."""
    import numpy as np

    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


class Record:
    """Base of the frozen result dataclasses: ``to_dict()`` gives JSON-able plain data."""

    def to_dict(self) -> dict:
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
