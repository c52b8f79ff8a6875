"""What every stats module shares: checking a sample, quiet scipy calls, JSON-able records."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Iterator, Sequence

import numpy as np

from pinlab.errors import UsageError


class InvalidSample(UsageError, ValueError):
    """A sample or a parameter the statistics cannot use (empty, not finite, not positive, ...)."""


def as_sample(sample: Sequence[float], what: str = "sample") -> np.ndarray:
    """The run times as a 1-D float array; every time must be a finite number of seconds > 0."""
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
    return x


def check_level(value: float, name: str) -> float:
    """A probability strictly between 0 and 1 (a confidence level or a risk alpha)."""
    v = float(value)
    if not 0.0 < v < 1.0:
        raise InvalidSample(f"{name} must be strictly between 0 and 1, got {value!r}")
    return v


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence scipy's warnings on degenerate samples (zero range, n < 3, ...): the records say
    what is undefined (NaN / None / a validity flag) instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            yield


def num(value) -> float:
    """A plain Python float (NaN stays NaN)."""
    return float(value)


def jsonable(value):
    """Plain JSON types: NaN and infinities become None, tuples lists, records dicts."""
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
