"""A placement written in the syntax of the tools users already have, and read back from it.

The writers produce what a user pastes into a shell or a job script; the readers parse the
same syntax back (they are used by the tests to prove each export says what the placement says,
and accept what users write by hand too).
"""

from __future__ import annotations

import json
import re

from pinlab.cpuset import format_cpulist, parse_cpulist
from pinlab.errors import UsageError
from pinlab.placement.plan import Placement

FORMATS = ("list", "json", "omp", "kmp", "numactl", "taskset", "likwid", "slurm")


def export(placement: Placement, fmt: str) -> str:
    """The placement in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        return json.dumps(placement.to_json(), indent=2)
    cpus = placement.cpus
    allowed = format_cpulist(placement.allowed_cpus)
    n = placement.threads
    if cpus is None:  # 'none': no pinning, only the allowed set
        unpinned = {
            "list": "",
            "omp": f"export OMP_NUM_THREADS={n}\nexport OMP_PROC_BIND=false",
            "kmp": f"export OMP_NUM_THREADS={n}\nexport KMP_AFFINITY=none",
            "numactl": f"numactl --physcpubind={allowed}",
            "taskset": f"taskset -c {allowed}",
            "slurm": "--cpu-bind=none",
        }
        if fmt not in unpinned:
            raise UsageError("likwid-pin always pins threads; for the 'none' strategy use --format taskset or numactl")
        return unpinned[fmt]
    listed = ",".join(map(str, cpus))
    return {
        "list": listed,
        "omp": f"export OMP_NUM_THREADS={n}\nexport OMP_PLACES='{','.join('{%d}' % c for c in cpus)}'\nexport OMP_PROC_BIND=close",
        "kmp": f"export OMP_NUM_THREADS={n}\nexport KMP_AFFINITY='granularity=fine,explicit,proclist=[{listed}]'",
        "numactl": f"numactl --physcpubind={format_cpulist(cpus)}",
        "taskset": f"taskset -c {format_cpulist(cpus)}",
        "likwid": f"likwid-pin -c {listed}",
        "slurm": f"--cpu-bind=map_cpu:{listed}",
    }[fmt]


# -- readers -------------------------------------------------------------------------------------
def _interval(text: str) -> list[int]:
    """An OpenMP resource or place interval body: ``lo``, ``lo:len`` or ``lo:len:stride``."""
    fields = [int(f) for f in text.split(":")]
    if len(fields) == 1:
        return fields
    lo, length = fields[0], fields[1]
    stride = fields[2] if len(fields) > 2 else 1
    return [lo + k * stride for k in range(length)]


def parse_omp_places(text: str) -> list[frozenset[int]]:
    """Parse an explicit OMP_PLACES value (``{0},{4}``, ``{0:4}``, ``{0,1}:4:2``) into places."""
    places: list[frozenset[int]] = []
    for m in re.finditer(r"\{([^}]*)\}(:\d+(?::-?\d+)?)?", text.replace(" ", "")):
        resources: list[int] = []
        for item in m.group(1).split(","):
            resources.extend(_interval(item))
        place = frozenset(resources)
        if m.group(2):
            parts = [int(x) for x in m.group(2)[1:].split(":")]
            length, stride = parts[0], parts[1] if len(parts) > 1 else 1
            places.extend(frozenset(r + k * stride for r in place) for k in range(length))
        else:
            places.append(place)
    return places


def parse_kmp_affinity(text: str) -> list[int]:
    """The proclist of ``KMP_AFFINITY=...explicit,proclist=[...]`` in order."""
    m = re.search(r"proclist=\[([^\]]*)\]", text)
    if not m or "explicit" not in text:
        raise ValueError(f"not an explicit KMP_AFFINITY: {text!r}")
    return parse_cpulist(m.group(1))


def parse_map_cpu(text: str) -> list[int]:
    """The CPUs of Slurm's ``--cpu-bind=map_cpu:<list>`` in order (task i gets element i)."""
    m = re.search(r"map_cpu:([\d,]+)", text)
    if not m:
        raise ValueError(f"not a map_cpu binding: {text!r}")
    return [int(x) for x in m.group(1).split(",")]
